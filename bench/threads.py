"""Benchmark: what a device hop and a reentrant backward cost in agdb's engine.

Run it from the repository root:

    .venv/bin/python bench/threads.py                 # full run (about 15 s)
    .venv/bin/python bench/threads.py --quick         # small graphs, few reps: a smoke test of a few seconds
    .venv/bin/python bench/threads.py --json out.json # also write the numbers as JSON

Devices are labels in the engine, but each ``cuda:N`` device's backward tasks run on that device's worker
thread (engine/_threads.py, NOTE [device threads]): a task whose node is on another device than the one
before it goes to another thread's ready queue, and the two threads hand the GIL back and forth.

What is measured
----------------
1. **Device hops.** A leaf ``x`` of shape (4,) with requires_grad, through P = 1,500 (``--quick``: 200) of
   ``y = y.to("cuda:0") * 1.0001; y = y.to("cpu") + 0.5``, then ``.sum()``. Backward alternates
   two cpu nodes and two cuda:0 nodes: 4P + 2 nodes, 2P device switches. Three configurations:

   * ``cpu-only``: the same chain with ``.to("cpu", copy=True)`` in place of both ``.to(...)`` calls, so
     it has the same nodes (ToCopyBackward0 included), all on cpu: no hop;
   * ``cpu<->cuda:0 threads``: the device chain, cuda:0 nodes running on the ``pt_autograd_0`` thread;
   * ``cpu<->cuda:0 no-threads``: the device chain under
     ``engine.autograd.set_multithreading_enabled(False)``: every task on the calling thread.

   Nodes are counted by walking ``grad_fn.next_functions`` from the loss (AccumulateGrad included); hops
   are the edges of that walk whose two nodes report different ``node.device()``. µs/node = median
   backward time / nodes; µs/hop = (median backward time - the cpu-only median) / hops: the extra cost of
   one device switch over the same work on one thread.

2. **Reentrant calls.** ``x`` (4,) through N = 1,000 (``--quick``: 100) custom ``engine.autograd.Function``
   nodes (forward ``a.clone()``, input saved), then ``.sum()``. Each node's backward, under
   ``enable_grad``, builds a 3-node inner graph ``(a.detach().requires_grad_() * 2.0).sum()``
   (SumBackward0, MulBackward0, AccumulateGrad) and returns ``g``:

   * ``reentrant``: the backward also calls ``engine.autograd.backward`` on the inner graph: a
     reentrant backward from inside a running node, on the calling thread;
   * ``plain``: the same backward body without that call (same inner graph built, same return).

   µs per reentrant backward = (reentrant median - plain median) / N: the whole inner call,
   its three nodes included. For scale, ``top-level`` times the same ``engine.autograd.backward`` on the
   same 3-node graph called from outside any backward (N graphs prebuilt, untimed; N calls timed).

3. **Hand-off to the reentrant pool thread.** ``Nest`` as in the reference experiment
   e6_reentrant.py: a Function whose backward at depth d > 0 runs ``Nest.apply(ones(1), d - 1).sum()
   .backward()``, so a depth-D chain nests D reentrant backward calls. The engine moves a call nested
   MAX_DEPTH (60) deep on one thread to a pool thread: the 30- and 50-deep chains never leave the
   calling thread, the 70-deep one hands its last 10 levels to the pool thread once (the thread each
   level ran on is recorded and checked). Reported: µs/level = median time / depth; the marginal cost of
   a level, (T50 - T30) / 20 on one thread and (T70 - T50) / 20 across the hand-off; the extra time of
   the 70-deep run over linear, (T70 - T50) - (T50 - T30), a difference of differences of ~10 ms runs
   (noisy, and it also holds the slower first levels on the pool thread); and the hand-off itself from a
   timeline: each level's backward records perf_counter_ns at its start and end, a level's own time is
   its span minus the span of the level it nests, and the hand-off (there and back) is the own time of
   the level whose nested level ran on the pool thread minus the median own time of the other levels of
   the same run (median over the 70-deep repetitions).

A device hop and a pool hand-off are thread wake-ups, and what those cost depends on the OS and on
whether the other CPU is idle: on a 2-vCPU VM, waking a thread whose CPU is idle costs far more than
a switch on one CPU (compare a run under ``taskset -c 0``). Expect these two figures to move by 3-4x
between machines and with load; the cpu-only and reentrant figures move much less.

Only the ``backward()`` call is timed, with ``time.perf_counter_ns`` and the garbage collector paused (as
``timeit`` does), the graph built fresh and untimed before each repetition; configurations of one part run
interleaved, after one untimed warm-up each, and the median of the repetitions is reported: 11 for part
1, 7 for part 2, 61 for part 3 (``--quick``: 3, 3, 5; ``--reps`` sets parts 1 and 2). Part 3's
timeline adds two perf_counter_ns calls per level, well under 1 µs. Nothing here is a target: numbers are
reported, not checked, except that part 3 warns when its thread layout is not the one described. The load
average before and after the run is printed, as hops are sensitive to other work on the machine.
"""
from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import threading
import time
from typing import Any, Callable

