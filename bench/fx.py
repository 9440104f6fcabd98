"""Benchmark: what capturing a joint FX graph costs against a plain forward + backward on the engine.

Run it from the repository root:

    .venv/bin/python bench/fx.py                 # a 10k-op model (x 5 reps, ~15 s)
    .venv/bin/python bench/fx.py --quick         # a ~500-op model: a smoke test of a second
    .venv/bin/python bench/fx.py --json out.json # also write the numbers as JSON
    .venv/bin/python bench/fx.py --torch-run     # agdb fx --torch on a compiled transformer against its own run

The model: a leaf x of shape (8,) and a chain of cheap ops cycling through `y * 1.0001`, `y.sin()` and
`y + x` (x used at every third op, so gradients are summed in its buffer: grad-acc nodes), ending in
`.sum()`: 10,000 forward ops. `plain` runs the forward and `autograd.grad` (what capture_joint runs); `capture`
runs `tracer.fx.capture_joint` on the same function. The two alternate, each timed in CPU time of the process
(`time.process_time`: on a machine shared with other work, wall time measures the neighbours too), with
the garbage collector paused and what was alive before frozen; medians of the reps. Target: capture / plain <= 3.
"""
from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agdb import engine  # noqa: E402
from agdb.tracer.fx import capture_joint  # noqa: E402
from bench._common import bench_main  # noqa: E402

TARGET = 3.0


def model(n_ops: int):
    def f(x):
        y = x
        for i in range(n_ops - 1):
            k = i % 3
            y = y * 1.0001 if k == 0 else y.sin() if k == 1 else y + x
        return y.sum()
    return f


def _time(fn) -> float:
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        t0 = time.process_time()
        fn()
        return (time.process_time() - t0) * 1e3
    finally:
        gc.enable()
        gc.unfreeze()


def run(quick: bool, reps: int | None) -> dict:
    n_ops = 500 if quick else 10_000
    reps = reps or (2 if quick else 5)
    f = model(n_ops)
    x = engine.randn(8, requires_grad=True)

    def plain():
        engine.autograd.grad(f(x), [x])

    nodes = {}

    def capture():
        nodes["n"] = len(capture_joint(f, x))

    plain(), capture()  # warm-up
    times = {"plain": [], "capture": []}
    for _ in range(reps):
        times["plain"].append(_time(plain))
        times["capture"].append(_time(capture))
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["capture"] / med["plain"]
    return {"meta": {"ops": n_ops, "reps": reps, "fx_nodes": nodes["n"]}, "times_ms": times,
            "median_ms": med, "ratio": ratio, "target": TARGET, "checks": {"ratio_within_target": ratio <= TARGET}}


def report(r: dict) -> None:
    m = r["median_ms"]
    print(f"{r['meta']['ops']:,} forward ops, {r['meta']['fx_nodes']:,} FX nodes: plain forward+backward "
          f"{m['plain']:.1f} ms, capture_joint {m['capture']:.1f} ms, ratio {r['ratio']:.2f} "
          f"(target <= {r['target']:.0f}: {'met' if r['checks']['ratio_within_target'] else 'NOT met'})")


TORCH_RUN_TARGET = 1.5
PROGRAM = Path(__file__).resolve().parent / "programs" / "transformer_block.py"


def torch_run(rounds: int) -> dict:
    """`python PROGRAM` against `agdb fx --torch PROGRAM`, each a process of its own, alternated; the CPU time of
    each process and its children (user + system, from rusage: Inductor compiles kernels in worker processes) and
    its wall time. The program compiles a 2-layer transformer with Inductor and trains it 3 steps: the capture
    rides on that compile (target: at most 1.5x). Every run gets an empty Inductor cache directory."""
    import os
    import resource
    import subprocess

    agdb = str(Path(sys.executable).with_name("agdb"))
    commands = {"plain": [sys.executable, str(PROGRAM)], "agdb": [agdb, "fx", "--torch", str(PROGRAM)]}
    times: dict[str, list[float]] = {"plain": [], "agdb": []}
    walls: dict[str, list[float]] = {"plain": [], "agdb": []}
    import tempfile

    for i in range(rounds):
        for name in (("plain", "agdb") if i % 2 == 0 else ("agdb", "plain")):
            # a cache directory of its own: each run compiles its kernels from scratch, as a first run does
            cache = tempfile.mkdtemp(prefix="agdb-bench-inductor-")
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
                   "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(commands[name], check=True, stdout=subprocess.DEVNULL, env=env)
            walls[name].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            subprocess.run(["rm", "-rf", cache], check=False)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["agdb"] / med["plain"]
    return {"rounds": rounds, "cpu_s": times, "wall_s": walls, "median_cpu_s": med, "ratio": ratio,
            "target": TORCH_RUN_TARGET, "met": ratio <= TORCH_RUN_TARGET}


if __name__ == "__main__" and "--torch-run" in sys.argv:
    result = torch_run(int(sys.argv[sys.argv.index("--torch-run") + 1]) if sys.argv[-1].isdigit() else 4)
    print(f"{PROGRAM.name}, {result['rounds']} rounds alternated: python {result['median_cpu_s']['plain']:.2f} s CPU, "
          f"agdb fx --torch {result['median_cpu_s']['agdb']:.2f} s CPU (medians), ratio {result['ratio']:.2f} "
          f"(target <= {TORCH_RUN_TARGET}: {'met' if result['met'] else 'NOT met'}); wall s: {result['wall_s']}")
    sys.exit(0)

if __name__ == "__main__":
    sys.exit(bench_main(__doc__, run, report, "a ~500-op model", "repetitions (default 5; --quick 2)"))
