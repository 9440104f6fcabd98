"""What the PyTorch bridge costs a real PyTorch program, as ratios to the plain run in the same process.

On a chain (`h = h.tanh()` N times on a 4-element tensor: one tiny op per line, the worst case for any
per-line or per-call observer), a real chain-like model (an `nn` MLP of ten Linear+ReLU layers with
CrossEntropyLoss, its losses summed over N/33 small batches) and a wide graph (N/3 parameters, each
`p.exp() * 2`, concatenated), of 1k, 10k and 100k nodes (--quick: 1k only). Every figure is a median over
--reps rounds, and each round runs the plain program and every recorded variant one after the other
(interleaved), so that a machine shared with other work slows them alike; each ratio divides two medians of
the same rounds. Times are the process's CPU time (time.process_time): on a shared machine, time given to
other processes does not count.
- forward with culprits: the culprit of every seq_nr increment (NOTE [line culprits] in
  tracer/sources/torch/lines.py), over the plain forward (targets, issue 29: <= 2x on the chain and on the wide
  graph, <= 1.6x on the MLP). Beside it: a TorchFunctionMode that does nothing but call the function,
  a trace function that does nothing at every line of the forward (the floor of any per-line
  observer: CPython 3.11 runs a thread with a trace function on its slower tracing path), the floor of the bridge's
  line tracer (a trace function that, as the bridge's, gives line events to the user's frames only and there only
  reads the counter), the same with nn.Module.__call__ replaced by a wrapper that only keeps the innermost module call
  (the floor of following module calls by a wrapper, NOTE [module paths]), the bridge's own
  way when a trace function is already set (record(culprits="mode")), and, on the chain, the loop reading each
  new node's seq_nr itself (`h.grad_fn._sequence_nr()`, no tracer: what naming each node through torch's
  accessors costs, whoever does it).
- hook registration: the bridge's walk of a new graph (keys, edges, one pre- and one post-hook per node), in µs
  per node, once per graph (target <= 10). The floor beside it: a bare walk that registers a pre- and a
  post-hook on every node through torch's `register_prehook`/`register_hook`.
- backward: the second backward over a retained graph built while recording, the bridge's hooks firing, over the
  plain second backward of the same graph built without it (target <= 1.3x), by default (the hooks keep each
  grad for its summary) and with values=False (they keep none). The floor beside it: bare Python pre- and
  post-hooks that do nothing, on every node.
- reconstruction: running agdb's model of the engine over what the hooks logged, summarising grads and writing
  the events (NOTE [observe now, reconstruct later] in tracer/sources/torch/bridge.py), in µs per node run. By
  default it runs when the recording ends (measured in the first round only): informational, no target.
  `backward, record() default` is the second backward with record()'s default options (target <= 1.5x);
  `backward, reconstructed after each call` the same with defer=False, which reconstructs inside the call.
- end to end: what a user waits for, `with record("torch") as rec: z = forward(); z.backward()` until `rec.trace`
  is frozen (recording, reconstruction, the finished trace), over the plain forward and first backward (target
  <= 3x); beside it torch's own way to see a backward's order with seq_nrs, torch.profiler (CPU activities,
  record_shapes off) around the same forward and backward, before reading its events and with `prof.events()`;
  and the floor of the bridge's design end to end (`_floor_run`): the forward under the floor of its line tracer
  with module calls kept, then a bare walk that puts a pre- and a post-hook that do nothing on every node (through
  the least registration torch's API allows, NOTE [lean registration] in tracer/sources/torch/hooks.py; the
  collector paused, as the bridge pauses it), then the backward; nothing is kept, named or written.

    .venv/bin/python bench/torch_bridge.py [--quick] [--reps N] [--json PATH]

--deep N: the memory of `agdb torch` on an N-deep chain (`h = h.tanh()` N times on a 4-element tensor, then one
backward; N = 1,000,000 by default), against the same script run plainly: the peak RSS of each child process (its
rusage's ru_maxrss), and bytes per event = (recorded peak - plain peak) / the events of the saved trace (target
<= 200). Each round runs the plain script, then `agdb torch` on it from each tree given (--tree PATH, a checkout of
agdb; this one by default; several trees to compare a change, their order turned each round), so that a shared
machine's load falls on all alike; figures are medians over the rounds.

    .venv/bin/python bench/torch_bridge.py --deep [N] [--rounds R] [--tree PATH ...] [--json PATH]
"""
from __future__ import annotations