import numpy as np
from _common import bench_main, count_nodes

from agdb import engine
from agdb.engine._engine import MAX_DEPTH

FULL = {"hop_pairs": 1_500, "hop_reps": 11, "reentrant_nodes": 1_000, "reentrant_reps": 7,
        "nest_depths": (30, 50, 70), "nest_reps": 61}
QUICK = {"hop_pairs": 200, "hop_reps": 3, "reentrant_nodes": 100, "reentrant_reps": 3,
         "nest_depths": (30, 50, 70), "nest_reps": 5}
DEVICE = "cuda:0"


# -- graphs ------------------------------------------------------------------------------------------------
def build_hop_chain(pairs: int, device: str | None) -> Any:
    """x (4,) -> `pairs` x [.to(device) * 1.0001, .to(cpu) + 0.5] -> sum; device None: a cpu copy instead."""
    x = engine.ones(4, requires_grad=True)
    y = x
    for _ in range(pairs):
        if device is None:
            y = y.to("cpu", copy=True) * 1.0001
            y = y.to("cpu", copy=True) + 0.5
        else:
            y = y.to(device) * 1.0001
            y = y.to("cpu") + 0.5
    return y.sum()


def inner_graph(a: Any) -> Any:
    """The 3-node inner graph of part 2: (a.detach().requires_grad_() * 2.0).sum()."""
    q = a.detach().requires_grad_()
    return (q * 2.0).sum()


class Reentrant(engine.autograd.Function):
    """Backward builds the inner graph and runs a reentrant backward on it."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a.clone()

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with engine.enable_grad():
            r = inner_graph(a)
            engine.autograd.backward(r)
        return g


class Plain(engine.autograd.Function):
    """Reentrant's backward without the inner engine.autograd.backward call."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a.clone()

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with engine.enable_grad():
            r = inner_graph(a)
        del r
        return g


def build_function_chain(cls: type, n: int) -> Any:
    """x (4,) -> n nodes of the custom Function `cls` -> sum."""
    x = engine.ones(4, requires_grad=True)
    y = x
    for _ in range(n):
        y = cls.apply(y)
    return y.sum()


NEST_LOG: dict[int, list] = {}
"""Per Nest level of the current run: [thread ident, perf_counter_ns at backward start, at backward end]."""


class Nest(engine.autograd.Function):
    """e6_reentrant.py's Nest: backward at depth d > 0 runs a backward through a depth d - 1 Nest."""

    @staticmethod
    def forward(ctx, a, depth):
        ctx.depth = depth
        return a.clone()

    @staticmethod
    def backward(ctx, g):
        entry = NEST_LOG[ctx.depth] = [threading.get_ident(), time.perf_counter_ns(), 0]
        if ctx.depth > 0:
            with engine.enable_grad():
                q = engine.ones(1, requires_grad=True)
                Nest.apply(q, ctx.depth - 1).sum().backward()
        entry[2] = time.perf_counter_ns()
        return g, None


def build_nest(depth: int) -> Any:
    q = engine.ones(1, requires_grad=True)
    return Nest.apply(q, depth).sum()


def walk(root: Any) -> list[Any]:
    """Distinct nodes reachable from `root` through next_functions, AccumulateGrad included."""
    seen = {id(root): root}  # keep the node objects alive so their ids stay unique
    stack = [root]
    while stack:
        fn = stack.pop()
        for nxt, _ in fn.next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return list(seen.values())



def count_hops(root: Any) -> int:
    """Edges between two nodes on different devices: each sends a task to another device's queue."""
    return sum(1 for fn in walk(root) for nxt, _ in fn.next_functions
               if nxt is not None and nxt.device() != fn.device())


