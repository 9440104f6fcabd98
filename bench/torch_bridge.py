"""What the PyTorch bridge costs a real PyTorch program, as ratios to the plain run in the same process.

On a chain (`h = h.tanh()` N times) and a wide graph (N/3 parameters, each `p.exp() * 2`, concatenated) of
1k, 10k and 100k nodes (--quick: 1k only), median of --reps runs each:
- forward with culprits: the TorchFunctionMode and the culprit of every seq_nr increment, over the plain forward
  (targets: <= 1.6x on the chain, <= 2x on the wide graph; a mode that does nothing costs 1.35-2.05x);
- hook registration: the bridge's walk of a new graph (keys, edges, one pre- and one post-hook per node), in µs
  per node, once per graph (target <= 10);
- backward: a backward over the same (retained) graph with the bridge's hooks firing, over the plain backward
  (target <= 1.3x; bare Python pre- and post-hooks that do nothing are measured beside it), by default (the
  hooks keep each grad for its summary) and with values=False (they keep none);
- reconstruction: running agdb's model of the engine over what the hooks logged, summarising grads and writing
  the events (NOTE [observe now, reconstruct later] in tracer/torch_bridge/bridge.py), in µs per node. It runs
  after the backward (here with defer=True, when the recording ends): informational, no target.

    .venv/bin/python bench/torch_bridge.py [--quick] [--reps N] [--json PATH]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import bench_main, print_target_table  # noqa: E402

TARGETS = {"forward_chain": 1.6, "forward_wide": 2.0, "registration_us": 10.0, "backward": 1.3}


def _chain(torch: Any, n: int) -> Callable[[], Any]:
    x = torch.ones(4, requires_grad=True)

    def forward() -> Any:
        h = x
        for _ in range(n - 2):
            h = h.tanh()
        return h.sum()

    return forward


def _wide(torch: Any, n: int) -> Callable[[], Any]:
    params = [torch.ones(2, requires_grad=True) for _ in range(max(1, n // 3))]

    def forward() -> Any:
        return torch.cat([p.exp() * 2 for p in params]).sum()

    return forward


def _median(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _nodes(root: Any) -> int:
    from bench._common import count_nodes

    return count_nodes(root)


def _bare_hooks(torch: Any, z: Any) -> list:
    handles, seen, stack = [], set(), [z.grad_fn]
    held = []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        held.append(n)
        handles.append(n.register_prehook(lambda g: None))
        handles.append(n.register_hook(lambda gi, go: None))
        stack.extend(c for c, _ in n.next_functions)
    return handles


def measure(kind: str, n: int, reps: int) -> dict:
    import torch

    from tracer import torch_bridge

    make = _chain if kind == "chain" else _wide
    forward = make(torch, n)
    z = forward()
    nodes = _nodes(z.grad_fn)
    plain_forward = _median(forward, reps)
    plain_backward = _median(lambda: z.backward(retain_graph=True), reps)
    handles = _bare_hooks(torch, z)
    bare_backward = _median(lambda: z.backward(retain_graph=True), reps)
    for h in handles:
        h.remove()
    z = None  # the graph goes before the next one is built
    with torch_bridge.record(defer=True) as rec:
        bridge = rec.bridge
        recorded_forward = _median(forward, reps)
        z = forward()
        walk = bridge._walk
        spent = []

        def timed_walk(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return walk(*args)
            finally:
                spent.append(time.perf_counter() - start)

        bridge._walk = timed_walk
        z.backward(retain_graph=True)  # walks and hooks the new graph
        bridge._walk = walk
        recorded_backward = _median(lambda: z.backward(retain_graph=True), reps)
        start = time.perf_counter()
    finish = time.perf_counter() - start
    with torch_bridge.record(defer=True, values=False):
        z.backward(retain_graph=True)
        shapes_backward = _median(lambda: z.backward(retain_graph=True), reps)
    z = None  # the graph goes before the next one is built
    return {"shapes_only_backward_ms": shapes_backward * 1e3, "shapes_only_ratio": shapes_backward / plain_backward,
            "graph": kind, "nodes": nodes, "plain_forward_ms": plain_forward * 1e3,
            "recorded_forward_ms": recorded_forward * 1e3, "forward_ratio": recorded_forward / plain_forward,
            "registration_us_per_node": sum(spent) / nodes * 1e6,
            "plain_backward_ms": plain_backward * 1e3, "bare_hooks_backward_ms": bare_backward * 1e3,
            "recorded_backward_ms": recorded_backward * 1e3, "bare_hooks_ratio": bare_backward / plain_backward,
            "backward_ratio": recorded_backward / plain_backward,
            "reconstruction_us_per_node": finish / (nodes * (reps + 1)) * 1e6, "events": len(rec.trace),
            "divergences": len(rec.trace.meta["divergences"])}


def run(quick: bool, reps: int | None) -> dict:
    from tracer import torch_bridge

    if not torch_bridge.available():
        sys.exit(f"bench/torch_bridge.py needs torch: {torch_bridge.INSTALL_HINT}")
    sizes = (1_000,) if quick else (1_000, 10_000, 100_000)
    reps = reps or (1 if quick else 3)
    rows = [torch_bridge.run_with_big_stack(lambda k=kind, s=size: measure(k, s, reps))
            for size in sizes for kind in ("chain", "wide")]
    checks, info, table = [], [], []
    for r in rows:
        label = f"{r['graph']} {r['nodes']:,} nodes"
        fwd = TARGETS["forward_chain" if r["graph"] == "chain" else "forward_wide"]
        for name, value, target, unit in (
                (f"{label}: forward with culprits", r["forward_ratio"], fwd, "x"),
                (f"{label}: hook registration", r["registration_us_per_node"], TARGETS["registration_us"], "µs/node"),
                (f"{label}: backward", r["backward_ratio"], TARGETS["backward"], "x"),
                (f"{label}: backward, values=False", r["shapes_only_ratio"], TARGETS["backward"], "x")):
            checks.append({"name": name, "value": value, "target": target, "unit": unit, "met": value <= target})
            table.append(name)
        for name, value, unit in ((f"{label}: bare hooks backward", r["bare_hooks_ratio"], "x"),
                                  (f"{label}: reconstruction", r["reconstruction_us_per_node"], "µs/node")):
            info.append({"name": name, "value": value, "unit": unit})
            table.append(name)
    import torch

    return {"meta": {"torch": torch.__version__, "reps": reps, "quick": quick}, "targets": TARGETS, "rows": rows,
            "checks": checks, "info": info, "table": table}


def report(result: dict) -> None:
    for r in result["rows"]:
        print(f"{r['graph']:>5} {r['nodes']:>7,} nodes: forward {r['plain_forward_ms']:.1f} -> "
              f"{r['recorded_forward_ms']:.1f} ms, backward {r['plain_backward_ms']:.1f} -> "
              f"{r['recorded_backward_ms']:.1f} ms (bare hooks {r['bare_hooks_backward_ms']:.1f}), "
              f"{r['events']:,} events, {r['divergences']} divergences")
    print()
    print_target_table(result, lambda row: f"{row['value']:.2f} {row['unit']}",
                       lambda row: f"<= {row['target']:g} {row['unit']}", target_width=14)


if __name__ == "__main__":
    sys.exit(bench_main(__doc__, run, report, "1k-node graphs only, one run each", "runs per figure (default 3)"))
