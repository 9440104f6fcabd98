"""Reentrant backward (engine-semantics §13.1, §13.2, §15 G): a backward started inside a running node.

Expected orders are those recorded on torch 2.13 in experiments/e6_reentrant.out and e6b_depth.out.
The depth > 60 thread hand-off (engine-semantics §13.3) is not tested here."""
from __future__ import annotations

import math
import threading

import pytest

from agdb import engine
from tests.engine.helpers import GraphTaskRecorder, hook_every_node, node_label, run_in_thread

gs = engine.autograd._get_sequence_nr


class DepthRecorder(GraphTaskRecorder):
    """Observer recording every GraphTask started, with its reentrant depth."""

    @property
    def depths(self):
        return [t.reentrant_depth for t in self.tasks]


def _instrument(roots, log, prefix, leaf_names):
    """Pre-hook on every reachable node logging prefix + `Name#seq` or `Acc(<leaf>)`."""
    hook_every_node(roots, lambda n: log.append(prefix + node_label(n, leaf_names)))


def test_inner_nodes_run_inside_outer_node():
    """engine-semantics §13.2/e6_reentrant: inner nodes run between ReentBackward's start and end, before Acc(x) and the outer Exp."""

    def case():
        log: list[str] = []
        names: dict[int, str] = {}
        threads: set[int] = set()

        class Reent(engine.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * 2

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                log.append("ReentBackward: start")
                threads.add(threading.get_ident())
                with engine.enable_grad():
                    q = a.detach().requires_grad_()
                    names[id(q)] = "inner_q"
                    r = (q.exp() * 3).sin().sum()
                    _instrument([r.grad_fn], log, "  inner:", names)
                    engine.autograd.backward(r)  # reentrant: called from inside a running node
                log.append("ReentBackward: end")
                return g * 2

        x = engine.ones(2, requires_grad=True)
        names[id(x)] = "x"
        y = engine.ones(2, requires_grad=True)
        names[id(y)] = "y"
        s = y.exp()  # ExpBackward0 #0 (lower seq)
        p = Reent.apply(x)  # ReentBackward #1
        z = (s + p).sum()  # AddBackward0 #2, SumBackward0 #3
        _instrument([z.grad_fn], log, "outer node executed: ", names)
        z.backward()
        return log, threads, threading.get_ident(), x.grad.tolist(), y.grad.tolist()

    log, threads, caller, xg, yg = run_in_thread(case)
    assert log == [
        "outer node executed: SumBackward0#3",
        "outer node executed: AddBackward0#2",
        "outer node executed: ReentBackward#1",
        "ReentBackward: start",
        "  inner:SumBackward0#7",
        "  inner:SinBackward0#6",
        "  inner:MulBackward0#5",
        "  inner:ExpBackward0#4",
        "  inner:Acc(inner_q)",
        "ReentBackward: end",
        "outer node executed: Acc(x)",
        "outer node executed: ExpBackward0#0",
        "outer node executed: Acc(y)",
    ]
    assert threads == {caller}  # engine-semantics §12.2/§13.1: run inline on the calling thread
    assert xg == [2.0, 2.0]
    assert yg == pytest.approx([math.e, math.e])


def test_depth_priority_beats_seq():
    """engine-semantics §13.2/§15 G/e6b_depth: inner nodes forced to seq 1..4 run before an outer ExpBackward0 forced to seq 100."""
    log: list[str] = []

    class Reent(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            log.append("ReentBackward start")
            with engine.enable_grad():
                q = engine.ones(2, requires_grad=True)
                r = (q.exp() * 3).sin().sum()
                n = r.grad_fn
                k = 1
                while n is not None and not hasattr(n, "variable"):
                    n._set_sequence_nr(k)  # force inner seq numbers very low (1..4)
                    k += 1
                    n.register_prehook(lambda go, n=n: log.append("  inner %s#%d" % (n.name(), n._sequence_nr())))
                    n = n.next_functions[0][0]
                engine.autograd.backward(r)
            log.append("ReentBackward end")
            return g * 2

    x = engine.ones(2, requires_grad=True)
    y = engine.ones(2, requires_grad=True)
    s = y.exp()
    p = Reent.apply(x)
    z = (s + p).sum()
    s.grad_fn._set_sequence_nr(100)
    p.grad_fn._set_sequence_nr(200)
    s.grad_fn.register_prehook(lambda go: log.append("outer ExpBackward0#100"))
    p.grad_fn.register_prehook(lambda go: log.append("outer ReentBackward#200"))
    z.backward()
    assert log == [
        "outer ReentBackward#200",
        "ReentBackward start",
        "  inner SumBackward0#1",
        "  inner SinBackward0#2",
        "  inner MulBackward0#3",
        "  inner ExpBackward0#4",
        "ReentBackward end",
        "outer ExpBackward0#100",
    ]


def test_reentrant_graph_task_depth_and_queue():
    """engine-semantics §13.1: the reentrant GraphTask has reentrant_depth 1 (outer 0) and uses the outer task's CPU queue."""
    rec = DepthRecorder()

    class Reent(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            with engine.enable_grad():
                q = engine.ones(2, requires_grad=True)
                (q * 3).sum().backward()
                ctx_inner_grad = q.grad
            return g * ctx_inner_grad

    x = engine.ones(2, requires_grad=True)
    with engine.add_observer(rec):
        Reent.apply(x).sum().backward()
    assert rec.depths == [0, 1]
    assert rec.tasks[1].cpu_ready_queue is rec.tasks[0].cpu_ready_queue
    assert x.grad.tolist() == [3.0, 3.0]


def test_reentrant_autograd_grad_inside_backward():
    """engine-semantics §13.1: an autograd.grad started inside a running node is reentrant (depth 1) and returns the right grad."""
    rec = DepthRecorder()

    class SquareViaGrad(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            with engine.enable_grad():
                q = a.detach().requires_grad_()
                (dq,) = engine.autograd.grad((q * q).sum(), q)  # 2q
            return g * dq

    x = engine.tensor([1.0, -2.0, 3.0], requires_grad=True)
    with engine.add_observer(rec):
        SquareViaGrad.apply(x).sum().backward()
    assert rec.depths == [0, 1]
    assert x.grad.tolist() == [2.0, -4.0, 6.0]


def test_nested_reentrant_five_levels():
    """engine-semantics §13.1: reentrant backward nested 5 levels deep runs inline with depths 0..5 and gives correct grads."""
    rec = DepthRecorder()
    calls: list[tuple[int, list[float], int]] = []

    class Nest(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a, depth):
            ctx.depth = depth
            return a * 2

        @staticmethod
        def backward(ctx, g):
            if ctx.depth > 0:
                with engine.enable_grad():
                    q = engine.ones(1, requires_grad=True)
                    Nest.apply(q, ctx.depth - 1).sum().backward()
                inner = q.grad  # d/dq of Nest(q).sum() = 2 at every level
            else:
                inner = engine.tensor([2.0])
            calls.append((ctx.depth, inner.tolist(), threading.get_ident()))
            return g * inner, None

    x = engine.tensor([3.0], requires_grad=True)
    with engine.add_observer(rec):
        y = (Nest.apply(x, 5) * x).sum()  # y = 2x * x, dy/dx = 4x = 12
        y.backward()
    assert rec.depths == [0, 1, 2, 3, 4, 5]
    assert [d for d, _, _ in calls] == [0, 1, 2, 3, 4, 5]  # innermost finishes first
    assert all(inner == [2.0] for _, inner, _ in calls)
    assert {tid for _, _, tid in calls} == {threading.get_ident()}
    assert x.grad.tolist() == [12.0]
