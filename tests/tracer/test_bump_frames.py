"""The Recorder names the user's line of each seq_nr bump and node, wherever the engine's frames and the user's
interleave (NOTE [bump frames] in tracer/sources/engine.py)."""
from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace

from agdb import engine as t
from agdb.tracer.sources.engine import Recorder


def _line_of(fn, text: str) -> int:
    """The line number of the line of `fn`'s source that contains `text` (read from the file, not the trace)."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


class Square(t.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return x * grad * 2.0  # MARK: made in backward


def test_a_node_made_in_a_custom_backward_names_the_backwards_line():
    """With create_graph, a custom Function's backward (user code the engine calls) makes a MulBackward0: its bump
    and its NodeCreated name that line of the backward, not the engine's frames nor the user's backward() call."""
    x = t.ones(3, requires_grad=True)
    y = Square.apply(x).sum()
    recorder = Recorder().attach()
    (g,) = t.autograd.grad(y, x, create_graph=True)
    trace = recorder.finish()
    mark = _line_of(Square.backward, "MARK: made in backward")
    bumps = [(e.node_name, e.filename, e.lineno) for e in trace if type(e).__name__ == "SeqNrBumped"]
    created = [(e.name, e.filename, e.lineno) for e in trace if type(e).__name__ == "NodeCreated"]
    assert ("MulBackward0", __file__, mark) in bumps
    assert ("MulBackward0", __file__, mark) in created


def test_a_bump_reported_by_hand_names_its_callers_line():
    """A call of seq_nr_bumped that does not come from the engine's Node.__init__ (a tool or a test reporting one)
    names the line that called it."""
    recorder = Recorder().attach()
    node = SimpleNamespace(_uid=10**9, _name="ReportedBackward")  # a node the engine never made
    recorder.seq_nr_bumped(node, 7); line = sys._getframe().f_lineno  # noqa: E702 - the call's own line
    trace = recorder.finish()
    bump = [e for e in trace if type(e).__name__ == "SeqNrBumped"][-1]
    assert (bump.node_name, bump.old, bump.filename, bump.lineno) == ("ReportedBackward", 7, __file__, line)