import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import bench_main, print_target_table  # noqa: E402

TARGETS = {"forward_chain": 2.0, "forward_mlp": 1.6, "forward_wide": 2.0, "registration_us": 10.0, "backward": 1.3,
           "default_backward": 1.5, "end_to_end": 3.0}
TIMED = ("plain_forward", "noop_mode_forward", "noop_trace_forward", "counter_trace_forward", "module_calls_forward",
         "reading_forward", "recorded_forward",
         "mode_forward", "plain_backward", "bare_hooks_backward", "recorded_backward", "shapes_only_backward",
         "default_backward", "after_each_backward", "registration", "bare_registration", "plain_run",
         "recorded_run", "floor_run", "profiler_run", "profiler_events_run")


def _chain(torch: Any, n: int) -> Callable[[], Any]:
    x = torch.ones(4, requires_grad=True)

    def forward() -> Any:
        h = x
        for _ in range(n - 2):
            h = h.tanh()
        return h.sum()

    return forward


def _chain_reading(torch: Any, n: int) -> Callable[[], Any]:
    """The chain, reading each new node's seq_nr in the loop itself: what naming every node costs through torch's own
    accessors (`.grad_fn`, `_sequence_nr()`), with no tracer: a floor under any way that names nodes per op."""
    x = torch.ones(4, requires_grad=True)

    def forward() -> Any:
        h = x
        for _ in range(n - 2):
            h = h.tanh()
            h.grad_fn._sequence_nr()
        return h.sum()

    return forward


