"""Pilot tests for every action of the step screen beyond stepping: search, breakpoints, selection that
follows across panels, the node inspector, panels (show, hide, zoom, tabs), the palette and cancelling."""
from __future__ import annotations

import pytest
from textual.command import CommandList, CommandPalette

from agdb.app.app import AgdbApp
from agdb.app.screens.panels import PANELS
from agdb.app.screens.step import BreakpointHit, NodeFollowed, StepScreen
from agdb.tracer.store.events import ErrorRaised, HookRan, NodeStarted, TaskPushed
from agdb.tracer.store.schema import short_name
from agdb.tracer.views.panel_text import tensor_text
from agdb.widgets.culprits import CulpritsView
from agdb.widgets.forward_backward import ForwardBackwardView
from agdb.widgets.graph_view import GraphView
from agdb.widgets.lazy_list import LazyList
from agdb.widgets.node_inspector import NodeInspector
from tests.app.pilot import opened, recorded, recording_began, wait_for


def _unique(messages, kind):
    """Messages of one kind, once each (bubbling delivers a message to several hooks)."""
    return list({id(m): m for m in messages if isinstance(m, kind)}.values())


def _palette_highlights(app, title: str) -> bool:
    """Whether the open command palette has finished searching and highlights the command called `title`."""
    palette = app.screen
    if not isinstance(palette, CommandPalette):
        return False
    if any(w.group == palette._GATHER_COMMANDS_GROUP and not w.is_finished for w in app.workers):
        return False
    options = palette.query_one(CommandList)
    if options.highlighted is None:
        return False
    return str(options.get_option_at_index(options.highlighted).hit.text) == title


def _displayed(screen: StepScreen) -> set[str]:
    return {p.id for p in PANELS if screen.query_one(f"#panel-{p.id}").display}


# -- search --------------------------------------------------------------------------------------------------
async def test_search_by_name_selects_matches_in_graph_order(demo_trace):
    """`/mul` selects the newest MulBackward0; `]` walks to older matches and wraps; `[` walks back."""
    # MulBackward0 only: `mul` inside AccumulateGrad is not a word or a prefix (issue 16)
    muls = sorted((i for i in range(demo_trace.num_nodes) if demo_trace.node(i).name == "MulBackward0"), reverse=True)
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("slash", *"mul", "enter")
        await pilot.pause()
        assert screen.selected_node == muls[0]
        seen = [screen.selected_node]
        for _ in range(len(muls)):
            await pilot.press("right_square_bracket")
            await pilot.pause()
            seen.append(screen.selected_node)
        assert seen == muls + [muls[0]]
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert screen.selected_node == muls[-1]


async def test_search_by_seq_nr_and_no_match(demo_trace):
    """`/seq 3` selects the node with seq_nr 3; a query nothing matches warns and keeps the selection."""
    node3 = next(i for i in range(demo_trace.num_nodes) if demo_trace.node(i).seq_nr == 3)
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("slash", *"seq 3", "enter")
        await pilot.pause()
        assert screen.selected_node == node3
        await pilot.press("slash", *"nosuchnode", "enter")
        await pilot.pause()
        assert screen.selected_node == node3
        assert any("no node matches" in n.message for n in app._notifications)


# -- breakpoints ---------------------------------------------------------------------------------------------
async def test_breakpoint_on_node_name_runs_forward_and_back(demo_trace):
    """`b` + `node CosBackward0`, then `c` stops where CosBackward0 starts, `C` returns to the one before."""
    starts = [e.step for e in demo_trace if isinstance(e, NodeStarted) and e.node_name == "CosBackward0"]
    assert starts
    seen = []
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("b", *"node CosBackward0", "enter", "c")
        await pilot.pause()
        assert screen.step == starts[0]
        assert screen.state.event.node_name == "CosBackward0"
        hits = _unique(seen, BreakpointHit)
        assert [h.step for h in hits] == [starts[0]] and str(hits[0].breakpoint) == "node CosBackward0"
        await pilot.press("G", "C")
        await pilot.pause()
        assert screen.step == starts[-1]


async def test_breakpoints_on_push_seq_and_several_at_once(demo_trace):
    """With `push SumBackward0` and `seq 16` set, `c` stops at whichever comes first, each time."""
    pushes = [e.step for e in demo_trace if isinstance(e, TaskPushed) and e.node_name == "SumBackward0"]
    seq16 = [e.step for e in demo_trace if getattr(e, "old", None) == 16 or
             (isinstance(e, NodeStarted) and demo_trace.node(e.node).seq_nr == 16)]
    expected = sorted(set(pushes) | set(seq16))
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("b", *"push SumBackward0", "enter", "b", *"seq 16", "enter")
        stops = []
        for _ in range(len(expected)):
            await pilot.press("c")
            await pilot.pause()
            stops.append(screen.step)
        assert stops == expected


