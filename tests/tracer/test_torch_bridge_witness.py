"""The bridge's witnesses on real torch: torch's graph task ids and reentrant nesting, the running node, the
execution-order witness (multithreading disabled), and the user's tensor hooks as HookRan events."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.sources import torch as torch_bridge  # noqa: E402
from agdb.tracer.sources.torch import backward as backward_mod  # noqa: E402
from agdb.tracer.sources.torch import hooks as hooks_mod  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402
from tests.tracer import torch_programs  # noqa: E402


def _hooked(log, *tensors):
    """Pre-hook every node reachable from `tensors`; each logs (name, seq_nr, torch's graph task id) as it runs:
    what the script itself observes."""
    held, seen, stack = [], set(), [t.grad_fn for t in tensors]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        held.append(n)
        label = (n.name(), n._sequence_nr())
        n.register_prehook(lambda go, label=label: log.append(label + (torch._C._current_graph_task_id(),)))
        stack.extend(c for c, _ in n.next_functions)
    return held


def _runs(trace):
    """(name, seq_nr, torch's graph task id) of every node start but GraphRoot's, from the trace alone."""
    ids = {t["graph_task"]: t["torch_id"] for t in trace.meta["graph_tasks"]}
    out = []
    for step in trace.steps_of(Kind.NODE_STARTED):
        e = trace[int(step)]
        info = trace.node(e.node)
        if info.name != "GraphRoot":
            out.append((info.name, info.seq_nr, ids[e.graph_task]))
    return out


def test_every_node_run_carries_the_graph_task_id_torch_gave_it():
    """Two backward calls and a reentrant one: each node's torch graph task id, as the trace maps it, is the id
    the script's own hooks read; the reentrant task's parent is the task whose node called it."""
    log: list = []
    held: list = []
    torch_programs.INNER_WATCH[0] = lambda *ts: held.extend(_hooked(log, *ts))
    with tracer.record("torch") as rec:
        first = (torch_programs.leaf().exp() * 2).sum()
        held += _hooked(log, first)
        first.backward()
        x = torch_programs.leaf()  # a new leaf: the watcher hooks each AccumulateGrad once
        z = torch_programs.Reent.apply(x).sum() + x.sin().sum()
        held += _hooked(log, z)
        z.backward()
    torch_programs.INNER_WATCH[0] = lambda *tensors: None
    trace = rec.trace
    assert _runs(trace) == log
    tasks = trace.meta["graph_tasks"]
    assert [t["reentrant_depth"] for t in tasks] == [0, 1, 0]  # in the order they ended: the inner one first
    inner, outer = tasks[1], tasks[2]
    assert inner["parent_torch_id"] == outer["torch_id"] and outer["parent_torch_id"] == -1
    assert tasks[0]["torch_id"] < outer["torch_id"] < inner["torch_id"]
    assert trace.meta["divergences"] == []


def test_a_node_torch_says_runs_in_another_graph_task_is_a_divergence(monkeypatch):
    """If the graph task id a pre-hook reads ever changed within a call, the trace says where, in words."""
    ids = iter(range(10**9, 10**9 + 100))  # far above torch's own ids, which count every backward of the process
    monkeypatch.setattr(hooks_mod, "_gt_id", lambda: next(ids))
    with tracer.record("torch") as rec:
        x = torch_programs.leaf()
        (x.exp() * 2).sum().backward()
    found = [d for d in rec.trace.meta["divergences"] if d["kind"] == "graph_task"]
    assert len(found) == 4  # the call's id comes from its root's witness hook; every pre-hook read another
    assert "ran in torch's graph task" in torch_bridge.divergence_text(rec.trace)


def test_a_running_node_that_is_not_the_hooks_node_is_a_divergence(monkeypatch):
    """`_current_autograd_node()` is checked against the hook's node: a different seq_nr is reported, by node."""
    class Other:
        @staticmethod
        def _sequence_nr():
            return 12345

    real = hooks_mod._running
    monkeypatch.setattr(hooks_mod, "_running", lambda: Other)
    with tracer.record("torch") as rec:
        x = torch_programs.leaf()
        (x.exp() * 2).sum().backward()
    monkeypatch.setattr(hooks_mod, "_running", real)
    found = [d for d in rec.trace.meta["divergences"] if d["kind"] == "running_node"]
    assert {rec.trace.node(d["node"]).name for d in found} == {"SumBackward0", "MulBackward0", "ExpBackward0",
                                                               "torch::autograd::AccumulateGrad"}
    assert "torch's running node had seq_nr 12345" in torch_bridge.divergence_text(rec.trace)


@pytest.mark.parametrize("program", [p for p in torch_programs.PROGRAMS if p is not torch_programs.failed_inner_backward],
                         ids=lambda p: p.__name__)
def test_the_execution_order_witness_agrees_with_the_model_and_the_observed_order(program):
    """With multithreading disabled, torch's execution order, read in each call's root pre-hook, equals what
    agdb's model popped and (its nodes that run) what the pre-hooks saw, on every program but one: torch computes
    the witness on a fresh queue, so failed_inner_backward's stale tasks, ahead in the real queue, make its ties
    break otherwise there (NOTE [witness]; the model and the pre-hooks agree on it, test_torch_bridge)."""
    with tracer.record("torch") as rec, torch.autograd.set_multithreading_enabled(False):
        program(lambda *tensors: None)
    tasks = rec.trace.meta["graph_tasks"]
    witnessed = [t for t in tasks if "execution_order" in t]
    failed = [t for t in tasks if "execution_order" not in t]
    assert witnessed and all(t["execution_order"]["model"] == t["execution_order"]["observed"] == "agrees"
                             for t in witnessed), tasks
    assert all(t.get("execution_order_error") is None for t in tasks)
    assert not failed  # error_in_backward's hook refuses CosBackward0, after the root ran
    assert rec.trace.meta["divergences"] == []
    assert "agrees with the observed order and agdb's model in" in torch_bridge.witness_text(rec.trace)


def test_the_witness_lists_captured_nodes_and_the_observed_order_leaves_them_out():
    """autograd.grad(y, [x]): torch's order ends in x's AccumulateGrad, which is captured, not run."""
    with tracer.record("torch") as rec, torch.autograd.set_multithreading_enabled(False):
        x = torch_programs.leaf()
        torch.autograd.grad((x * x).sum(), [x])
    (task,) = rec.trace.meta["graph_tasks"]
    assert task["execution_order"] == {"length": 3, "model": "agrees", "observed": "agrees"}
    assert len(rec.trace.steps_of(Kind.NODE_STARTED)) == 2


def test_no_witness_with_multithreading_enabled():
    """torch refuses the execution order then: the bridge does not ask, and says nothing about it."""
    with tracer.record("torch") as rec:
        x = torch_programs.leaf()
        (x.exp() * 2).sum().backward()
    (task,) = rec.trace.meta["graph_tasks"]
    assert "execution_order" not in task and torch_bridge.witness_text(rec.trace) == ""


def test_single_threaded_records_the_witness_and_restores_the_setting():
    """record(single_threaded=True) disables autograd multithreading for the block's backward calls (the witness
    is recorded) and enables it again after."""
    assert torch.autograd.is_multithreading_enabled()
    with tracer.record("torch", single_threaded=True) as rec:
        assert not torch.autograd.is_multithreading_enabled()
        x = torch_programs.leaf()
        (x.exp() * 2).sum().backward()
    assert torch.autograd.is_multithreading_enabled()
    (task,) = rec.trace.meta["graph_tasks"]
    assert task["execution_order"] == {"length": 4, "model": "agrees", "observed": "agrees"}


def test_a_witness_that_differs_is_reported(monkeypatch):
    """A witness in another order than the run (here: reversed) is a divergence against both the model and the
    observed order, at the first position that differs."""
    real = backward_mod._execution_order
    monkeypatch.setattr(backward_mod, "_execution_order", lambda: real()[::-1])
    with tracer.record("torch") as rec, torch.autograd.set_multithreading_enabled(False):
        x = torch_programs.leaf()
        (x.exp() * 2).sum().backward()
    found = [d for d in rec.trace.meta["divergences"] if d["kind"] == "witness"]
    assert [(d["against"], d["index"]) for d in found] == [("model", 0), ("observed", 0)]
    names = {rec.trace.node(d["expected"]).name for d in found} | {rec.trace.node(d["observed"]).name for d in found}
    assert names == {"torch::autograd::AccumulateGrad", "SumBackward0"}
    assert "torch's execution order has" in torch_bridge.divergence_text(rec.trace)
    assert rec.trace.meta["graph_tasks"][0]["execution_order"] == {"length": 4, "model": 0, "observed": 0}


# -- tensor hooks ---------------------------------------------------------------------------------------------------
def _hook_program(t, seen):
    """register_hook on a non-leaf and a leaf, retain_grad, a post-accumulate-grad hook; `seen` logs each user hook
    as it runs (only on torch: (kind, the node torch says is running))."""
    def note(kind):
        if t is torch:
            node = torch._C._current_autograd_node()
            seen.append((kind, node.name()))

    def times_ten(g):
        note("tensor_pre")
        return g * 10

    def on_leaf(g):
        note("tensor_pre")

    def accumulated(p):
        note("post_accumulate_grad")

    x = t.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.register_hook(times_ten)
    h.retain_grad()
    x.register_post_accumulate_grad_hook(accumulated)
    x.register_hook(on_leaf)
    h.exp().sum().backward()
    return x, h


def _hook_events(trace):
    out = []
    for step in trace.steps_of(Kind.HOOK_RAN):
        e = trace[int(step)]
        out.append((e.hook_kind, e.node_name, e.hook_name))
    return out


def _around_hooks(trace):
    """The kinds of events around each HookRan, as (kind before, kind after), to pin where hooks sit."""
    kinds = [trace[i].__class__.__name__ for i in range(len(trace))]
    return [(kinds[i - 1], kinds[i + 1]) for i, k in enumerate(kinds) if k == "HookRan"]


def test_tensor_hooks_are_hook_events_where_the_engine_puts_them():
    """The user's tensor, retains_grad and post-accumulate-grad hooks appear as HookRan events, in the order the
    hooks observed themselves on torch, on the nodes torch ran them in, and placed among the other events as
    agdb's engine Recorder places them for the same program."""
    from agdb import engine, tracer

    seen: list = []
    with tracer.record("torch") as rec:
        x, h = _hook_program(torch, seen)
    bridged = _hook_events(rec.trace)
    assert [(k, n) for k, n, _ in bridged if k != "retains_grad"] == seen
    assert ("retains_grad", "MulBackward0", "retain_grad") in bridged
    assert [name for k, _, name in bridged if k != "retains_grad"] == [
        "_hook_program.<locals>.times_ten", "_hook_program.<locals>.on_leaf", "_hook_program.<locals>.accumulated"]
    assert h.grad is not None and x.grad.tolist() == pytest.approx([602.566, 12102.864], rel=1e-4)  # hook's x10
    with tracer.record() as eng:
        _hook_program(engine, [])
    assert bridged == _hook_events(eng.trace)  # kinds, nodes and names (the engine's retains_grad hook too)
    assert _around_hooks(rec.trace) == _around_hooks(eng.trace)
    assert rec.trace.provenance(Kind.HOOK_RAN) == "observed"
    assert rec.trace.meta["divergences"] == []


def test_a_wrapped_hook_is_still_the_users():
    """The hook torch holds reports and returns what the user's does; its handle removes it; a retained tensor
    whose retain_grad() came twice has one hook."""
    calls = []
    with tracer.record("torch") as rec:
        x = torch_programs.leaf()
        h = x * 2
        handle = h.register_hook(lambda g: calls.append(1))
        h.retain_grad()
        h.retain_grad()
        h.sum().backward(retain_graph=True)
        handle.remove()
        h.sum().backward()
    assert calls == [1]
    kinds = [k for k, *_ in _hook_events(rec.trace)]
    assert kinds == ["tensor_pre", "retains_grad", "retains_grad"]
    assert h.grad.tolist() == [2.0, 2.0]


def test_a_hook_that_raises_is_no_event_and_its_node_is_where_the_error_struck():
    """The engine reports a hook once it returned: a tensor hook that raises gives an ErrorRaised on its node."""
    def refuse(g):
        raise ValueError("no")

    with tracer.record("torch") as rec:
        x = torch_programs.leaf()
        h = x.exp()
        h.register_hook(lambda g: None)
        h.register_hook(refuse)
        with pytest.raises(ValueError):
            h.sin().sum().backward()
    assert [k for k, *_ in _hook_events(rec.trace)] == ["tensor_pre"]
    (error,) = [rec.trace[int(s)] for s in rec.trace.steps_of(Kind.ERROR_RAISED)]
    assert error.node_name == "ExpBackward0"
