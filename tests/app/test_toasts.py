"""Notifications stay out of the way: they never cover the status line or the key hints, only the newest few
show at once, and a breakpoint stop selects the node its event concerns."""
from __future__ import annotations

from textual.widgets._toast import Toast

from agdb.app.app import AgdbApp
from agdb.tracer.store.events import NodeStarted, TaskPushed
from tests.app.pilot import opened


async def test_toasts_leave_the_status_line_and_footer_alone(demo_trace):
    """Three warnings in a row: at most MAX_TOASTS show, and none overlaps the status line or the footer."""
    from agdb.app.app import MAX_TOASTS

    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("c", "right_square_bracket", "c")  # no breakpoint, no search: three warnings
        await pilot.pause()
        await pilot.pause()
        toasts = [t for t in screen.query(Toast) if t.region.height]
        assert 1 <= len(toasts) <= MAX_TOASTS
        status, footer = screen.query_one("#timeline").region, screen.query_one("#key-hints").region
        for toast in toasts:
            assert not toast.region.overlaps(status) and not toast.region.overlaps(footer), toast.region


async def test_a_kept_error_stays_while_other_toasts_come_and_go(demo_trace):
    """A notification kept until clicked (the script's error) is not pushed out by later notes; of those only
    the newest show."""
    from agdb.app.app import MAX_TOASTS

    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        app.notify("the script raised", timeout=10**9, severity="error")
        for i in range(5):
            app.notify(f"note {i}")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert messages[0] == "the script raised"
        assert messages[1:] == [f"note {i}" for i in range(5 - MAX_TOASTS, 5)]


async def test_breakpoint_stop_selects_the_node(demo_trace):
    """`c` stopping on `node CosBackward0` selects CosBackward0's node; on `push` the pushed node: `i` is not
    needed, and the inspector shows it."""
    start = next(e for e in demo_trace if isinstance(e, NodeStarted) and e.node_name == "CosBackward0")
    push = next(e for e in demo_trace if isinstance(e, TaskPushed) and e.node is not None)
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("b", *"node CosBackward0", "enter", "c")
        await pilot.pause()
        assert screen.step == start.step and screen.selected_node == start.node
        await pilot.press("B", "g", "b", *"push", "enter", "c")
        await pilot.pause()
        assert screen.step == push.step and screen.selected_node == push.node
