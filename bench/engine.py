"""Benchmark: microseconds per backward node of agdb's engine, with and without an observer, and against PyTorch.

Run it from the repository root:

    .venv/bin/python bench/engine.py                 # full run, 10k-node graphs (well under 2 minutes)
    .venv/bin/python bench/engine.py --quick         # ~1k-node graphs, few reps: a smoke test of a few seconds
    .venv/bin/python bench/engine.py --json out.json # also write the numbers as JSON

What is measured
----------------
Two graphs, each built fresh for every repetition (the build is not timed):

* ``chain``: a leaf ``x`` of shape (4,) with requires_grad, through 10,000 cheap ops cycling through
  ``y * 1.0001``, ``y + 0.5`` and ``y.sin()``, then ``.sum()``: one long dependency chain.
* ``mlp``: ``WIDTH`` parallel branches, each ``DEPTH`` layers of ``h = (h @ W_i + b_i).tanh()`` with
  ``h`` of shape (4, 8), ``W_i`` (8, 8) and ``b_i`` (8,), all starting from one shared leaf input and
  summed at the end (``AddBackward0`` per branch, then ``.sum()``): a wide graph where every layer also
  feeds two AccumulateGrad nodes.

Only the ``loss.backward()`` call (``retain_graph=False``) is timed, with ``time.perf_counter_ns``
and the garbage collector paused (as ``timeit`` does), 7 times per configuration (3 with ``--quick``);
the median is reported. The configurations run interleaved, after one untimed warm-up each, so that
load on the machine hits them alike:

* ``engine``: the engine with no observer attached;
* ``engine+noop-observer``: the engine with an observer attached through ``engine.add_observer`` whose
  every ``EngineObserver`` method is ``pass``, so every instrumentation point calls into Python
  (attached for the whole repetition, build included; only backward is timed);
* ``torch``: real PyTorch, when importable, on the same graph (same shapes, ops and float32 values).

The node count of a graph is the number of distinct nodes reached by walking ``grad_fn.next_functions``
from the loss' ``grad_fn``, AccumulateGrad nodes included. µs/node = median backward time / node count.
Ratios: no-op observer / no observer (target <= 1.15) and engine / torch (target <= 3). A missed target
is reported, not raised: this is a benchmark, not a test.
"""
from __future__ import annotations

import gc
import inspect
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from _common import bench_main, count_nodes  # noqa: E402 - bench/ is the script's directory

# Run as `python bench/engine.py`, Python puts bench/ first on sys.path, where this very file would shadow
# the `engine` package: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

import engine  # noqa: E402
from engine._observer import EngineObserver  # noqa: E402

try:
    import torch
except ImportError:  # the torch comparison is optional
    torch = None

OBSERVER_TARGET = 1.15
"""Target for median backward time with a no-op observer / without an observer."""
TORCH_TARGET = 3.0
"""Target for median backward time of the engine (no observer) / real PyTorch."""

FULL = {"chain_ops": 10_000, "mlp_width": 100, "mlp_depth": 20, "reps": 7}
QUICK = {"chain_ops": 1_000, "mlp_width": 10, "mlp_depth": 20, "reps": 3}


class NoopObserver:
    """Implements every EngineObserver method as `pass`, so each instrumentation point calls into Python."""

    def seq_nr_bumped(self, node, seq_nr):
        pass

    def node_created(self, node):
        pass

    def graph_task_started(self, graph_task):
        pass

    def dependencies_computed(self, graph_task, min_topo_nr, pruned):
        pass

    def exec_info_computed(self, graph_task):
        pass

    def task_pushed(self, graph_task, task, queue):
        pass

    def task_popped(self, graph_task, task, queue):
        pass

    def buffer_written(self, graph_task, node, slot, is_accumulation, buffer):
        pass

    def hook_ran(self, graph_task, node, kind, hook):
        pass

    def node_started(self, graph_task, node, inputs):
        pass

    def node_finished(self, graph_task, node, outputs):
        pass

    def grad_captured(self, graph_task, node, output_index, grad):
        pass

    def grad_accumulated(self, graph_task, node, variable, grad):
        pass

    def error_raised(self, graph_task, node, error):
        pass

    def graph_task_finished(self, graph_task):
        pass

    def op_called(self, call):
        pass


