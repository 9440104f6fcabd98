"""Replay of a reentrant backward: graph task depths and the priorities of inner tasks (engine-semantics §13)."""
from __future__ import annotations

from agdb import engine as torch
from agdb import tracer
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store.events import GraphTaskStarted, TaskPushed


class _Reent(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            q = torch.ones(2, requires_grad=True)
            (q.exp() * 3).sum().backward()
        return g * 2


def _record():
    with tracer.record() as rec:
        x = torch.ones(2, requires_grad=True)
        y = torch.ones(2, requires_grad=True)
        (y.exp() + _Reent.apply(x)).sum().backward()
    return rec.trace


def test_inner_graph_task_has_depth_one_in_replay():
    """While the inner backward runs, the replayed state holds the outer task at depth 0 and the inner at 1."""
    trace = _record()
    starts = [e for e in trace if isinstance(e, GraphTaskStarted)]
    assert [e.reentrant_depth for e in starts] == [0, 1]
    inner = starts[1]
    state = Replay(trace).state_at(inner.step + 1)
    assert {g.graph_task: g.reentrant_depth for g in state.graph_tasks} == {starts[0].graph_task: 0,
                                                                              inner.graph_task: 1}


def test_inner_tasks_carry_depth_one_priority():
    """Tasks pushed by the reentrant backward have priority depth 1, ahead of the outer ones (depth 0)."""
    trace = _record()
    starts = [e for e in trace if isinstance(e, GraphTaskStarted)]
    pushes = [e for e in trace if isinstance(e, TaskPushed) and e.node is not None]
    assert {e.priority[0] for e in pushes if e.graph_task == starts[1].graph_task} == {1}
    assert {e.priority[0] for e in pushes if e.graph_task == starts[0].graph_task} == {0}
    first_inner = next(e for e in pushes if e.graph_task == starts[1].graph_task)
    queue = Replay(trace).state_at(first_inner.step).ready_queues
    heads = [q.tasks[0] for q in queue if q.tasks]
    assert heads and heads[0].priority[0] == 1
