"""Pilot tests of issue 16's first session: nothing drawn wrong, orientation (footer, headers, legend, keys as
typed, the status line), and navigation (Home/End, the mouse, search, the selection mark, Escape, zoom, quit)."""
from __future__ import annotations

import textwrap

import pytest
from rich.console import Console

from agdb.app.app import AgdbApp
from agdb.app.screens.help import HelpScreen
from agdb.app.screens.panels import PANELS
from agdb.tracer.replay.node_states import STATE_CODE, node_states
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import short_name
from agdb.widgets.lazy_list import LazyList
from agdb.widgets.timeline import Timeline
from tests.app.pilot import opened, recorded, recording_began, wait_for


def _plain(renderable) -> str:
    """A renderable as plain text, 100 columns wide."""
    console = Console(width=100, color_system=None)
    with console.capture() as out:
        console.print(renderable)
    return out.get()


def _screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _panel_lines(app, widget) -> list[str]:
    """What the terminal shows inside `widget`'s box (scrollbar column left out)."""
    r = widget.content_region
    lines = _screen_lines(app)
    return [lines[y][r.x:r.x + r.width - 1].rstrip() for y in range(r.y, r.y + r.height)]


def _rows(widget) -> list[str]:
    """What the widget says its rows on screen are, as the terminal would show them."""
    r = widget.content_region
    top = widget.scroll_offset.y
    out = []
    for i in range(top, top + r.height):
        if i < widget.row_count():
            selected = widget.selected_node is not None and widget.node_at_row(i) == widget.selected_node
            mark = (widget.SELECTED_MARK if selected else " ") if getattr(widget, "GUTTER", 0) else ""
            out.append((mark + widget.row_text(i).plain)[:r.width - 1].rstrip())
        else:
            out.append("")
    return out


# -- 1. nothing drawn wrong -----------------------------------------------------------------------------------
async def test_dependencies_panel_never_shows_a_row_that_is_gone(demo_trace):
    """At every step the dependencies panel shows exactly its rows: a node whose count left is not drawn."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        deps = screen.query_one("#deps", LazyList)
        wrong = []
        for step in range(len(demo_trace)):
            screen.step = step
            await pilot.pause()
            if _panel_lines(app, deps) != _rows(deps):
                wrong.append(step)
        assert wrong == []


async def test_forward_backward_flags_come_before_the_source(demo_trace):
    """Flags (GraphRoot: the engine's seq_nr; a hook's ops: made in backward) have their own column, before
    the line, so a long line cannot push them off the panel."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        fwd = screen.query_one("#fwd", LazyList)
        for name, flag in (("GraphRoot", "engine's"), ("MulBackward0", "in backward")):
            node = next(n for n in reversed(range(demo_trace.num_nodes)) if demo_trace.node_name(n) == name)
            fwd.cursor = fwd.row_of_node(node)
            await pilot.pause()
            info = demo_trace.node(node)
            line = next(x for x in _panel_lines(app, fwd) if f"→ {name}" in x and f"{info.lineno}: " in x)
            assert flag in line and line.index(flag) < line.index(f"{info.lineno}: {info.source[:10]}"), line


_RAISES = textwrap.dedent("""\
    from agdb import engine as torch


    def refuse(grad):
        raise ValueError("the hook refuses this grad")


    x = torch.ones(3, requires_grad=True)
    y = (x * 2).sin()
    y.register_hook(refuse)
    y.sum().backward()
    """)


async def test_a_node_whose_backward_raised_is_raised_selected_and_its_error_kept(tmp_path):
    """The node that raised is `raised` (not done) and selected; the toast shows only the script's frames and
    stays until dismissed."""
    script = tmp_path / "raises.py"
    script.write_text(_RAISES)
    app = AgdbApp(script=str(script))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await recorded(app, pilot)
        trace = screen.trace
        raised = next(e.node for e in trace if isinstance(e, ev.ErrorRaised))
        assert short_name(trace.node_name(raised)) == "SinBackward0"  # the hook sits on y's grad_fn
        codes, _ = node_states(trace, Replay(trace).state_at(len(trace) - 1))
        assert codes[raised] == STATE_CODE["raised"]
        assert screen.selected_node == raised
        (note,) = [n for n in app._notifications if "did not finish" in n.title]
        assert "refuse" in note.message and "the hook refuses this grad" in note.message
        assert "_engine.py" not in note.message and "engine/" not in note.message, note.message
        assert "frame(s) of agdb left out" in note.message
        assert note.timeout >= 3600