def _protocol_methods() -> set[str]:
    return {name for name, value in vars(EngineObserver).items()
            if inspect.isfunction(value) and not name.startswith("_")}


_missing = _protocol_methods() - set(vars(NoopObserver))
if _missing:  # the protocol grew: the "every point calls into Python" claim would be false
    raise SystemExit(f"NoopObserver lacks EngineObserver methods: {sorted(_missing)}")


# -- graphs ------------------------------------------------------------------------------------------------
def build_chain(lib: Any, n_ops: int) -> Any:
    """x (4,) -> n_ops ops cycling through *1.0001, +0.5, sin -> sum; returns the loss."""
    x = lib.ones(4, requires_grad=True)
    y = x
    for i in range(n_ops):
        k = i % 3
        if k == 0:
            y = y * 1.0001
        elif k == 1:
            y = y + 0.5
        else:
            y = y.sin()
    return y.sum()


def mlp_arrays(width: int, depth: int, seed: int = 0) -> tuple[np.ndarray, list[list[tuple[np.ndarray, np.ndarray]]]]:
    """The float32 input and per-branch (W, b) values, shared by the engine and torch builds."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    params = [[((rng.standard_normal((8, 8)) * 0.35).astype(np.float32),
                (rng.standard_normal(8) * 0.1).astype(np.float32)) for _ in range(depth)]
              for _ in range(width)]
    return x, params


def build_mlp(lib: Any, arrays: tuple) -> Any:
    """`width` branches of `depth` layers h = tanh(h @ W + b) from one leaf input, summed; returns the loss."""
    x_arr, params = arrays
    x = lib.tensor(x_arr, requires_grad=True)
    out = None
    for branch in params:
        h = x
        for w_arr, b_arr in branch:
            w = lib.tensor(w_arr, requires_grad=True)
            b = lib.tensor(b_arr, requires_grad=True)
            h = (h @ w + b).tanh()
        out = h if out is None else out + h
    return out.sum()



# -- timing ------------------------------------------------------------------------------------------------
def time_backward(build: Callable[[], Any]) -> float:
    """Build a fresh graph (untimed), then time one loss.backward(); returns nanoseconds."""
    loss = build()
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        loss.backward(retain_graph=False)
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    del loss
    return float(elapsed)


class Config:
    """One way of running a graph: which library, and whether a no-op observer is attached."""

    def __init__(self, name: str, lib: Any, observed: bool = False) -> None:
        self.name = name
        self.lib = lib
        self.observed = observed

    def run(self, build: Callable[[Any], Any]) -> float:
        if not self.observed:
            return time_backward(lambda: build(self.lib))
        handle = engine.add_observer(NoopObserver())
        try:
            return time_backward(lambda: build(self.lib))
        finally:
            handle.remove()


def measure(graph_build: Callable[[Any], Any], configs: list[Config], reps: int) -> dict[str, list[float]]:
    """Per config, `reps` backward times in ns; configs interleaved, each warmed up once first."""
    for config in configs:
        config.run(graph_build)
    times: dict[str, list[float]] = {c.name: [] for c in configs}
    for _ in range(reps):
        for config in configs:
            times[config.name].append(config.run(graph_build))
    return times


# -- main --------------------------------------------------------------------------------------------------
def run(quick: bool, reps: int | None) -> dict:
    # Move everything alive now (the torch import: ~1e5 objects) out of the collector's reach, so the
    # gc.collect() before each repetition is cheap.
    gc.collect()
    gc.freeze()
    sizes = dict(QUICK if quick else FULL)
    if reps is not None:
        sizes["reps"] = reps
    reps = sizes["reps"]
    configs = [Config("engine", engine), Config("engine+noop-observer", engine, observed=True)]
    if torch is not None:
        configs.append(Config("torch", torch))

    arrays = mlp_arrays(sizes["mlp_width"], sizes["mlp_depth"])
    graphs = {
        "chain": (lambda lib: build_chain(lib, sizes["chain_ops"]),
                  f"x(4,) -> {sizes['chain_ops']} ops (*1.0001, +0.5, sin) -> sum"),
        "mlp": (lambda lib: build_mlp(lib, arrays),
                f"{sizes['mlp_width']} branches x {sizes['mlp_depth']} layers tanh(h(4,8) @ W(8,8) + b(8,)), summed"),
    }

    result: dict = {
        "meta": {
            "quick": quick, "reps": reps, "sizes": sizes,
            "python": platform.python_version(), "numpy": np.__version__, "engine": engine.__version__,
            "torch": torch.__version__ if torch is not None else None, "platform": platform.platform(),
        },
        "targets": {"noop_observer_over_engine": OBSERVER_TARGET, "engine_over_torch": TORCH_TARGET},
        "graphs": {},
        "results": [],
        "checks": [],
    }
    for gname, (build, description) in graphs.items():
        nodes = {c.name: None for c in configs}
        for lib_name, lib in (("engine", engine), ("torch", torch)):
            if lib is not None:
                nodes[lib_name] = count_nodes(build(lib).grad_fn)
        n_engine = nodes["engine"]
        result["graphs"][gname] = {"description": description, "nodes": n_engine, "torch_nodes": nodes.get("torch")}
        times = measure(build, configs, reps)
        medians, per_node = {}, {}
        for config in configs:
            n = nodes["torch"] if config.lib is torch else n_engine
            median_ns = statistics.median(times[config.name])
            medians[config.name] = median_ns
            per_node[config.name] = median_ns / 1e3 / n
            result["results"].append({
                "graph": gname, "config": config.name, "nodes": n, "reps": reps,
                "times_ms": [t / 1e6 for t in times[config.name]],
                "median_ms": median_ns / 1e6, "min_ms": min(times[config.name]) / 1e6,
                "us_per_node": per_node[config.name],
            })
        ratio = medians["engine+noop-observer"] / medians["engine"]
        result["checks"].append({"graph": gname, "name": "engine+noop-observer / engine", "ratio": ratio,
                                 "target": OBSERVER_TARGET, "met": ratio <= OBSERVER_TARGET})
        if "torch" in medians:
            # Per node, so a differing node count (there should be none) does not skew the ratio.
            ratio = per_node["engine"] / per_node["torch"]
            result["checks"].append({"graph": gname, "name": "engine / torch", "ratio": ratio,
                                     "target": TORCH_TARGET, "met": ratio <= TORCH_TARGET})
    return result


def print_report(result: dict) -> None:
    meta = result["meta"]
    print(f"agdb engine backward benchmark ({'quick' if meta['quick'] else 'full'}, median of {meta['reps']} reps; "
          f"python {meta['python']}, numpy {meta['numpy']}, torch {meta['torch'] or 'not installed'})")
    print()
    for gname, g in result["graphs"].items():
        extra = "" if g["torch_nodes"] in (None, g["nodes"]) else f"  (torch graph: {g['torch_nodes']} nodes!)"
        print(f"  {gname}: {g['description']}{extra}")
    print()
    checks = {(c["graph"], c["name"]): c for c in result["checks"]}
    header = f"{'graph':<7}{'nodes':>7}  {'config':<22}{'median ms':>11}{'µs/node':>10}  ratio"
    print(header)
    print("-" * (len(header) + 24))
    for row in result["results"]:
        if row["config"] == "engine+noop-observer":
            ratio = f"{checks[(row['graph'], 'engine+noop-observer / engine')]['ratio']:.2f}x  (observer / engine)"
        elif row["config"] == "torch":
            ratio = f"{checks[(row['graph'], 'engine / torch')]['ratio']:.1f}x  (engine / torch)"
        else:
            ratio = ""
        print(f"{row['graph']:<7}{row['nodes']:>7}  {row['config']:<22}{row['median_ms']:>11.2f}"
              f"{row['us_per_node']:>10.2f}  {ratio}")
    print()
    print("targets:")
    for c in result["checks"]:
        print(f"  {c['graph']:<6} {c['name']:<30} {c['ratio']:7.2f}x  target <= {c['target']:g}x  "
              f"{'met' if c['met'] else 'NOT met'}")
    if torch is None:
        print("  (torch is not importable: engine / torch not measured)")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line."""
    return bench_main(__doc__, run, print_report,
                      quick_help='~1k-node graphs and 3 reps: a few seconds',
                      reps_help='timed repetitions per config (default 7, quick 3)', argv=argv)


if __name__ == "__main__":
    sys.exit(main())
