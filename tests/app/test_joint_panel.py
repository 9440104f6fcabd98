"""The joint-graph panel: forward and backward side by side, partners by seq_nr highlighted, marks."""
from __future__ import annotations

from agdb import engine as torch
from agdb import tracer
from agdb.app.app import AgdbApp
from agdb.app.screens.step import StepScreen
from agdb.tracer.fx import capture_joint
from agdb.tracer.views.joint import with_joint
from agdb.widgets.joint_graph import JointGraphView


def f(x, w):
    a = x * w
    return (a.sin() + a).sum()


def joint_trace():
    with tracer.record() as rec:
        g = capture_joint(f, torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True))
    return with_joint(rec.trace, g)


async def test_partners_follow_the_cursor():
    """On `sin` its backward nodes (cos, mul_1) are partners; on `mul_2` its forward node `mul` is; the grad-acc
    row is marked Σ and backward rows sit in the right column."""
    app = AgdbApp(trace=joint_trace(), title="joint")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)
        await pilot.press("9")
        await pilot.pause()
        view = app.screen.query_one(JointGraphView)
        names = [n.name for n in view.nodes]
        view.cursor = names.index("sin")
        await pilot.pause()
        assert {names[i] for i in range(len(names)) if view.is_partner(i)} == {"cos", "mul_1"}
        view.cursor = names.index("mul_2")
        assert {names[i] for i in range(len(names)) if view.is_partner(i)} == {"mul"}
        acc = view.row_text(names.index("add_1")).plain
        assert "│ Σ" in acc and "add_1 = add(expand, mul_1)" in acc
        assert view.row_text(names.index("mul")).plain.rstrip().endswith("│")


async def test_trace_without_joint_graph_says_how_to_get_one():
    """A trace recorded without `agdb fx -o` shows one line saying how to record a joint graph."""
    with tracer.record() as rec:
        (torch.randn(2, requires_grad=True) * 2).sum().backward()
    app = AgdbApp(trace=rec.trace, title="plain")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        view = app.screen.query_one(JointGraphView)
        assert "agdb fx SCRIPT -o" in view.row_text(0).plain