async def test_hiding_panels_leaves_no_empty_box(demo_trace):
    """After `x`, the panels still shown fill the whole area: none is left as an empty cell of the grid."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        panels = screen.query_one("#panels")
        for keys in (["2", "x"], ["3", "x"], ["1", "x"], ["X", "6", "x"], ["X", "4", "x", "5", "x", "6", "x", "7", "x"],
                     ["8", "x"]):
            await pilot.press(*keys)
            await pilot.pause()
            shown = [w for w in panels.children if w.display]
            area = sum(w.outer_size.width * w.outer_size.height for w in shown)
            assert area == panels.size.width * panels.size.height, (keys, [w.id for w in shown])


def test_node_states_tell_not_created_from_to_push_and_keep_pruning(demo_trace):
    """Before its NodeCreated a node is not_created; between its count reaching 0 (the parent's NodeFinished)
    and its TaskPushed it is to_push; a node pruned by a graph task stays pruned after the task ends."""
    replay = Replay(demo_trace)
    made: dict[int, int] = {}  # node -> the first event naming it (its seq_nr bump comes just before its NodeCreated)
    for e in demo_trace:
        if isinstance(e, (ev.SeqNrBumped, ev.NodeCreated)):
            made.setdefault(e.node, e.step)
    last = max(made.values())
    for step in (0, 5, last - 1):
        codes, _ = node_states(demo_trace, replay.state_at(step))
        assert sorted(n for n, s in made.items() if s > step) == \
            [n for n in range(demo_trace.num_nodes) if codes[n] == STATE_CODE["not_created"]]
    # The second push of the trace is the first whose node has a parent (the first pushes the root): its parent's
    # NodeFinished routed the last grad to it, so from then until the push its count is 0 and it is to_push.
    push = [e for e in demo_trace if isinstance(e, ev.TaskPushed)][1]
    before = max(e.step for e in demo_trace if isinstance(e, ev.NodeFinished) and e.step < push.step)
    assert push.node is not None and made[push.node] < before
    codes, _ = node_states(demo_trace, replay.state_at(before))
    assert codes[push.node] == STATE_CODE["to_push"], demo_trace.node_name(push.node)
    codes, _ = node_states(demo_trace, replay.state_at(push.step))
    assert codes[push.node] == STATE_CODE["ready"]
    deps = next(e for e in demo_trace if isinstance(e, ev.DependenciesComputed) and e.pruned)
    end = next(e.step for e in demo_trace if isinstance(e, ev.GraphTaskFinished) and e.graph_task == deps.graph_task)
    codes, _ = node_states(demo_trace, replay.state_at(end))
    assert replay.state_at(end).graph_tasks == () or all(gt.graph_task != deps.graph_task
                                                         for gt in replay.state_at(end).graph_tasks)
    assert [int(codes[n]) for n in deps.pruned] == [STATE_CODE["pruned"]] * len(deps.pruned)


# -- 2. orientation -------------------------------------------------------------------------------------------
async def test_footer_shows_keys_as_typed(demo_trace):
    """A footer of key hints is on screen, with keys as typed (`/`, `:`, `?`), and the status line says the step."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        last = _screen_lines(app)[-1]
        for hint in ("/ Search", ": Go to", "? Help", "q Quit", "→ Next"):
            assert hint in last, last
        assert "step 0/" in _screen_lines(app)[-2]


async def test_every_list_panel_has_column_headers(demo_trace):
    """Each list panel has a header line above its rows; the graph's first column is the execution index `#`."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        for panel in PANELS:
            if panel.id in ("inspector", "pruning"):
                continue  # sentences, not columns
            box = screen.query_one(f"#panel-{panel.id}")
            headers = box.query(".panel--header")
            assert len(headers) == 1, panel.id
        graph = screen.query_one("#panel-graph .panel--header")
        assert str(graph.render()).split()[:2] == ["#", "node"]


async def test_help_shows_keys_as_typed_brackets_and_the_legend(demo_trace):
    """Help writes `:`, `/`, `]`, `?` (not colon, slash...), keeps `push [NAME]`, and has a legend of states."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(_plain(w.content) for w in app.screen.query("Static"))
        keys = {line.split()[0] for line in text.splitlines() if line.strip()}
        assert {":", "/", "]", "?", "←,"} <= keys
        for name in ("colon", "slash", "right_square_bracket", "question_mark"):
            assert name not in text
        assert "push [NAME]" in text
        for state in ("not created", "to push", "raised", "pruned", "running"):
            assert f"\n{state} " in text
        commands = {c.title: c.help for c in app.get_system_commands(app.screen_stack[-2])}
        assert commands["Go to step"] == "key: :" and commands["Next search match"] == "key: ]"


async def test_status_line_is_a_sentence(demo_trace):
    """The status line says what happened, in words: `ExpBackward0 took seq_nr 0 (counter 0 → 1) at line 44`."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        bump = demo_trace[0]
        assert isinstance(bump, ev.SeqNrBumped)
        expected = f"{bump.node_name} took seq_nr {bump.old} (counter {bump.old} → {bump.seq_nr}) at line {bump.lineno}"
        assert screen.query_one(Timeline).text == f"step 0/{len(demo_trace) - 1} · {expected}"
        push = next(e for e in demo_trace if isinstance(e, ev.TaskPushed))
        screen.step = push.step
        await pilot.pause()
        assert "pushed to ready queue" in screen.query_one(Timeline).text
        assert "TaskPushed" not in screen.query_one(Timeline).text


async def test_one_spelling_and_repeated_names_told_apart(demo_trace):
    """No panel writes `torch::autograd::` or `2**64-1`; the dependencies panel tells same-named nodes apart."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await opened(app, pilot)
        acc = next(n for n in range(demo_trace.num_nodes) if short_name(demo_trace.node_name(n)) == "AccumulateGrad")
        screen.selected_node = acc
        await pilot.press("5")  # the node inspector, on the AccumulateGrad
        deps_rows = 0
        for step in range(0, len(demo_trace), 7):
            screen.step = step
            await pilot.pause()
            text = "\n".join(_screen_lines(app))
            assert "torch::autograd::" not in text and "2**64-1" not in text
            assert "seq_nr max" in text  # the inspector's line about the AccumulateGrad
            deps = screen.query_one("#deps", LazyList)
            names = [deps.row_text(i).plain.split("  ")[0].strip() for i in range(deps.row_count())
                     if deps.node_at_row(i) is not None]
            deps_rows += len(names)
            assert len(names) == len(set(names)), names
        assert deps_rows


# -- 5. navigation and exits ----------------------------------------------------------------------------------
async def test_home_and_end_move_the_cursor_in_every_panel(demo_trace):
    """In each list panel, End goes to its last row and Home back to its first (not the trace's ends)."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("G")  # the last step: every panel has rows
        await pilot.pause()
        step = screen.step
        for panel in PANELS:
            await pilot.press(panel.key)
            await pilot.pause()
            widget = screen.query_one(f"#{panel.id}", LazyList)
            await pilot.press("end")
            await pilot.pause()
            assert widget.cursor == widget.row_count() - 1, panel.id
            await pilot.press("home")
            await pilot.pause()
            assert widget.cursor == 0, panel.id
        assert screen.step == step


async def test_click_moves_the_cursor_and_double_click_selects(demo_trace):
    """A click on a row of the graph panel's list (`v`) puts the cursor there; a double-click selects its node."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        graph = screen.query_one("#graph", LazyList)
        await pilot.press("v")
        await pilot.pause()
        await pilot.click(graph, offset=(5, 3))
        await pilot.pause()
        assert graph.cursor == 3 and screen.selected_node is None
        await pilot.double_click(graph, offset=(5, 4))
        await pilot.pause()
        assert graph.cursor == 4 and screen.selected_node == graph.node_at_row(4)


async def test_search_matches_words_and_prefixes_only(demo_trace):
    """`/Mul` finds the MulBackward0 nodes and no AccumulateGrad (whose name holds `mul` inside a word)."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("slash", *"Mul", "enter")
        await pilot.pause()
        found = {short_name(demo_trace.node_name(int(n))) for n in screen.matches}
        assert found == {"MulBackward0"}
        await pilot.press("slash", *"grad", "enter")
        await pilot.pause()
        assert {short_name(demo_trace.node_name(int(n))) for n in screen.matches} == {"AccumulateGrad"}


async def test_the_selected_row_has_a_mark(demo_trace):
    """The selected node's rows start with ▶ in every panel that shows it, and no other row does."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("n", "enter")
        await pilot.pause()
        node = screen.selected_node
        graph = screen.query_one("#graph", LazyList)
        lines = _panel_lines(app, graph)
        marked = [x for x in lines if x.startswith(LazyList.SELECTED_MARK)]
        assert len(marked) == 1 and short_name(demo_trace.node_name(node)) in marked[0]


async def test_escape_closes_the_source_view(demo_trace):
    """Enter on a culprit opens its source under the list; Escape closes it and the culprits list keeps focus."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("G", "7", "enter")
        await pilot.pause()
        source = screen.query_one("#source")
        assert source.display and source.region.height > 0
        await pilot.press("escape")
        await pilot.pause()
        assert not source.display and screen.focused is screen.query_one("#culprits")


async def test_zoom_keeps_the_step_and_keys_on_screen(demo_trace):
    """A zoomed panel fills the screen but the status line (step) and the footer stay."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("l", "l", "z")
        await pilot.pause()
        assert screen.maximized is not None
        lines = _screen_lines(app)
        assert any(line.startswith("step 2/") for line in lines), lines[-3:]
        assert "? Help" in lines[-1]


# Quitting raises KeyboardInterrupt in the script's thread (see test_tui_actions: it may be reported as
# unraisable where Python drops it).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("key", ["q", "ctrl+q", "ctrl+c"])
async def test_quit_keys_stop_a_recording_at_once(tmp_path, key):
    """q, ctrl+q and ctrl+c during a never-ending recording quit the app (no "do you want to quit?")."""
    script = tmp_path / "forever.py"
    script.write_text("import agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\n"
                      "while True:\n    (x * 2).sum().backward()\n")
    app = AgdbApp(script=str(script))
    async with app.run_test(size=(100, 30)) as pilot:
        await recording_began(app, pilot)
        await pilot.press(key)
        # leaving run_test would end the app anyway: wait until the key itself has ended it
        await wait_for(pilot, lambda: app.return_code is not None, f"{key} did not quit")
    assert app.return_code == 0 and app._exit_renderables == []
    assert not app._script_worker.is_alive()  # stopped, not left running behind the exit


async def test_unzoom_keeps_the_cursor_row_in_view(demo_trace):
    """Zoom, move the cursor far down, unzoom: the smaller panel scrolls so the cursor's row is still shown."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("8", "z")  # the event log, zoomed
        await pilot.pause()
        log = screen.query_one("#events", LazyList)
        await pilot.press("end")  # the last of the trace's 193 events: far below what the unzoomed panel shows
        await pilot.pause()
        await pilot.press("z")
        await pilot.pause()
        top, height = log.scroll_offset.y, log.scrollable_content_region.height
        assert screen.maximized is None and top <= log.cursor < top + height


async def test_pruning_panel_recalls_the_last_pruning(demo_trace):
    """Once the graph task that pruned has finished, the pruning panel still lists what it pruned, and why."""
    deps = next(e for e in demo_trace if isinstance(e, ev.DependenciesComputed) and e.pruned)
    end = next(e.step for e in demo_trace if isinstance(e, ev.GraphTaskFinished) and e.graph_task == deps.graph_task)
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("6")
        screen.step = end
        await pilot.pause()
        pruning = screen.query_one("#pruning", LazyList)
        rows = [pruning.row_text(i).plain for i in range(pruning.row_count())]
        assert not screen.state.graph_tasks and rows[0] == "no graph task is running"
        assert f"graph task {deps.graph_task} (finished at step {end})" in rows[1]
        listed = [pruning.node_at_row(i) for i in range(pruning.row_count()) if rows[i].strip().startswith("pruned")]
        assert listed == list(deps.pruned)
        assert all(f"< min {deps.min_topo_nr}" in r for r in rows if r.strip().startswith("pruned"))
