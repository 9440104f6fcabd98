"""Reentrant backward on the CPU, side by side with real PyTorch 2.13 (engine-semantics §13.1–§13.3, §15 G).

Each program is written once against a module `t` (engine or torch) and returns plain Python data;
the two runs must be equal. The programs are experiments/e6_reentrant.py (Nest, 70 levels) and
experiments/e6b_depth.py (forced seq_nrs), with per-level records added.
"""
from __future__ import annotations

import threading

import pytest

from agdb import engine

pytestmark = pytest.mark.torch


def nest_program(t, levels: int = 70):
    """Nest(levels): each level's backward starts a backward of Nest(level-1).

    Returns per level (depth, ran on the calling thread, index of its thread in order of first appearance,
    incoming grad, grad of the inner leaf it made), plus the outer leaf's grad and the number of threads."""
    caller = threading.get_ident()
    rows: dict[int, list] = {}
    first_seen: list[int] = []

    class Nest(t.autograd.Function):
        @staticmethod
        def forward(ctx, a, depth):
            ctx.depth = depth
            return a * (depth + 1)

        @staticmethod
        def backward(ctx, g):
            ident = threading.get_ident()
            if ident not in first_seen:
                first_seen.append(ident)
            row = [ctx.depth, ident == caller, first_seen.index(ident), g.tolist(), None]
            rows[ctx.depth] = row
            if ctx.depth > 0:
                with t.enable_grad():
                    q = t.ones(1, dtype=t.float64, requires_grad=True)
                    Nest.apply(q, ctx.depth - 1).sum().backward()
                    row[4] = q.grad.tolist()
            return g * (ctx.depth + 1), None

    x = t.ones(1, dtype=t.float64, requires_grad=True)
    Nest.apply(x, levels).sum().backward()
    return [tuple(rows[d]) for d in sorted(rows, reverse=True)], x.grad.tolist(), len(first_seen)


def depth_priority_program(t):
    """e6b_depth: an outer ExpBackward0 forced to seq 100 and ReentBackward forced to 200; ReentBackward runs an
    inner backward whose nodes are forced to seq 1..4. Returns the pre-hook log and the grads."""
    log: list[str] = []

    class Reent(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            log.append("ReentBackward start")
            with t.enable_grad():
                q = t.ones(2, dtype=t.float64, requires_grad=True)
                r = (q.exp() * 3).sin().sum()
                n = r.grad_fn
                k = 1
                while n is not None and not hasattr(n, "variable"):
                    n._set_sequence_nr(k)
                    k += 1
                    n.register_prehook(lambda go, n=n: log.append("  inner %s#%d" % (n.name(), n._sequence_nr())))
                    n = n.next_functions[0][0]
                t.autograd.backward(r)
                log.append("  inner q.grad %s" % [round(v, 12) for v in q.grad.tolist()])
            log.append("ReentBackward end")
            return g * 2

    x = t.ones(2, dtype=t.float64, requires_grad=True)
    y = t.ones(2, dtype=t.float64, requires_grad=True)
    s = y.exp()
    p = Reent.apply(x)
    z = (s + p).sum()
    s.grad_fn._set_sequence_nr(100)
    p.grad_fn._set_sequence_nr(200)
    s.grad_fn.register_prehook(lambda go: log.append("outer ExpBackward0#%d" % s.grad_fn._sequence_nr()))
    p.grad_fn.register_prehook(lambda go: log.append("outer ReentBackward#%d" % p.grad_fn._sequence_nr()))
    z.backward()
    return log, x.grad.tolist(), [round(v, 12) for v in y.grad.tolist()]


def test_nest_70_levels_matches_torch():
    """Nest(70): same per-level threads (70..10 caller, 9..0 one other) and grads as torch."""
    torch = pytest.importorskip("torch")
    ours = nest_program(engine)
    theirs = nest_program(torch)
    assert ours == theirs
    rows, xgrad, nthreads = theirs  # and torch itself shows what engine-semantics §13.3 says
    assert [r[0] for r in rows if r[1]] == list(range(70, 9, -1))
    assert [r[0] for r in rows if not r[1]] == list(range(9, -1, -1))
    assert {r[2] for r in rows if not r[1]} == {1}
    assert nthreads == 2 and xgrad == [71.0]


def test_nest_shallow_stays_inline_like_torch():
    """Nest(59) (< MAX_DEPTH reentrant calls) runs wholly on the caller, as on torch."""
    torch = pytest.importorskip("torch")
    ours = nest_program(engine, 59)
    theirs = nest_program(torch, 59)
    assert ours == theirs
    assert all(r[1] for r in theirs[0]) and theirs[2] == 1


def test_nest_boundary_61_levels_like_torch():
    """Nest(61): only level 0 (the 61st reentrant call) leaves the caller, as on torch."""
    torch = pytest.importorskip("torch")
    ours = nest_program(engine, 61)
    theirs = nest_program(torch, 61)
    assert ours == theirs
    assert [r[0] for r in theirs[0] if not r[1]] == [0]


def test_forced_seq_depth_priority_matches_torch():
    """e6b_depth on engine and torch: the same execution log (inner nodes #1..#4 before the outer #100) and grads."""
    torch = pytest.importorskip("torch")
    ours = depth_priority_program(engine)
    theirs = depth_priority_program(torch)
    assert ours == theirs
    log = theirs[0]
    assert log[:2] == ["outer ReentBackward#200", "ReentBackward start"]
    assert log[2:6] == ["  inner SumBackward0#1", "  inner SinBackward0#2", "  inner MulBackward0#3",
                        "  inner ExpBackward0#4"]
    assert log[-2:] == ["ReentBackward end", "outer ExpBackward0#100"]


def test_forced_seq_depth_priority_in_fresh_thread_matches_torch():
    """The same e6b_depth program run from a fresh Python thread gives the same log and grads on both."""
    torch = pytest.importorskip("torch")
    from tests.engine.helpers import run_in_thread

    assert run_in_thread(lambda: depth_priority_program(engine)) == run_in_thread(
        lambda: depth_priority_program(torch))
