"""Benchmark: microseconds per op (forward) and per node (backward) of agdb's engine, with and without an observer,
and against PyTorch.

Run it from the repository root:

    .venv/bin/python bench/engine.py                 # full run, 10k-node graphs (well under 2 minutes)
    .venv/bin/python bench/engine.py --quick         # ~1k-node graphs, few reps: a smoke test of a few seconds
    .venv/bin/python bench/engine.py --json out.json # also write the numbers as JSON
    .venv/bin/python bench/engine.py --cpu-time      # this thread's CPU time, not wall time (a loaded machine)

What is measured
----------------
Three graphs, each built fresh for every repetition:

* ``chain``: a leaf ``x`` of shape (4,) with requires_grad, through 10,000 cheap ops cycling through
  ``y * 1.0001``, ``y + 0.5`` and ``y.sin()``, then ``.sum()``: one long dependency chain.
* ``mlp``: ``WIDTH`` parallel branches, each ``DEPTH`` layers of ``h = (h @ W_i + b_i).tanh()`` with
  ``h`` of shape (4, 8), ``W_i`` (8, 8) and ``b_i`` (8,), all starting from one shared leaf input and
  summed at the end (``AddBackward0`` per branch, then ``.sum()``): a wide graph where every layer also
  feeds two AccumulateGrad nodes.
* ``nn``: a real model, ``nn.Sequential`` of ``NN_LAYERS`` ``Linear`` layers (width ``NN_WIDTH``, ReLU
  between them) on a batch of ``NN_BATCH``, scored with ``nn.CrossEntropyLoss``, and one
  ``optim.SGD(momentum=0.9)`` step after backward. Its weights are built once per configuration; each
  repetition runs ``zero_grad``, forward, backward and the step.
* ``gpt``: a GPT-nano training step: nanoGPT's model (token and position embeddings, pre-LayerNorm blocks of
  manual causal self-attention and a GELU MLP, a final LayerNorm and an lm_head) with ``GPT_LAYERS`` layers,
  ``GPT_HEADS`` heads, ``n_embd`` ``GPT_EMBD`` on a batch of ``GPT_BATCH`` sequences of ``GPT_BLOCK`` tokens,
  ``F.cross_entropy``, and an ``optim.AdamW`` step; the same weights on both libraries. Besides the per-op and
  per-node ratios, its whole step (forward + backward + AdamW, summed per repetition) is compared with torch's
  (target <= 2).

Each repetition times the forward pass (the graph's build, tensor creation included) and the
``loss.backward()`` call (``retain_graph=False``) separately, with ``time.perf_counter_ns`` (with
``--cpu-time``, ``time.thread_time_ns``: the CPU time of the benchmark's thread, which other processes on a
loaded machine do not add to; torch runs on this thread too, see below) and the
garbage collector paused (as ``timeit`` does), 7 times per configuration (3 with ``--quick``); the
median is reported. Forward cost is given per op (the graph's nodes other than AccumulateGrad: one per
recorded op), backward cost per node (all nodes). The ``nn`` graph's optimizer step is reported as
information. The configurations run interleaved, after one untimed warm-up each, so that
load on the machine hits them alike:

* ``engine``: the engine with no observer attached;
* ``engine+noop-observer``: the engine with an observer attached through ``engine.add_observer`` whose
  every ``EngineObserver`` method is ``pass``, so every instrumentation point calls into Python
  (attached for the whole repetition, build included; only backward is timed);
* ``torch``: real PyTorch, when importable, on the same graph (same shapes, ops and float32 values), on one
  intra-op thread (``torch.set_num_threads(1)``): the engine runs on one, and on a loaded machine torch's
  OpenMP threads wait on each other for whole milliseconds on these small ops.

The node count of a graph is the number of distinct nodes reached by walking ``grad_fn.next_functions``
from the loss' ``grad_fn``, AccumulateGrad nodes included. µs/node = median backward time / node count.
Ratios: no-op observer / no observer (target <= 1.15, backward), engine / torch backward per node
(target <= 2) and forward per op (target <= 2). A missed target is reported, not raised: this is a
benchmark, not a test. The ``nn`` and ``gpt`` graphs are small (milliseconds a pass), so they run
``NN_REPS_FACTOR`` times as many repetitions.
"""
from __future__ import annotations