def _mlp(torch: Any, n: int) -> Callable[[], Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(10) for m in (torch.nn.Linear(16, 16), torch.nn.ReLU())])
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(8, 16), torch.randint(0, 16, (8,))
    steps = max(1, n // 33)  # 33 nodes a step: Addmm and T per layer, ten ReLUs, LogSoftmax, NllLoss, the add

    def forward() -> Any:
        total = loss_fn(model(x), y)
        for _ in range(steps - 1):
            total = total + loss_fn(model(x), y)
        return total

    return forward


def _wide(torch: Any, n: int) -> Callable[[], Any]:
    params = [torch.ones(2, requires_grad=True) for _ in range(max(1, n // 3))]

    def forward() -> Any:
        return torch.cat([p.exp() * 2 for p in params]).sum()

    return forward


_clock = time.process_time


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = _clock()
    out = fn()
    return _clock() - start, out


def _nodes(root: Any) -> int:
    from bench._common import count_nodes

    return count_nodes(root)


def _bare_hooks(z: Any) -> list:
    """A pre- and a post-hook that do nothing on every node reachable from z (the floor of a hooked backward)."""
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


def _noop_mode(torch: Any) -> Any:
    from torch.overrides import TorchFunctionMode

    class Noop(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    return Noop


def _noop_trace(frame: Any, event: str, arg: Any) -> Any:
    return _noop_trace  # a line event for every line of every frame: what reading the counter per line sits on


def _counter_trace(torch: Any) -> Callable:
    """A trace function that gives line events to the user's frames only (none to torch's, agdb's or Python's own
    library, as the bridge's line tracer) and there does nothing but read the counter: the floor under the bridge's
    way of seeing the forward, before it names or writes anything."""
    from agdb.tracer.sources.torch.naming import is_library

    seq, last, user = torch.autograd._get_sequence_nr, [0], {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        now = seq()
        if now != last[0]:
            last[0] = now
        return local

    def trace(frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        mine = user.get(name)
        if mine is None:
            mine = user[name] = not is_library(name)
        return local if mine else None

    return trace


def _innermost_call_kept(cell: list) -> Callable:
    """nn.Module.__call__ doing only what any wrapper that follows module calls must: keep the innermost call."""

    def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
        up = cell[0]
        cell[0] = (module, up)
        try:
            return module._call_impl(*args, **kwargs)
        finally:
            cell[0] = up

    return __call__


def _least_registration(backward_hooks: Any, hook: Any) -> tuple:
    """torch's `_HookMixin._register_hook` doing only what it must: store the hook in the node's dict (torch calls
    this Python function for every hook put on a node; the bridge's own does as little, NOTE [lean registration])."""
    if backward_hooks is None:
        backward_hooks = {}
    backward_hooks[len(backward_hooks)] = hook
    return backward_hooks, backward_hooks


def _noop_hook(*args: Any) -> None:
    """A pre- or post-hook that does nothing: one function for every node, as the bridge puts one object on each."""


def _bare_walk(z: Any) -> list:
    """The least a walk that hooks every node reachable from z does: each node once (torch keeps one wrapper per node
    while one is held), a do-nothing pre- and post-hook on it, its next functions pushed; with the collector paused,
    as the bridge's walk pauses it. Returns the hook dicts (the least registration's handles)."""
    import gc

    seen, stack, hook_dicts = set(), [z.grad_fn], []
    gc.disable()
    try:
        while stack:
            n = stack.pop()
            if n is None or n in seen:
                continue
            seen.add(n)
            hook_dicts.append(n.register_prehook(_noop_hook))
            hook_dicts.append(n.register_hook(_noop_hook))
            for c, _ in n.next_functions:
                stack.append(c)
    finally:
        gc.enable()
    return hook_dicts


def _floor_run(torch: Any, forward: Callable[[], Any]) -> None:
    """The floor of the bridge's design end to end: what any recording that names each increment from the user's
    line, walks the graph and puts a Python pre- and post-hook on each node costs before it keeps, names or writes
    anything (the module's docstring)."""
    with _counter_traced(torch), _module_calls_kept(torch):
        z = forward()
    mixin = torch.autograd.function._HookMixin
    register = mixin.__dict__["_register_hook"]
    mixin._register_hook = staticmethod(_least_registration)
    try:
        hook_dicts = _bare_walk(z)
    finally:
        mixin._register_hook = register
    z.backward()
    for hooks in hook_dicts:
        hooks.clear()


@contextmanager
def _counter_traced(torch: Any) -> Iterator[None]:
    """The floor of the bridge's line tracer set on this thread (_counter_trace)."""
    sys.settrace(_counter_trace(torch))
    try:
        yield
    finally:
        sys.settrace(None)


@contextmanager
def _module_calls_kept(torch: Any) -> Iterator[None]:
    """nn.Module.__call__ replaced by the floor of following module calls (_innermost_call_kept)."""
    module_call = torch.nn.Module.__call__
    torch.nn.Module.__call__ = _innermost_call_kept([None])
    try:
        yield
    finally:
        torch.nn.Module.__call__ = module_call


def _floors_round(torch: Any, forward: Callable[[], Any], times: dict) -> None:
    """The forward under the counter-reading trace function alone, then with module calls kept as well."""
    with _counter_traced(torch):
        times["counter_trace_forward"].append(_timed(forward)[0])
        with _module_calls_kept(torch):
            times["module_calls_forward"].append(_timed(forward)[0])


def _plain_round(forward: Callable[[], Any], noop: Any, times: dict, reading: Callable[[], Any] | None) -> int:
    """Plain forward and backward, the do-nothing mode's forward, and the bare-hooks backward; returns the nodes."""
    t, z = _timed(forward)
    times["plain_forward"].append(t)
    if reading is not None:
        times["reading_forward"].append(_timed(reading)[0])
    nodes = _nodes(z.grad_fn)
    z.backward(retain_graph=True)  # the first backward allocates what later ones reuse: time the second
    times["plain_backward"].append(_timed(lambda: z.backward(retain_graph=True))[0])
    t, handles = _timed(lambda: _bare_hooks(z))
    times["bare_registration"].append(t)
    times["bare_hooks_backward"].append(_timed(lambda: z.backward(retain_graph=True))[0])
    for h in handles:
        h.remove()
    z = None  # the graph goes before the next is built
    with noop():
        times["noop_mode_forward"].append(_timed(forward)[0])
    sys.settrace(_noop_trace)
    try:
        times["noop_trace_forward"].append(_timed(forward)[0])
    finally:
        sys.settrace(None)
    return nodes


def _recorded_round(forward: Callable[[], Any], times: dict, reconstruct: bool) -> dict:
    """The same under the bridge: forward, the first backward (its walk timed), the second backward timed."""
    from agdb import tracer

    with tracer.record("torch", defer=True, culprits="lines") as rec:  # record()'s choice on the main thread
        bridge = rec.source
        t, z = _timed(forward)
        times["recorded_forward"].append(t)
        walker = bridge.walker
        walk, spent = walker.walk, []

        def timed_walk(*args: Any) -> Any:
            start = _clock()
            try:
                return walk(*args)
            finally:
                spent.append(_clock() - start)

        walker.walk = timed_walk
        z.backward(retain_graph=True)  # walks and hooks the new graph
        del walker.walk
        times["registration"].append(sum(spent))
        times["recorded_backward"].append(_timed(lambda: z.backward(retain_graph=True))[0])
        del z
        if not reconstruct:  # what the hooks logged is dropped unreconstructed: that is timed in one round only
            for state in bridge.shared.states:
                state.log.clear()
        start = _clock()
    finish = _clock() - start
    info = {"finish": finish, "events": len(rec.trace), "divergences": len(rec.trace.meta["divergences"])}
    with tracer.record("torch", defer=True, culprits="mode") as rec:
        times["mode_forward"].append(_timed(forward)[0])
    with tracer.record("torch", defer=True, values=False) as rec:
        z = forward()
        z.backward(retain_graph=True)
        times["shapes_only_backward"].append(_timed(lambda: z.backward(retain_graph=True))[0])
        del z
        for state in rec.source.shared.states:
            state.log.clear()
    with tracer.record("torch") as rec:  # record()'s default: the reconstruction waits for the recording's end
        z = forward()
        z.backward(retain_graph=True)
        times["default_backward"].append(_timed(lambda: z.backward(retain_graph=True))[0])
        del z
        for state in rec.source.shared.states:  # timed in the end-to-end rows
            state.log.clear()
    if reconstruct:
        with tracer.record("torch", defer=False) as rec:  # each backward call reconstructs before it returns
            z = forward()
            z.backward(retain_graph=True)
            times["after_each_backward"].append(_timed(lambda: z.backward(retain_graph=True))[0])
            del z
    return info


def _end_to_end_round(torch: Any, forward: Callable[[], Any], times: dict, i: int) -> None:
    """The plain run, the recorded run until its trace is frozen, and torch.profiler's, in an order turned each
    round (a shared machine's load falls on all alike)."""
    from agdb import tracer

    def plain() -> None:
        forward().backward()

    def recorded() -> None:
        with tracer.record("torch") as rec:
            forward().backward()
        assert rec.trace is not None

    def profiled(read: bool) -> None:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=False) as prof:
            forward().backward()
        if read:
            prof.events()

    runs = [("plain_run", plain), ("recorded_run", recorded), ("floor_run", lambda: _floor_run(torch, forward)),
            ("profiler_run", lambda: profiled(False)), ("profiler_events_run", lambda: profiled(True))]
    for name, fn in runs[i % len(runs):] + runs[:i % len(runs)]:
        times[name].append(_timed(fn)[0])


def measure(kind: str, n: int, reps: int) -> dict:
    import torch

    # One intra-op thread: the MLP's matmuls would otherwise wake torch's thread pool, whose spinning (counted in
    # the process's CPU time) on a shared 2-core machine is noise larger than what the bridge costs.
    torch.set_num_threads(1)

    forward = {"chain": _chain, "mlp": _mlp, "wide": _wide}[kind](torch, n)
    reading = _chain_reading(torch, n) if kind == "chain" else None
    noop = _noop_mode(torch)
    forward()  # warm up (allocator, first-call paths)
    times: dict[str, list[float]] = {k: [] for k in TIMED}
    nodes, info = 0, {}
    for i in range(reps):
        nodes = _plain_round(forward, noop, times, reading)
        _floors_round(torch, forward, times)
        got = _recorded_round(forward, times, reconstruct=i == 0)
        info = info or got
        _end_to_end_round(torch, forward, times, i)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    return {"graph": kind, "nodes": nodes, "reps": reps,
            "times_ms": {k: [x * 1e3 for x in v] for k, v in times.items() if v},
            "plain_forward_ms": med["plain_forward"] * 1e3, "recorded_forward_ms": med["recorded_forward"] * 1e3,
            "forward_ratio": med["recorded_forward"] / med["plain_forward"],
            "noop_mode_ratio": med["noop_mode_forward"] / med["plain_forward"],
            "noop_trace_ratio": med["noop_trace_forward"] / med["plain_forward"],
            "counter_trace_ratio": med["counter_trace_forward"] / med["plain_forward"],
            "module_calls_ratio": med["module_calls_forward"] / med["plain_forward"],
            "reading_ratio": med["reading_forward"] / med["plain_forward"] if "reading_forward" in med else None,
            "mode_ratio": med["mode_forward"] / med["plain_forward"],
            "registration_us_per_node": med["registration"] / nodes * 1e6,
            "bare_registration_us_per_node": med["bare_registration"] / nodes * 1e6,
            "plain_backward_ms": med["plain_backward"] * 1e3, "recorded_backward_ms": med["recorded_backward"] * 1e3,
            "bare_hooks_backward_ms": med["bare_hooks_backward"] * 1e3,
            "backward_ratio": med["recorded_backward"] / med["plain_backward"],
            "bare_hooks_ratio": med["bare_hooks_backward"] / med["plain_backward"],
            "shapes_only_ratio": med["shapes_only_backward"] / med["plain_backward"],
            "default_backward_ratio": med["default_backward"] / med["plain_backward"],
            "after_each_backward_ratio": med["after_each_backward"] / med["plain_backward"],
            "plain_run_ms": med["plain_run"] * 1e3,
            "end_to_end_ratio": med["recorded_run"] / med["plain_run"],
            "end_to_end_floor_ratio": med["floor_run"] / med["plain_run"],
            "profiler_ratio": med["profiler_run"] / med["plain_run"],
            "profiler_events_ratio": med["profiler_events_run"] / med["plain_run"],
            "reconstruction_us_per_node": info["finish"] / (nodes * 2) * 1e6, "events": info["events"],
            "divergences": info["divergences"]}


def run(quick: bool, reps: int | None) -> dict:
    from agdb.tracer.sources import torch as torch_bridge

    if not torch_bridge.available():
        sys.exit(f"bench/torch_bridge.py needs torch: {torch_bridge.INSTALL_HINT}")
    sizes = (1_000,) if quick else (1_000, 10_000, 100_000)
    reps = reps or (3 if quick else 5)
    rows = [torch_bridge.run_with_big_stack(lambda k=kind, s=size: measure(k, s, reps))
            for size in sizes for kind in ("chain", "mlp", "wide")]
    checks, info, table = [], [], []
    for r in rows:
        label = f"{r['graph']} {r['nodes']:,} nodes"
        fwd = TARGETS[f"forward_{r['graph']}"]
        for name, value, target, unit in (
                (f"{label}: forward with culprits", r["forward_ratio"], fwd, "x"),
                (f"{label}: hook registration", r["registration_us_per_node"], TARGETS["registration_us"], "µs/node"),
                (f"{label}: backward", r["backward_ratio"], TARGETS["backward"], "x"),
                (f"{label}: backward, values=False", r["shapes_only_ratio"], TARGETS["backward"], "x"),
                (f"{label}: backward, record() default", r["default_backward_ratio"], TARGETS["default_backward"],
                 "x"),
                (f"{label}: end to end, record() default", r["end_to_end_ratio"], TARGETS["end_to_end"], "x")):
            checks.append({"name": name, "value": value, "target": target, "unit": unit, "met": value <= target})
            table.append(name)
        for name, value, unit in ((f"{label}: do-nothing mode forward", r["noop_mode_ratio"], "x"),
                                  (f"{label}: do-nothing line tracer forward", r["noop_trace_ratio"], "x"),
                                  (f"{label}: forward, counter read on user lines only", r["counter_trace_ratio"],
                                   "x"),
                                  (f"{label}: forward, same and innermost module call kept",
                                   r["module_calls_ratio"], "x"),
                                  (f"{label}: forward, culprits by the mode", r["mode_ratio"], "x"),
                                  (f"{label}: bare registration", r["bare_registration_us_per_node"], "µs/node"),
                                  (f"{label}: bare hooks backward", r["bare_hooks_ratio"], "x"),
                                  (f"{label}: backward, reconstructed after each call",
                                   r["after_each_backward_ratio"], "x"),
                                  (f"{label}: end to end, floor (counter read, bare walk and hooks)",
                                   r["end_to_end_floor_ratio"], "x"),
                                  (f"{label}: end to end, torch.profiler", r["profiler_ratio"], "x"),
                                  (f"{label}: end to end, torch.profiler with events()", r["profiler_events_ratio"],
                                   "x"),
                                  (f"{label}: reconstruction", r["reconstruction_us_per_node"], "µs/node")):
            info.append({"name": name, "value": value, "unit": unit})
            table.append(name)
        if r["reading_ratio"] is not None:
            name = f"{label}: forward reading each node's seq_nr, no tracer"
            info.append({"name": name, "value": r["reading_ratio"], "unit": "x"})
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


DEEP_TARGET = 200
"""Bytes per event of an `agdb torch` recording beyond the plain run's peak RSS, on the deep chain."""

_DEEP_SCRIPT = """\
import torch
x = torch.ones(4, requires_grad=True)
h = x
for _ in range({n}):
    h = h.tanh()
h.sum().backward()
"""

# `python -m agdb ARGS` with the agdb of another tree: the editable install's finder maps agdb's packages to
# directories of this tree; they are pointed at the other one before agdb is imported.
_BOOT = """\
import runpy, sys
finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___agdb"))
root, tree = sys.argv[1], sys.argv[2]
for name, path in finder.MAPPING.items():
    finder.MAPPING[name] = tree + path[len(root):] if path.startswith(root) else path
sys.argv = ["agdb"] + sys.argv[3:]
runpy.run_module("agdb", run_name="__main__")
"""


def _child(cmd: list[str], log: Path) -> tuple[int, float]:
    """Run `cmd`; its peak RSS in bytes (ru_maxrss) and its wall time. Raises if it fails."""
    import os
    import subprocess

    start = time.monotonic()
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench/torch_bridge.py: {' '.join(cmd)} failed:\n{log.read_text()[-2000:]}")
    return usage.ru_maxrss * 1024, wall


def deep(n: int, rounds: int, trees: list[str]) -> dict:
    """The --deep measurement (the module's docstring)."""
    import tempfile

    from agdb.tracer.store import tracefile

    root = str(Path(__file__).resolve().parents[1])
    work = Path(tempfile.mkdtemp(prefix="agdb-deep-"))
    script = work / "deep_chain.py"
    script.write_text(_DEEP_SCRIPT.format(n=n))
    plain: list[tuple[int, float]] = []
    recorded: dict[str, list[tuple[int, float]]] = {t: [] for t in trees}
    events: dict[str, int] = {}
    for r in range(rounds):
        plain.append(_child([sys.executable, str(script)], work / "plain.log"))
        print(f"round {r + 1}: plain {plain[-1][0] / 1e6:,.0f} MB, {plain[-1][1]:.0f} s", flush=True)
        for tree in trees[r % len(trees):] + trees[:r % len(trees)]:
            out = work / "deep.agdb"
            recorded[tree].append(_child([sys.executable, "-c", _BOOT, root, tree, "torch", str(script), "-o",
                                          str(out)], work / "recorded.log"))
            if tree not in events:
                events[tree] = len(tracefile.load(out))
            out.unlink()
            print(f"round {r + 1}: {tree}: {recorded[tree][-1][0] / 1e6:,.0f} MB, {recorded[tree][-1][1]:.0f} s",
                  flush=True)
    plain_peak = statistics.median(p for p, _ in plain)
    rows = []
    for tree in trees:
        peak = statistics.median(p for p, _ in recorded[tree])
        rows.append({"tree": tree, "events": events[tree], "peak_bytes": peak,
                     "bytes_per_event": (peak - plain_peak) / events[tree],
                     "wall_s": statistics.median(w for _, w in recorded[tree]),
                     "peaks": [p for p, _ in recorded[tree]]})
    return {"n": n, "rounds": rounds, "plain_peak_bytes": plain_peak, "plain_peaks": [p for p, _ in plain],
            "plain_wall_s": statistics.median(w for _, w in plain), "target": DEEP_TARGET, "rows": rows}


def deep_main(argv: list[str]) -> int:
    """`--deep [N]`: parse its options, measure, print (and save with --json)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description="The memory of agdb torch on a deep chain (--deep)")
    parser.add_argument("--deep", type=int, nargs="?", const=1_000_000, required=True, metavar="N")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tree", action="append", default=None, metavar="PATH")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in (args.tree or [Path(__file__).resolve().parents[1]])]
    result = deep(args.deep, args.rounds, trees)
    print(f"{result['n']:,}-deep chain, {result['rounds']} rounds: plain peak "
          f"{result['plain_peak_bytes'] / 1e6:,.0f} MB ({result['plain_wall_s']:.0f} s)")
    for row in result["rows"]:
        met = "met" if row["bytes_per_event"] <= DEEP_TARGET else "NOT met"
        print(f"  {row['tree']}: peak {row['peak_bytes'] / 1e6:,.0f} MB, {row['events']:,} events, "
              f"{row['bytes_per_event']:.0f} B/event beyond the plain run (target <= {DEEP_TARGET}: {met}), "
              f"{row['wall_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    if "--deep" in sys.argv[1:]:
        sys.exit(deep_main(sys.argv[1:]))
    sys.exit(bench_main(__doc__, run, report, "1k-node graphs only, three rounds", "rounds per figure (default 5)"))
