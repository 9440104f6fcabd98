"""One rank of `agdb torch --nproc` (NOTE [one trace per rank] in launch.py): `python -m agdb.app.rank_worker
OUTPUT [--single-threaded] SCRIPT -- [ARGS...]` is `agdb torch SCRIPT -o OUTPUT's rank trace`, its rank read from
RANK as torch's launcher sets it."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> int:
    output, *rest = sys.argv[1:]
    rank = int(os.environ["RANK"])
    # the ranks share one terminal: no live status line each (rich reads this when agdb's console is made)
    had = os.environ.get("TTY_INTERACTIVE")
    os.environ["TTY_INTERACTIVE"] = "0"
    from . import signals
    from .cli import main as agdb
    from .launch import rank_path

    signals.SAVE_WHEN_BLOCKED = True  # NOTE [a stop signal while blocked in C++] in blocked.py

    if had is None:
        os.environ.pop("TTY_INTERACTIVE")  # the script sees the environment it would under torchrun
    else:
        os.environ["TTY_INTERACTIVE"] = had
    sys.argv = [sys.argv[0], "torch", "-o", str(rank_path(Path(output), rank)), *rest]
    return agdb()


if __name__ == "__main__":
    sys.exit(main())