import gc
import inspect
import platform
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
from _common import bench_main, count_nodes

from agdb import engine
from agdb.engine._observer import EngineObserver

try:
    import torch
except ImportError:  # the torch comparison is optional
    torch = None
else:
    torch.set_num_threads(1)  # one thread, as the engine (see the docstring)

OBSERVER_TARGET = 1.15
"""Target for median backward time with a no-op observer / without an observer."""
TORCH_TARGET = 2.0
"""Target for median backward time per node of the engine (no observer) / real PyTorch."""
FORWARD_TARGET = 2.0
"""Target for median forward time per op of the engine (no observer) / real PyTorch."""

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

    def buffer_written_and_task_pushed(self, graph_task, node, slot, is_accumulation, buffer, task, queue):
        pass

    def hook_ran(self, graph_task, node, kind, hook):
        pass

    def node_started(self, graph_task, node, inputs):
        pass

    def task_popped_and_started(self, graph_task, task, queue, inputs):
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
_clock = time.perf_counter_ns
"""What _timed reads: wall time, or with --cpu-time this thread's CPU time."""


def _use_cpu_time() -> None:
    global _clock
    _clock = time.thread_time_ns


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """(fn(), nanoseconds it took), with the collector paused as timeit does."""
    gc.disable()
    try:
        start = _clock()
        value = fn()
        elapsed = _clock() - start
    finally:
        gc.enable()
    return value, float(elapsed)


def time_pass(build: Callable[[], Any], after: Callable[[], Any] | None = None) -> dict[str, float]:
    """Time one forward (`build()`, returning the loss), one backward and, if given, `after()`; ns each."""
    gc.collect()
    loss, forward = _timed(build)
    _, backward = _timed(lambda: loss.backward(retain_graph=False))
    times = {"forward": forward, "backward": backward}
    if after is not None:
        _, times["step"] = _timed(after)
    return times


class Config:
    """One way of running a graph: which library, and whether a no-op observer is attached."""

    def __init__(self, name: str, lib: Any, observed: bool = False) -> None:
        self.name = name
        self.lib = lib
        self.observed = observed

    def run(self, graph: Graph) -> dict[str, float]:
        build, after = graph.pass_for(self.lib)
        if not self.observed:
            return time_pass(build, after)
        handle = engine.add_observer(NoopObserver())
        try:
            return time_pass(build, after)
        finally:
            handle.remove()


def lib_name(lib: Any) -> str:
    """`engine` for agdb's engine (the module `agdb.engine`), `torch` for torch."""
    return lib.__name__.rpartition(".")[2]


class Graph:
    """A graph to time: `make(lib)` returns (build, after) callables for one repetition on `lib`."""

    def __init__(self, name: str, description: str, make: Callable[[Any], tuple]) -> None:
        self.name = name
        self.description = description
        self._make = make
        self._made: dict[str, tuple] = {}

    def pass_for(self, lib: Any) -> tuple:
        key = lib_name(lib)
        if key not in self._made:  # the nn model keeps its weights and optimizer across repetitions
            self._made[key] = self._make(lib)
        return self._made[key]


def measure(graph: Graph, configs: list[Config], reps: int) -> dict[str, dict[str, list[float]]]:
    """Per config and phase, `reps` times in ns; configs interleaved, each warmed up once first."""
    for config in configs:
        config.run(graph)
    times: dict[str, dict[str, list[float]]] = {c.name: {} for c in configs}
    for _ in range(reps):
        for config in configs:
            for phase, ns in config.run(graph).items():
                times[config.name].setdefault(phase, []).append(ns)
    return times


