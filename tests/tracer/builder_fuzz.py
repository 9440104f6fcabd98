"""Random traces written through TraceBuilder's public methods: any calls, in any order, with any small ids, so
the events need not make sense together (a pop with no push, a node run twice, a graph task never started), but
every checksum is right. A hypothesis strategy, for tests/tracer/test_builder_fuzz.py.

What a trace holds comes from `calls`: a list of (method, named arguments) that `build` replays on a builder.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from agdb.tracer import TraceBuilder
from agdb.tracer.store.events import TensorSummary
from agdb.tracer.store.schema import HOOK_KINDS, Kind

ACC = "torch::autograd::AccumulateGrad"
NAMES = ["MulBackward0", "SumBackward0", "GraphRoot", ACC, "torch::autograd::Identity", "SplitBackward0",
         "Weird[/]\x00\x1b[31m", "名前", "a" * 300, ""]
NODES = st.integers(min_value=1, max_value=6)
TASKS = st.integers(min_value=1, max_value=3)
SEQ = st.one_of(st.integers(min_value=0, max_value=12), st.just(2**64 - 1))
SMALL = st.integers(min_value=0, max_value=3)
ANY = st.one_of(SMALL, st.sampled_from([2**31, 2**40, 2**62]))
"""A slot, input_nr, result index or depth: small, or larger than any table a view could make for it."""


def _summary() -> st.SearchStrategy[Any]:
    shapes = st.lists(st.integers(min_value=0, max_value=4), max_size=3).map(tuple)
    arrays = shapes.map(lambda s: np.arange(int(np.prod(s)), dtype=np.float32).reshape(s) - 1.5)
    given = st.builds(TensorSummary, shapes, st.sampled_from(["float32", "float64", "int64"]),
                      st.sampled_from(["cpu", "cuda:0"]),
                      st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=3).map(tuple),
                      st.booleans(), st.booleans())
    return st.one_of(st.none(), arrays, given)


@functools.cache
def _call(made_only: bool = False, task_start: bool = False) -> st.SearchStrategy[tuple[tuple[str, dict], int]]:
    """(one builder call, a row number for its thread or frame): queues are indices into the rows made first
    (resolved by `traces`). With `made_only`, a call that makes or describes a node; with `task_start`, a
    GraphTaskStarted."""
    node_opt = st.one_of(st.none(), NODES)
    edges = st.lists(st.tuples(node_opt, ANY), max_size=3)
    pairs = st.lists(st.tuples(NODES, ANY), max_size=4)
    summaries = st.lists(_summary(), max_size=3)
    calls = [
        st.tuples(st.just("node"), st.fixed_dictionaries({
            "node": NODES, "name": st.sampled_from(NAMES), "seq_nr": SEQ, "topological_nr": SMALL,
            "next_edges": edges, "num_inputs": st.integers(min_value=0, max_value=4)})),
        st.tuples(st.just("node_created"), st.fixed_dictionaries({
            "node": NODES, "name": st.sampled_from(NAMES), "seq_nr": SEQ, "topological_nr": SMALL,
            "next_edges": edges, "num_inputs": st.integers(min_value=0, max_value=4)})),
        st.tuples(st.just("seq_nr_bumped"), st.fixed_dictionaries({
            "node": NODES, "name": st.sampled_from(NAMES), "old": st.integers(min_value=0, max_value=10)})),
        st.tuples(st.just("leaf_name"), st.fixed_dictionaries({"node": NODES, "name": st.sampled_from(NAMES)})),
        st.tuples(st.just("graph_task_started"), st.fixed_dictionaries({
            "graph_task": TASKS, "graph_root": NODES, "roots": pairs, "inputs": pairs,
            "keep_graph": st.booleans(), "create_graph": st.booleans(), "reentrant_depth": ANY})),
        st.tuples(st.just("dependencies_computed"), st.fixed_dictionaries({
            "graph_task": TASKS, "min_topo_nr": SMALL, "dependencies": pairs,
            "pruned": st.lists(NODES, max_size=2)})),
        st.tuples(st.just("exec_info_computed"), st.fixed_dictionaries({
            "graph_task": TASKS, "needed": st.lists(NODES, max_size=3),
            "captured": st.lists(st.tuples(NODES, ANY, ANY), max_size=2)})),
        st.tuples(st.just("task_pushed"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": node_opt, "queue": SMALL, "seq_nr": SEQ, "queue_length": SMALL})),
        st.tuples(st.just("task_popped"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": node_opt, "queue": SMALL, "queue_length": SMALL, "stale": st.booleans()})),
        st.tuples(st.just("buffer_written"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": NODES, "slot": ANY, "is_accumulation": st.booleans()})),
        st.tuples(st.just("hook_ran"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": NODES, "hook_kind": st.sampled_from(HOOK_KINDS),
            "hook_name": st.sampled_from(NAMES)})),
        st.tuples(st.just("node_started"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": NODES, "inputs": summaries})),
        st.tuples(st.just("node_finished"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": NODES, "outputs": summaries})),
        st.tuples(st.just("grad_captured"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": NODES, "output_index": ANY, "grad": _summary()})),
        st.tuples(st.just("grad_accumulated"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": NODES, "grad": _summary()})),
        st.tuples(st.just("error_raised"), st.fixed_dictionaries({
            "graph_task": TASKS, "node": node_opt, "error_type": st.sampled_from(["RuntimeError", "名前"]),
            "message": st.sampled_from(["boom", "line 1\nline 2", "[red]x[/]"])})),
        st.tuples(st.just("graph_task_finished"), st.fixed_dictionaries({
            "graph_task": TASKS, "has_error": st.booleans()})),
    ]
    chosen = calls[:2] if made_only else [calls[4]] if task_start else calls
    return st.tuples(st.one_of(*chosen), st.integers(min_value=0, max_value=2))


@st.composite
def traces(draw: st.DrawFn) -> tuple[Any, list]:
    """(a finished Trace of random TraceBuilder calls, the calls): a few threads, queues and frames, up to 8 nodes
    made and up to 3 graph tasks started on them, then 3 to 40 calls of any kind."""
    b = TraceBuilder(source=draw(st.sampled_from(["engine", "torch", "a tool"])),
                     provenance=draw(st.one_of(st.none(), st.just({Kind.TASK_PUSHED: "reconstructed"}))))
    threads = [b.thread(name) for name in draw(st.lists(st.sampled_from(["MainThread", "worker", "\x1b]0;x"]),
                                                        min_size=1, max_size=3))]
    queues = [b.queue(name) for name in
              draw(st.lists(st.sampled_from(["cpu:0", "cpu:1", "cuda:0", "cpu:99", "cpu:x"]), min_size=1, max_size=3))]
    frames = [b.frame(f, line, "f", src) for f, line, src in
              draw(st.lists(st.tuples(st.sampled_from(["/a/model.py", "x\x00.py", "<stdin>"]),
                                      st.integers(min_value=0, max_value=5),
                                      st.sampled_from([None, "y = (x * w).sum()", ""])), max_size=2))]
    made = []
    # Nodes made first, most of the time, so that the events after them are kept (an event naming a node the
    # builder never saw is left out of the trace).
    first = [((method, {**kwargs, "node": key}), who)
             for key, ((method, kwargs), who) in enumerate(draw(st.lists(_call(made_only=True), max_size=6)), 1)]
    if first:  # graph tasks started on a known root: the events of a task whose start is unknown are left out
        first += [(("graph_task_started", {**kwargs, "graph_root": draw(st.integers(1, len(first)))}), who)
                  for (_, kwargs), who in draw(st.lists(_call(task_start=True), max_size=3))]
    for (method, kwargs), who in first + draw(st.lists(_call(), min_size=3, max_size=40)):
        kwargs = dict(kwargs)
        if method not in ("node", "leaf_name"):
            kwargs["thread"] = threads[who % len(threads)]
        if method == "node" and who:
            kwargs["thread"] = threads[who % len(threads)]
        if method in ("task_pushed", "task_popped"):
            kwargs["queue"] = queues[kwargs["queue"] % len(queues)]
        if method in ("node_created", "seq_nr_bumped") and frames:
            kwargs["frame"] = frames[who % len(frames)]
        if method == "seq_nr_bumped":
            kwargs["seq_nr"] = kwargs["old"] + 1
        getattr(b, method)(**kwargs)
        made.append((method, kwargs))
    return b.finish(), made


@functools.cache
def metas(num_nodes: int) -> st.SearchStrategy[dict]:
    """Extra `meta` keys as the bridge writes them, well formed, for a trace of `num_nodes` nodes."""
    row = st.integers(min_value=-1, max_value=max(num_nodes - 1, -1))
    divergence = st.one_of(
        st.fixed_dictionaries({"graph_task": TASKS, "step": SMALL, "expected": row, "observed": row}),
        st.fixed_dictionaries({"kind": st.just("graph_task"), "graph_task": TASKS, "step": SMALL, "node": row,
                               "expected_id": SMALL, "observed_id": SMALL}),
        st.fixed_dictionaries({"kind": st.just("running_node"), "graph_task": TASKS, "step": SMALL, "node": row,
                               "running_seq_nr": SMALL}),
        st.fixed_dictionaries({"kind": st.just("witness"), "graph_task": TASKS, "step": SMALL, "node": row,
                               "against": st.sampled_from(["model", "observed"]), "index": SMALL,
                               "expected": row, "observed": row}))
    task = st.fixed_dictionaries({"graph_task": TASKS, "torch_id": SMALL, "parent_torch_id": st.none(),
                                  "reentrant_depth": SMALL},
                                 optional={"execution_order": st.fixed_dictionaries({
                                     "length": SMALL, "model": st.one_of(st.just("agrees"), SMALL),
                                     "observed": st.one_of(st.just("agrees"), SMALL)})})
    return st.fixed_dictionaries({}, optional={
        "divergences": st.lists(divergence, max_size=3), "graph_tasks": st.lists(task, max_size=2),
        "bridge_errors": st.lists(st.sampled_from(["a hook failed", "[red]x"]), max_size=2),
        "omitted": st.fixed_dictionaries({"graph_tasks": SMALL, "events": SMALL})})
