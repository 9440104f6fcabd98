"""Benchmark: what capturing a joint FX graph costs against a plain forward + backward on the engine.

Run it from the repository root:

    .venv/bin/python bench/fx.py                 # a 10k-op model (x 5 reps, ~15 s)
    .venv/bin/python bench/fx.py --quick         # a ~500-op model: a smoke test of a second
    .venv/bin/python bench/fx.py --json out.json # also write the numbers as JSON

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


if __name__ == "__main__":
    sys.exit(bench_main(__doc__, run, report, "a ~500-op model", "repetitions (default 5; --quick 2)"))