async def test_breakpoint_on_error_and_nan():
    """`error` stops at the ErrorRaised of a failing backward; `nan` at the first event carrying a NaN grad."""
    from agdb import engine as torch
    from agdb import tracer

    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")

    with tracer.record() as rec:
        x = torch.tensor([0.0, 1.0], requires_grad=True)
        (x / x).sum().backward()  # 0/0: the grads carry NaN
        with pytest.raises(ValueError):
            Boom.apply(x).sum().backward()
    trace = rec.trace
    error_step = next(e.step for e in trace if isinstance(e, ErrorRaised))
    nan_step = next(e.step for e in trace
                    if any(t is not None and t.has_nan
                           for t in (getattr(e, "inputs", ()) + getattr(e, "outputs", ()) +
                                     ((e.grad,) if hasattr(e, "grad") else ()))))
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("b", *"error", "enter", "c")
        await pilot.pause()
        assert screen.step == error_step
        await pilot.press("B", "b", *"nan", "enter", "g", "c")
        await pilot.pause()
        assert screen.step == nan_step


async def test_bad_breakpoint_and_none_set_are_explained(demo_trace):
    """A malformed breakpoint is refused with the accepted forms; `c` with none set or none ahead warns."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        assert screen.step == 0 and any("no breakpoint is set" in n.message for n in app._notifications)
        await pilot.press("b", *"seq x", "enter")
        await pilot.pause()
        assert screen.breakpoints == [] and any("seq needs a number" in n.message for n in app._notifications)
        await pilot.press("b", *"error", "enter", "c")  # the demo raises nothing
        await pilot.pause()
        assert screen.step == 0 and any("no breakpoint stops after" in n.message for n in app._notifications)


# -- selection that follows across panels --------------------------------------------------------------------
async def test_enter_on_a_graph_node_is_followed_everywhere(demo_trace):
    """Enter in the graph selects its node: every panel marks it, F↔B moves to its op, the inspector shows it."""
    seen = []
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = await opened(app, pilot)
        graph = screen.query_one(GraphView)
        graph.focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        node = graph.node_at(graph.cursor)
        assert screen.selected_node == node
        assert [m.node for m in _unique(seen, NodeFollowed)][-1] == node
        assert all(view.selected_node == node for view in screen.query(LazyList))
        fwd = screen.query_one(ForwardBackwardView)
        assert fwd.node_at_row(fwd.cursor) == node
        inspector = screen.query_one(NodeInspector)
        assert inspector.node == node  # and its name spelled as every panel does:
        assert short_name(demo_trace.node(node).name) in inspector.lines[0].plain
        assert screen.layout_state.active_lower == "inspector"  # the wide layout brings the inspector up


async def test_enter_on_a_forward_op_selects_its_backward_node(demo_trace):
    """Enter on the F↔B panel's 4th op selects the 4th node made and puts the graph cursor on it."""
    made = sorted(range(demo_trace.num_nodes), key=lambda i: demo_trace.node(i).created_at)
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("4")  # the F↔B panel
        await pilot.press("down", "down", "down", "enter")
        await pilot.pause()
        assert screen.selected_node == made[3]
        graph = screen.query_one(GraphView)
        assert graph.node_at(graph.cursor) == made[3]
        assert screen.layout_state.active_lower == "fwd"  # selecting from F↔B keeps it on screen


async def test_inspect_running_node_shows_its_grads_in(demo_trace):
    """`i` at a NodeStarted step selects that node; the inspector lists the grads it started with."""
    start = next(e for e in demo_trace if isinstance(e, NodeStarted) and e.node_name == "CosBackward0")
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = start.step
        await pilot.pause()
        await pilot.press("i")
        await pilot.pause()
        assert screen.selected_node == start.node
        text = "\n".join(line.plain for line in screen.query_one(NodeInspector).lines)
        for i, grad in enumerate(start.inputs):
            assert f"in[{i}]  {tensor_text(grad)}" in text
        await pilot.press("escape")
        await pilot.pause()
        assert screen.selected_node is None


async def test_inspector_lists_hooks_that_ran(demo_trace):
    """At the end of the demo the inspector of the node whose hook ran lists that hook."""
    hook = next(e for e in demo_trace if isinstance(e, HookRan))
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = len(demo_trace) - 1
        screen.selected_node = hook.node
        await pilot.pause()
        text = "\n".join(line.plain for line in screen.query_one(NodeInspector).lines)
        assert f"{hook.hook_kind} hook {hook.hook_name} ran" in text


