"""The `agdb` command's entry point (and `python -m agdb`'s).

It imports the command line itself, so that a Ctrl-C during those imports (the first second or so of every
command, before agdb arms its own handlers: NOTE [signals and the script] in app/signals.py) ends agdb as Python
killed by SIGINT does, with no traceback of agdb's imports.
"""
from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    try:
        from agdb.app.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 128 + signal.SIGINT  # only if SIGINT did not end the process
    return cli_main()