# -- the nn model ------------------------------------------------------------------------------------------
NN_LAYERS, NN_WIDTH, NN_BATCH, NN_CLASSES = 4, 64, 16, 10
NN_REPS_FACTOR = 10
"""The nn graph's repetitions per repetition of the others: one pass takes about a millisecond."""


def nn_arrays(seed: int = 1) -> dict[str, np.ndarray]:
    """Weights, input and targets of the nn model, shared by the engine and torch builds."""
    rng = np.random.default_rng(seed)
    sizes = [NN_WIDTH] * NN_LAYERS + [NN_CLASSES]
    arrays = {"x": rng.standard_normal((NN_BATCH, NN_WIDTH)).astype(np.float32),
              "y": rng.integers(0, NN_CLASSES, NN_BATCH)}
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        arrays[f"w{i}"] = (rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(np.float32)
        arrays[f"b{i}"] = (rng.standard_normal(fan_out) * 0.1).astype(np.float32)
    return arrays


def make_nn(lib: Any, arrays: dict[str, np.ndarray]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The model, loss and optimizer on `lib`; returns (forward building the loss, optimizer step)."""
    layers: list[Any] = []
    for i in range(NN_LAYERS):
        linear = lib.nn.Linear(arrays[f"w{i}"].shape[1], arrays[f"w{i}"].shape[0])
        with lib.no_grad():
            linear.weight.copy_(lib.tensor(arrays[f"w{i}"]))
            linear.bias.copy_(lib.tensor(arrays[f"b{i}"]))
        layers += [linear, lib.nn.ReLU()] if i < NN_LAYERS - 1 else [linear]
    model = lib.nn.Sequential(*layers)
    criterion = lib.nn.CrossEntropyLoss()
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = lib.tensor(arrays["x"]), lib.tensor(arrays["y"])

    def forward() -> Any:
        optimizer.zero_grad()
        return criterion(model(x), y)

    return forward, optimizer.step


def count_ops(root: Any) -> int:
    """Nodes reachable from `root` other than AccumulateGrad: one per op the forward recorded."""
    seen = {id(root): root}
    stack = [root]
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return sum(type(fn).__name__ != "AccumulateGrad" for fn in seen.values())


# -- the GPT-nano model -----------------------------------------------------------------------------------
GPT_VOCAB, GPT_BLOCK, GPT_EMBD, GPT_HEADS, GPT_LAYERS, GPT_BATCH = 65, 16, 32, 4, 2, 4
"""A character-level GPT as nanoGPT's (manual causal attention, GELU MLP, pre-LayerNorm blocks), shrunk."""


def make_gpt(lib: Any, seed: int = 2) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The GPT, its data and AdamW on `lib`, with the same float32 weights on each library (drawn in the order
    of named_parameters, which both libraries give alike); returns (forward building the loss, AdamW step)."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(GPT_EMBD), nn.LayerNorm(GPT_EMBD)
            self.c_attn, self.c_proj = nn.Linear(GPT_EMBD, 3 * GPT_EMBD), nn.Linear(GPT_EMBD, GPT_EMBD)
            self.c_fc, self.mlp_proj = nn.Linear(GPT_EMBD, 4 * GPT_EMBD), nn.Linear(4 * GPT_EMBD, GPT_EMBD)
            self.register_buffer("bias", lib.tril(lib.ones(GPT_BLOCK, GPT_BLOCK)).view(1, 1, GPT_BLOCK, GPT_BLOCK))

        def attn(self, x: Any) -> Any:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(GPT_EMBD, dim=2)
            k = k.view(B, T, GPT_HEADS, C // GPT_HEADS).transpose(1, 2)
            q = q.view(B, T, GPT_HEADS, C // GPT_HEADS).transpose(1, 2)
            v = v.view(B, T, GPT_HEADS, C // GPT_HEADS).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / float(np.sqrt(k.size(-1))))
            att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
            return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(GPT_VOCAB, GPT_EMBD), nn.Embedding(GPT_BLOCK, GPT_EMBD)
            self.blocks = nn.ModuleList([Block() for _ in range(GPT_LAYERS)])
            self.ln_f, self.lm_head = nn.LayerNorm(GPT_EMBD), nn.Linear(GPT_EMBD, GPT_VOCAB, bias=False)

        def forward(self, idx: Any, targets: Any) -> Any:
            x = self.wte(idx) + self.wpe(lib.arange(idx.size(1)))
            for block in self.blocks:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    model = GPT()
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for _, param in model.named_parameters():
            param.copy_(lib.tensor((rng.standard_normal(tuple(param.shape)) * 0.02).astype(np.float32)))
    idx = lib.tensor(rng.integers(0, GPT_VOCAB, (GPT_BATCH, GPT_BLOCK)))
    targets = lib.tensor(rng.integers(0, GPT_VOCAB, (GPT_BATCH, GPT_BLOCK)))
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)

    def forward() -> Any:
        optimizer.zero_grad(set_to_none=True)
        return model(idx, targets)

    return forward, optimizer.step


# -- main --------------------------------------------------------------------------------------------------
def _graphs(sizes: dict) -> list[Graph]:
    arrays = mlp_arrays(sizes["mlp_width"], sizes["mlp_depth"])
    weights = nn_arrays()
    return [
        Graph("chain", f"x(4,) -> {sizes['chain_ops']} ops (*1.0001, +0.5, sin) -> sum",
              lambda lib: (lambda: build_chain(lib, sizes["chain_ops"]), None)),
        Graph("mlp", f"{sizes['mlp_width']} branches x {sizes['mlp_depth']} layers tanh(h(4,8) @ W(8,8) + b(8,)), "
                     "summed", lambda lib: (lambda: build_mlp(lib, arrays), None)),
        Graph("nn", f"nn.Sequential of {NN_LAYERS} Linear({NN_WIDTH}) + ReLU, batch {NN_BATCH}, CrossEntropyLoss, "
                    "SGD(momentum) step", lambda lib: make_nn(lib, weights)),
        Graph("gpt", f"GPT-nano ({GPT_LAYERS} layers, {GPT_HEADS} heads, n_embd {GPT_EMBD}, block {GPT_BLOCK}, "
                     f"batch {GPT_BATCH}, vocab {GPT_VOCAB}), cross_entropy, AdamW step", make_gpt),
    ]


def _row(graph: str, config: Config, phase: str, times_ns: list[float], count: int, unit: str) -> dict:
    median_ns = statistics.median(times_ns)
    return {"graph": graph, "config": config.name, "phase": phase, "reps": len(times_ns), unit: count,
            "times_ms": [t / 1e6 for t in times_ns], "median_ms": median_ns / 1e6,
            "min_ms": min(times_ns) / 1e6, f"us_per_{unit[:-1]}": median_ns / 1e3 / count}


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

    result: dict = {
        "meta": {
            "quick": quick, "reps": reps, "sizes": sizes,
            "clock": "thread CPU time" if _clock is time.thread_time_ns else "wall time",
            "python": platform.python_version(), "numpy": np.__version__, "engine": engine.__version__,
            "torch": torch.__version__ if torch is not None else None, "platform": platform.platform(),
        },
        "targets": {"noop_observer_over_engine": OBSERVER_TARGET, "engine_over_torch": TORCH_TARGET,
                    "forward_engine_over_torch": FORWARD_TARGET},
        "graphs": {},
        "results": [],
        "checks": [],
    }
    for graph in _graphs(sizes):
        counts: dict[str, tuple[int, int]] = {}
        for lib in (engine, torch):
            if lib is not None:
                build, _ = graph.pass_for(lib)
                root = build().grad_fn
                counts[lib_name(lib)] = (count_nodes(root), count_ops(root))
        # Building the nn graph imports torch._dynamo (torch.optim's first use: ~1e5 objects more); freeze again so
        # that each repetition's gc.collect() stays cheap (about 0.1 s each otherwise, untimed but spent).
        gc.collect()
        gc.freeze()
        nodes, ops = counts["engine"]
        torch_counts = counts.get("torch", (None, None))
        result["graphs"][graph.name] = {"description": graph.description, "nodes": nodes, "ops": ops,
                                        "torch_nodes": torch_counts[0], "torch_ops": torch_counts[1]}
        times = measure(graph, configs, reps * (NN_REPS_FACTOR if graph.name in ("nn", "gpt") else 1))
        per: dict[tuple[str, str], float] = {}
        for config in configs:
            n_nodes, n_ops = counts[lib_name(config.lib)]
            for phase, phase_times in times[config.name].items():
                count, unit = {"forward": (n_ops, "ops"), "backward": (n_nodes, "nodes")}.get(phase, (1, "steps"))
                row = _row(graph.name, config, phase, phase_times, count, unit)
                result["results"].append(row)
                per[(config.name, phase)] = row["median_ms"] / count
            if graph.name == "gpt":  # the whole training step, as the step row's target reads it
                steps = [sum(parts) for parts in zip(*times[config.name].values(), strict=True)]
                row = _row(graph.name, config, "total", steps, 1, "steps")
                result["results"].append(row)
                per[(config.name, "total")] = row["median_ms"]
        _checks(result["checks"], graph.name, per)
    return result


def _checks(checks: list, graph: str, per: dict[tuple[str, str], float]) -> None:
    """The targets: observer cost on backward, engine against torch on backward (per node) and forward (per op)."""
    def check(name: str, ratio: float, target: float) -> None:
        checks.append({"graph": graph, "name": name, "ratio": ratio, "target": target, "met": ratio <= target})

    check("engine+noop-observer / engine", per[("engine+noop-observer", "backward")] / per[("engine", "backward")],
          OBSERVER_TARGET)
    if ("torch", "backward") in per:
        check("engine / torch", per[("engine", "backward")] / per[("torch", "backward")], TORCH_TARGET)
        check("forward engine / torch", per[("engine", "forward")] / per[("torch", "forward")], FORWARD_TARGET)
    if ("torch", "total") in per:
        check("train step engine / torch", per[("engine", "total")] / per[("torch", "total")],
              TORCH_TARGET)


def print_report(result: dict) -> None:
    meta = result["meta"]
    print(f"agdb engine benchmark ({'quick' if meta['quick'] else 'full'}, median of {meta['reps']} reps, "
          f"{meta['clock']}; "
          f"python {meta['python']}, numpy {meta['numpy']}, torch {meta['torch'] or 'not installed'})")
    print()
    for gname, g in result["graphs"].items():
        differs = g["torch_nodes"] not in (None, g["nodes"]) or g["torch_ops"] not in (None, g["ops"])
        extra = f"  (torch graph: {g['torch_nodes']} nodes, {g['torch_ops']} ops!)" if differs else ""
        print(f"  {gname}: {g['description']}; {g['ops']} ops, {g['nodes']} nodes{extra}")
    print()
    header = f"{'graph':<7}{'phase':<10}{'config':<22}{'median ms':>11}{'µs/unit':>10}"
    print(header)
    print("-" * len(header))
    for row in result["results"]:
        unit = next(u for u in ("op", "node", "step") if f"us_per_{u}" in row)
        per = row[f"us_per_{unit}"]
        print(f"{row['graph']:<7}{row['phase']:<10}{row['config']:<22}{row['median_ms']:>11.2f}{per:>10.2f}"
              f"  µs/{unit}")
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
                      reps_help='timed repetitions per config (default 7, quick 3)', argv=argv,
                      flags={"--cpu-time": ("time this thread's CPU time instead of wall time", _use_cpu_time)})


if __name__ == "__main__":
    sys.exit(main())