async def test_culprit_enter_shows_its_source_line(demo_trace):
    """Enter on a culprit shows the demo's source around that line, the line itself included."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = len(demo_trace) - 1
        await pilot.press("7")
        view = screen.query_one(CulpritsView)
        view.cursor = 0
        await pilot.press("enter")
        await pilot.pause()
        culprit = view.culprits[0]
        rendered = screen.query_one("#source").content
        code = getattr(rendered, "code", "")
        assert culprit.source in code.splitlines()[culprit.lineno - rendered.start_line]


# -- panels --------------------------------------------------------------------------------------------------
async def test_wide_layout_shows_upper_panels_and_one_lower(demo_trace):
    """At 120x40 the graph, queues and deps are on screen with one lower panel; digits switch the lower one."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        assert _displayed(screen) == {"graph", "queues", "deps", "fwd"}
        await pilot.press("8")
        await pilot.pause()
        assert _displayed(screen) == {"graph", "queues", "deps", "events"}
        assert screen.focused.id == "events"


async def test_narrow_layout_collapses_panels_into_tabs(demo_trace):
    """At 80x24 one panel fills the screen; every panel has a tab, and digits and the tab bar switch."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        assert _displayed(screen) == {"graph"}
        tabs = screen.query_one("#tabs")
        visible_tabs = [t.id for t in tabs.query("Tab") if not t.has_class("-hidden")]
        assert visible_tabs == [f"tab-{p.id}" for p in PANELS]
        await pilot.press("2")
        await pilot.pause()
        assert _displayed(screen) == {"queues"}
        await pilot.click("#tab-deps")
        await pilot.pause()
        assert _displayed(screen) == {"deps"}


async def test_resizing_moves_between_layouts_and_survives_60x20(demo_trace):
    """Shrinking 120x40 -> 80x24 -> 60x20 collapses to tabs and keeps working; growing back restores."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert len(_displayed(screen)) == 1
        await pilot.resize_terminal(60, 20)
        await pilot.press("n", "5", "l")
        await pilot.pause()
        assert _displayed(screen) == {"inspector"}
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert {"graph", "queues", "deps"} <= _displayed(screen)


async def test_hide_and_show_panels(demo_trace):
    """`x` hides the focused panel, its digit brings it back, `X` shows every panel again."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("2", "x")
        await pilot.pause()
        assert "queues" not in _displayed(screen)
        await pilot.press("3", "x")
        await pilot.pause()
        assert not {"queues", "deps"} & _displayed(screen)
        await pilot.press("2")
        await pilot.pause()
        assert "queues" in _displayed(screen) and "deps" not in _displayed(screen)
        await pilot.press("X")
        await pilot.pause()
        assert {"graph", "queues", "deps"} <= _displayed(screen)


def _screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_a_hidden_panel_catches_up_when_shown(demo_trace):
    """Panels off screen skip their repaints (NOTE [hidden panels]); shown again they show this step."""
    last = len(demo_trace) - 1
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("n", "enter")  # select the graph row under the cursor: the first node to run
        await pilot.pause()
        node = screen.selected_node
        await pilot.press("6")  # the pruning panel takes the lower place: events and inspector are off screen
        await pilot.pause()
        assert node is not None and not {"events", "inspector"} & _displayed(screen)
        await pilot.press("G", "h", "h")
        await pilot.pause()
        step = screen.step
        assert step == last - 2
        await pilot.press("8")
        await pilot.pause()
        lines = [line for line in _screen_lines(app) if f" {step}  " in line]
        assert any(type(demo_trace[step]).__name__ in line for line in lines), lines
        await pilot.press("5")
        await pilot.pause()
        text = "\n".join(_screen_lines(app))
        assert f"(node {node})" in text and f"events up to step {step}:" in text


async def test_zoom_toggles_the_focused_panel(demo_trace):
    """`z` maximises the focused panel (its box: title, headers and rows) and `z` again restores the layout."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("3", "z")
        await pilot.pause()
        assert screen.maximized is not None and screen.maximized.id == "panel-deps"
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is None


# -- palette and cancelling ----------------------------------------------------------------------------------
async def test_command_palette_offers_and_runs_every_action(demo_trace):
    """The palette lists each step-screen binding by its description (long form), and choosing one runs it."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        titles = {c.title for c in app.get_system_commands(screen)}
        assert {b.tooltip or b.description for b in StepScreen.BINDINGS if not b.action.startswith("app.")} <= titles
        end = next(b.tooltip or b.description for b in StepScreen.BINDINGS if b.action == "jump(-1)")
        await pilot.press("ctrl+p", *"End")
        # the palette searches in a worker: enter before a match is highlighted would choose nothing
        await wait_for(pilot, lambda: _palette_highlights(app, end), f"the palette never offered {end!r}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen and screen.step == len(demo_trace) - 1,
                       "choosing End in the palette did not move to the last step")


# Cancelling raises KeyboardInterrupt in the script's thread, again and again until the script ends: one can
# land in a destructor or a gc callback that happens to run there, where Python prints and drops it
# (app.py repeats the interrupt for that reason). pytest reports each dropped one; they are expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_escape_cancels_a_recording_and_keeps_what_it_recorded(tmp_path):
    """Escape while a never-ending script records stops it and opens the events recorded so far."""
    script = tmp_path / "forever.py"
    script.write_text("import agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\n"
                      "while True:\n    (x * 2).sum().backward()\n")
    app = AgdbApp(script=str(script))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await recording_began(app, pilot)
        await pilot.press("escape")
        assert len((await recorded(app, pilot)).trace) > 0
        assert any("recording cancelled" in n.message for n in app._notifications)


async def test_q_quits(demo_trace):
    """`q` on the step screen ends the app."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("q")
        await pilot.pause()
        assert app._exit