# -- timing ------------------------------------------------------------------------------------------------
def timed(call: Callable[[], Any]) -> float:
    """Time call() with the collector paused (after a collection); returns nanoseconds."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        call()
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return float(elapsed)


def time_backward(build: Callable[[], Any], multithreading: bool = True) -> float:
    """Build a fresh graph (untimed), then time one loss.backward(); returns nanoseconds."""
    loss = build()
    with engine.autograd.set_multithreading_enabled(multithreading):
        elapsed = timed(loss.backward)
    del loss
    return elapsed


def measure(configs: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """Per config, `reps` times in ns; configs interleaved, each warmed up once first."""
    for run_once in configs.values():
        run_once()
    times: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(reps):
        for name, run_once in configs.items():
            times[name].append(run_once())
    return times


def summary(times_ns: list[float]) -> dict:
    return {"reps": len(times_ns), "times_ms": [t / 1e6 for t in times_ns],
            "median_ms": statistics.median(times_ns) / 1e6, "min_ms": min(times_ns) / 1e6}


# -- the three parts ---------------------------------------------------------------------------------------
def run_hops(pairs: int, reps: int) -> dict:
    builds = {"cpu-only": lambda: build_hop_chain(pairs, None),
              f"cpu<->{DEVICE} threads": lambda: build_hop_chain(pairs, DEVICE),
              f"cpu<->{DEVICE} no-threads": lambda: build_hop_chain(pairs, DEVICE)}
    threaded = {"cpu-only": True, f"cpu<->{DEVICE} threads": True, f"cpu<->{DEVICE} no-threads": False}
    shape = {}
    for name, build in builds.items():
        root = build().grad_fn
        shape[name] = (count_nodes(root), count_hops(root))
    nodes = shape["cpu-only"][0]
    if any(n != nodes for n, _ in shape.values()):
        raise SystemExit(f"hop chains differ in node count: {shape}")
    times = measure({name: (lambda b=build, mt=threaded[name]: time_backward(b, mt))
                     for name, build in builds.items()}, reps)
    base_ns = statistics.median(times["cpu-only"])
    results = []
    for name in builds:
        row = {"config": name, "multithreading": threaded[name], "nodes": shape[name][0], "hops": shape[name][1],
               **summary(times[name])}
        row["us_per_node"] = row["median_ms"] * 1e3 / row["nodes"]
        row["us_per_hop"] = ((row["median_ms"] * 1e6 - base_ns) / 1e3 / row["hops"]) if row["hops"] else None
        results.append(row)
    return {"description": f"x(4,) -> {pairs} x [.to({DEVICE}) * 1.0001, .to(cpu) + 0.5] -> sum "
                           f"(cpu-only: .to(cpu, copy=True) both times)",
            "pairs": pairs, "nodes": nodes, "hops": shape[f"cpu<->{DEVICE} threads"][1], "results": results}


def time_toplevel_calls(n: int) -> float:
    """n top-level engine.autograd.backward calls on prebuilt 3-node inner graphs; returns total ns."""
    a = engine.ones(4)
    graphs = [inner_graph(a) for _ in range(n)]

    def calls() -> None:
        for r in graphs:
            engine.autograd.backward(r)

    elapsed = timed(calls)
    graphs.clear()
    return elapsed


def run_reentrant(n: int, reps: int) -> dict:
    inner_nodes = count_nodes(inner_graph(engine.ones(4)).grad_fn)
    nodes = count_nodes(build_function_chain(Plain, n).grad_fn)
    times = measure({"reentrant": lambda: time_backward(lambda: build_function_chain(Reentrant, n)),
                     "plain": lambda: time_backward(lambda: build_function_chain(Plain, n)),
                     "top-level": lambda: time_toplevel_calls(n)}, reps)
    results = []
    for name in ("reentrant", "plain"):
        row = {"config": name, "nodes": nodes, **summary(times[name])}
        row["us_per_node"] = row["median_ms"] * 1e3 / nodes
        results.append(row)
    top = {"config": "top-level", "calls": n, **summary(times["top-level"])}
    top["us_per_call"] = top["median_ms"] * 1e3 / n
    results.append(top)
    per_call = (statistics.median(times["reentrant"]) - statistics.median(times["plain"])) / 1e3 / n
    return {"description": f"x(4,) -> {n} custom Function nodes (backward builds (a * 2.0).sum(), "
                           f"{inner_nodes} nodes, and runs backward on it) -> sum",
            "functions": n, "nodes": nodes, "inner_nodes": inner_nodes, "results": results,
            "us_per_reentrant_backward": per_call, "us_per_toplevel_backward": top["us_per_call"]}


def nest_timeline(caller: int) -> tuple[int, int, float | None]:
    """From NEST_LOG: (levels run on `caller`, distinct threads, hand-off excess in ns or None).

    A level's own time is its backward's span minus the span of the level it nests; at the level whose
    nested level runs on another thread, that own time also holds the hand-off there and back. Hand-off
    excess = that level's own time - the median own time of the levels nesting one on the same thread.
    """
    log = NEST_LOG
    on_caller = sum(1 for thread, _, _ in log.values() if thread == caller)
    threads = len({thread for thread, _, _ in log.values()})
    own_same, own_cross = [], []
    for depth in range(1, max(log) + 1):
        (outer_thread, start, end), (inner_thread, inner_start, inner_end) = log[depth], log[depth - 1]
        own = (end - start) - (inner_end - inner_start)
        (own_same if inner_thread == outer_thread else own_cross).append(own)
    excess = own_cross[0] - statistics.median(own_same) if len(own_cross) == 1 and own_same else None
    return on_caller, threads, excess


def time_nest(depth: int, layouts: dict[int, set], excess: dict[int, list]) -> float:
    NEST_LOG.clear()
    elapsed = time_backward(lambda: build_nest(depth))
    on_caller, threads, handoff_ns = nest_timeline(threading.get_ident())
    layouts[depth].add((on_caller, threads))
    if handoff_ns is not None:
        excess[depth].append(handoff_ns)
    NEST_LOG.clear()
    return elapsed


def run_nested(depths: tuple[int, int, int], reps: int) -> dict:
    layouts: dict[int, set] = {d: set() for d in depths}
    excess: dict[int, list] = {d: [] for d in depths}
    times = measure({str(d): (lambda d=d: time_nest(d, layouts, excess)) for d in depths}, reps)
    medians = {d: statistics.median(times[str(d)]) for d in depths}
    results = []
    for d in depths:
        (on_caller, n_threads), *others = sorted(layouts[d])
        row = {"depth": d, "backward_calls": d + 1, "levels_on_calling_thread": on_caller, "threads": n_threads,
               "layout_stable": not others, **summary(times[str(d)])}
        row["us_per_level"] = row["median_ms"] * 1e3 / d
        results.append(row)
    lo, mid, hi = depths
    one_thread = (medians[mid] - medians[lo]) / 1e3 / (mid - lo)
    across = (medians[hi] - medians[mid]) / 1e3 / (hi - mid)
    extra = ((medians[hi] - medians[mid]) - (medians[mid] - medians[lo]) * (hi - mid) / (mid - lo)) / 1e3
    expected = {lo: (lo + 1, 1), mid: (mid + 1, 1), hi: (MAX_DEPTH + 1, 2)}
    layout_ok = all(r["layout_stable"] and (r["levels_on_calling_thread"], r["threads"]) == expected[r["depth"]]
                    for r in results)
    gaps = excess[hi][-reps:]  # the timed reps, not the warm-up
    return {"description": "Nest (e6_reentrant.py): each level's backward runs the next level's backward",
            "max_depth": MAX_DEPTH, "depths": list(depths), "results": results, "layout_as_expected": layout_ok,
            "us_per_level_one_thread": one_thread, "us_per_level_across_handoff": across,
            "us_extra_across_handoff": extra,
            "us_per_handoff": statistics.median(gaps) / 1e3 if gaps else None,
            "handoff_us": [g / 1e3 for g in gaps]}


# -- main --------------------------------------------------------------------------------------------------
def run(quick: bool, reps: int | None) -> dict:
    gc.collect()
    gc.freeze()  # everything alive now is out of the collector's reach: the per-rep collections stay cheap
    sizes = dict(QUICK if quick else FULL)
    if reps is not None:
        sizes["hop_reps"] = sizes["reentrant_reps"] = reps
    result: dict = {
        "meta": {
            "quick": quick, "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
            "python": platform.python_version(), "numpy": np.__version__, "engine": engine.__version__,
            "platform": platform.platform(), "cpus": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
            "switch_interval_s": sys.getswitchinterval(),
            "loadavg_before": list(os.getloadavg()),
        },
        "hops": run_hops(sizes["hop_pairs"], sizes["hop_reps"]),
        "reentrant": run_reentrant(sizes["reentrant_nodes"], sizes["reentrant_reps"]),
        "nested": run_nested(sizes["nest_depths"], sizes["nest_reps"]),
    }
    result["meta"]["loadavg_after"] = list(os.getloadavg())
    return result


def print_report(result: dict) -> None:
    meta, sizes = result["meta"], result["meta"]["sizes"]
    print(f"agdb engine: device hops and reentrant backward ({'quick' if meta['quick'] else 'full'}; "
          f"python {meta['python']}, numpy {meta['numpy']}, {meta['cpus_usable']} of {meta['cpus']} CPUs; load average "
          f"{meta['loadavg_before'][0]:.2f} before, {meta['loadavg_after'][0]:.2f} after)")

    hops = result["hops"]
    print()
    print(f"1. Device hops, median of {sizes['hop_reps']}: {hops['description']}")
    header = f"   {'config':<26}{'nodes':>7}{'hops':>7}{'min ms':>9}{'median ms':>11}{'µs/node':>9}{'µs/hop':>9}"
    print(header)
    print("   " + "-" * (len(header) - 3))
    for row in hops["results"]:
        per_hop = f"{row['us_per_hop']:9.2f}" if row["us_per_hop"] is not None else f"{'-':>9}"
        print(f"   {row['config']:<26}{row['nodes']:>7}{row['hops']:>7}{row['min_ms']:>9.2f}{row['median_ms']:>11.2f}"
              f"{row['us_per_node']:>9.2f}{per_hop}")
    print("   µs/hop: extra time per device switch over the cpu-only chain")

    re = result["reentrant"]
    print()
    print(f"2. Reentrant backward, median of {sizes['reentrant_reps']}: {re['description']}")
    header = f"   {'config':<26}{'nodes':>7}{'min ms':>9}{'median ms':>11}{'µs/node':>9}"
    print(header)
    print("   " + "-" * (len(header) - 3))
    for row in re["results"]:
        if row["config"] == "top-level":
            continue
        print(f"   {row['config']:<26}{row['nodes']:>7}{row['min_ms']:>9.2f}{row['median_ms']:>11.2f}"
              f"{row['us_per_node']:>9.2f}")
    print(f"   µs per reentrant backward ({re['inner_nodes']}-node inner graph, reentrant - plain): "
          f"{re['us_per_reentrant_backward']:.2f}")
    print(f"   µs per top-level backward of the same graph (for scale):       {re['us_per_toplevel_backward']:.2f}")

    ne = result["nested"]
    print()
    print(f"3. Nested reentrant backward, median of {sizes['nest_reps']}: {ne['description']}; "
          f"pool hand-off at depth {ne['max_depth']}")
    header = f"   {'depth':>5}{'calls':>7}{'threads':>9}{'on caller':>11}{'min ms':>9}{'median ms':>11}{'µs/level':>10}"
    print(header)
    print("   " + "-" * (len(header) - 3))
    for row in ne["results"]:
        unstable = "  (layout varied between reps!)" if not row["layout_stable"] else ""
        print(f"   {row['depth']:>5}{row['backward_calls']:>7}{row['threads']:>9}{row['levels_on_calling_thread']:>11}"
              f"{row['min_ms']:>9.2f}{row['median_ms']:>11.2f}{row['us_per_level']:>10.2f}{unstable}")
    lo, mid, hi = ne["depths"]
    print(f"   marginal µs per level, one thread      (T{mid} - T{lo}) / {mid - lo}: "
          f"{ne['us_per_level_one_thread']:8.2f}")
    print(f"   marginal µs per level, across hand-off (T{hi} - T{mid}) / {hi - mid}: "
          f"{ne['us_per_level_across_handoff']:8.2f}")
    print(f"   extra µs of the {hi}-deep run over linear   (T{hi} - T{mid}) - (T{mid} - T{lo}): "
          f"{ne['us_extra_across_handoff']:8.2f}  (noisy)")
    handoff = ne["us_per_handoff"]
    print(f"   µs per hand-off to the pool thread and back (timeline, median):   "
          f"{handoff:8.2f}" if handoff is not None else "   hand-off: not seen")
    if not ne["layout_as_expected"]:
        print(f"   WARNING: the threads levels ran on are not as expected (depths {lo} and {mid} on the calling "
              f"thread, {hi} handing off once at {ne['max_depth']}): the hand-off estimate is meaningless")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line."""
    return bench_main(__doc__, run, print_report,
                      quick_help='small graphs and few reps: a few seconds',
                      reps_help='timed repetitions for parts 1 and 2 (default 11 and 7, quick 3)', argv=argv)


if __name__ == "__main__":
    sys.exit(main())
