"""Benchmark: what executing agdb again for a big main-thread stack costs `agdb torch` (NOTE [the main thread's stack]).

Run it from the repository root:

    .venv/bin/python bench/main_stack.py            # 9 runs of each
    .venv/bin/python bench/main_stack.py --quick    # 2 runs of each
    .venv/bin/python bench/main_stack.py --json out.json

What is measured
----------------
`python -m agdb torch TINY -o FILE` on a three-line script (one backward on real torch), in a subprocess, with the
soft stack limit at 8 MiB (agdb raises it and executes itself again) and at 1 GiB (agdb runs at once), alternated
run by run because the machine is shared. Reported: the median wall time of each, and the child's CPU time (user
+ sys, from `resource.getrusage(RUSAGE_CHILDREN)`), which a loaded machine disturbs less; the difference is the
price of the second start (Python and agdb's imports, before torch's).
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bench_main  # noqa: E402

TINY = "import torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n"
LIMITS = {"8 MiB (executes again)": 8 << 20, "1 GiB (runs at once)": 1 << 30}


def _once(folder: Path, limit: int) -> tuple[float, float]:
    """Wall and CPU seconds of one `agdb torch` run with soft stack limit `limit`."""
    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_STACK, (limit, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "agdb", "torch", "tiny.py", "-o", "tiny.agdb"], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=set_limit)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(quick: bool, reps: int | None) -> dict:
    reps = reps or (2 if quick else 9)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in LIMITS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "tiny.py").write_text(TINY)
        for _ in range(reps):
            for name, limit in LIMITS.items():
                times[name].append(_once(folder, limit))
    return {name: {"wall_s": statistics.median(w for w, _ in rows), "cpu_s": statistics.median(c for _, c in rows),
                   "reps": reps} for name, rows in times.items()}


def report(result: dict) -> None:
    for name, row in result.items():
        print(f"{name:<26} wall {row['wall_s']:.2f} s  cpu {row['cpu_s']:.2f} s  (median of {row['reps']})")


if __name__ == "__main__":
    sys.exit(bench_main(__doc__, run, report, quick_help="2 runs of each", reps_help="runs of each (default 9)"))
