"""The TUI driven by Pilot on the built-in example: stepping, jumps, help, and bad input."""
from __future__ import annotations

from agdb.app.app import AgdbApp
from agdb.app.screens.help import HelpScreen
from agdb.app.screens.step import StepChanged, StepScreen
from agdb.tracer.replay.node_states import STATES
from agdb.tracer.store.events import GraphTaskFinished, NodeStarted, SeqNrBumped
from agdb.widgets.graph_view import GraphView
from tests.app.pilot import opened, recorded


async def test_next_and_previous_keys_move_one_event(demo_trace):
    """`l` and `h` move the cursor one event and announce each step; `h` stops at step 0."""
    seen = []
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("l", "l", "h", "h", "h")
        await pilot.pause()
        assert screen.step == 0
        announced = list({id(m): m for m in seen if isinstance(m, StepChanged)}.values())  # bubbling repeats
        assert [m.step for m in announced] == [0, 1, 2, 1, 0]


async def test_node_keys_jump_between_node_runs(demo_trace):
    """`n` goes to the next NodeStarted event and `N` back to the previous one."""
    starts = [e.step for e in demo_trace if isinstance(e, NodeStarted)]
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("n", "n")
        await pilot.pause()
        assert screen.step == starts[1]
        await pilot.press("N")
        await pilot.pause()
        assert screen.step == starts[0]


async def test_start_and_end_keys(demo_trace):
    """`G` goes to the last event (a GraphTaskFinished here) and `g` back to the first (a seq bump)."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("G")
        await pilot.pause()
        assert screen.step == len(demo_trace) - 1 and isinstance(screen.state.event, GraphTaskFinished)
        await pilot.press("g")
        await pilot.pause()
        assert screen.step == 0 and isinstance(screen.state.event, SeqNrBumped)


async def test_go_to_step_box(demo_trace):
    """`:` then a number and Enter jumps there; a number out of range leaves the step and warns."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("colon", "4", "2", "enter")
        await pilot.pause()
        assert screen.step == 42
        await pilot.press("colon", "9", "9", "9", "9", "enter")
        await pilot.pause()
        assert screen.step == 42
        assert any("outside" in n.message for n in app._notifications)


async def test_running_node_is_marked_and_in_view(demo_trace):
    """At a NodeStarted step the graph marks that node running and puts the cursor on it."""
    start = next(e for e in demo_trace if isinstance(e, NodeStarted))
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = start.step
        await pilot.pause()
        graph = screen.query_one(GraphView)
        assert STATES[int(graph.codes[start.node])] == "running"
        assert graph.node_at(graph.cursor) == start.node


async def test_help_lists_every_key(demo_trace):
    """`?` opens the help screen with every binding's description; Escape closes it."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        descriptions = {b.description for b in StepScreen.BINDINGS}
        shown = {b.description for b in app.screen.bindings_shown}
        assert descriptions == shown
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, StepScreen)


async def test_bad_trace_file_is_reported_not_crashed(tmp_path):
    """Opening a file that is not a trace shows agdb's error and keeps the app running."""
    bad = tmp_path / "bad.agdb"
    bad.write_bytes(b"not a trace at all")
    app = AgdbApp(path=str(bad))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(app.query_one("#status").render())
        assert "could not open" in status and "not an agdb trace" in status


async def test_script_that_raises_opens_what_was_recorded(tmp_path):
    """A script that raises after a backward opens its trace and notifies the error."""
    script = tmp_path / "boom.py"
    script.write_text("import agdb.engine as torch\n"
                      "x = torch.ones(2, requires_grad=True)\n"
                      "(x * 2).sum().backward()\n"
                      "raise ValueError('boom after backward')\n")
    app = AgdbApp(script=str(script))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        assert len((await recorded(app, pilot)).trace) > 0
        assert any("boom after backward" in n.message for n in app._notifications)


async def test_small_terminal_does_not_crash(demo_trace):
    """The screen survives a 60x20 terminal and stepping in it."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(60, 20)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("n", "n", "l")
        await pilot.pause()
        assert screen.step > 0