async def test_dependencies_panel_marks_counts_that_changed(demo_trace):
    """Stepping onto an event that lowers a count marks exactly the rows whose count moved."""
    from agdb.tracer.replay.replay import Replay

    replay = Replay(demo_trace)
    step = next(s for s in range(1, len(demo_trace))
                if any(replay.state_at(s).dependencies.get(n, c) != c
                       for n, c in replay.state_at(s - 1).dependencies.items()))
    before, after = replay.state_at(step - 1).dependencies, replay.state_at(step).dependencies
    expected = {n for n, c in after.items() if n in before and before[n] != c}
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = step - 1
        await pilot.pause()
        screen.step = step
        await pilot.pause()
        from agdb.widgets.dependencies import DependenciesView

        deps = screen.query_one(DependenciesView)
        marked = {deps.node_at_row(i) for i in range(deps.row_count()) if deps.is_changed(i)}
        assert marked == expected and expected


async def test_export_key_writes_the_graph_at_this_step(demo_trace, tmp_path):
    """`e` + a .dot path writes the graph at the current step, with the queue of that step, and announces it."""
    from agdb.app.screens.step import GraphExported
    from agdb.tracer.replay.replay import Replay

    step = next(e.step for e in demo_trace if isinstance(e, TaskPushed) and e.queue_length >= 2)
    queue = [t.name for t in Replay(demo_trace).state_at(step).ready_queues[0].tasks]
    out = tmp_path / "graph.dot"
    seen = []
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen = await opened(app, pilot)
        screen.step = step
        await pilot.pause()
        await pilot.press("e")
        screen.query_one("#prompt").value = str(out)
        await pilot.press("enter")
        await screen.workers.wait_for_complete()
        await pilot.pause()
        text = out.read_text()
        assert f"after step {step} of" in text and text.count(" -> ") > 0
        assert [f"{k + 1}. {n}" in text for k, n in enumerate(queue)] == [True] * len(queue)
        assert [m.path for m in _unique(seen, GraphExported)] == [str(out)]


async def test_export_to_an_unknown_format_is_reported(demo_trace, tmp_path):
    """Exporting to .jpg notifies an error naming the formats, and writes nothing."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("e")
        screen.query_one("#prompt").value = str(tmp_path / "graph.jpg")
        await pilot.press("enter")
        await screen.workers.wait_for_complete()
        await pilot.pause()
        assert any("unknown format" in n.message for n in app._notifications)
        assert not list(tmp_path.iterdir())


def _from_source(trace, source: str, provenance: dict[str, str]):
    """The same events, as if written by another source that declares what it observed."""
    from agdb.tracer.store.schema import DERIVED_COLUMNS
    from agdb.tracer.store.trace import Trace

    columns = {k: v for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}
    return Trace(columns, list(trace.strings), {"source": source, "provenance": provenance})


async def test_panels_say_when_the_source_lacks_or_reconstructs_their_events(demo_trace):
    """A torch trace without ready-queue events says so in the queues panel, instead of an empty list; panels
    whose events agdb reconstructed say so in their title; stepping still updates the other panels."""
    from agdb.tracer.store.schema import Kind

    lacking = (Kind.TASK_PUSHED, Kind.TASK_POPPED)
    provenance = {k.name.lower(): "observed" for k in Kind if k not in lacking}
    provenance["dependencies_computed"] = "reconstructed"
    trace = _from_source(demo_trace, "torch", provenance)
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        notice = screen.query_one("#queues")
        assert not isinstance(notice, LazyList)
        assert str(notice.render()) == "this trace's source (torch) does not record ready-queue events"
        titles = {p.id: screen.query_one(f"#panel-{p.id}").border_title for p in PANELS}
        assert titles["deps"] == "dependencies and input buffers · reconstructed by agdb's model"
        assert titles["pruning"].endswith("· reconstructed by agdb's model")
        assert titles["fwd"] == "forward ↔ backward"
        await pilot.press("l", "l")
        await pilot.pause()
        assert screen.step == 2 and screen.query_one(GraphView).cursor >= 0
