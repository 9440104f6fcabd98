"""The drawn graph under the mouse, a zoom and a resize: a double-click selects the box under the pointer, and
a zoom or a new terminal size redraws the picture at the new width at once, with every panel's headers kept."""
from __future__ import annotations

import pytest

from agdb.app.app import AgdbApp
from agdb.widgets.graph_canvas import HEADER_LINES, GraphCanvas
from tests import graph_programs
from tests.app.pilot import opened


@pytest.fixture(scope="module")
def diamond():
    return graph_programs.diamond()


def _panel_lines(graph: GraphCanvas) -> list[str]:
    return [graph.render_line(y).text for y in range(graph.size.height)]


async def test_double_click_selects_the_box_under_the_pointer(demo_trace):
    """A double-click on a box's label selects that box's node (not the list row at the same height), for
    every box on screen."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        graph = screen.query_one("#graph", GraphCanvas)
        lay = graph.picture
        region = graph.scrollable_content_region
        tried = 0
        for b in lay.reading.tolist():
            x = int(lay.box_x[b]) + 1 - graph.scroll_offset.x
            y = int(lay.box_y[b]) + HEADER_LINES - graph.scroll_offset.y
            if not (0 <= x < region.width and 0 <= y < region.height):
                continue
            await pilot.click(graph, offset=(x + graph.gutter.left, y + graph.gutter.top), times=2)
            await pilot.pause()
            assert screen.selected_node is not None
            assert lay.box_of(screen.selected_node) == b, (lay.labels[b], lay.labels[lay.box_of(screen.selected_node)])
            tried += 1
        assert tried >= 5


async def test_click_between_boxes_keeps_the_cursor(diamond):
    """A click on an edge or blank cell of the drawing moves nothing and selects nothing."""
    app = AgdbApp(trace=diamond)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        graph = screen.query_one("#graph", GraphCanvas)
        cursor = graph.cursor
        lay = graph.picture
        blank_y = int(lay.box_y[lay.reading[0]]) + HEADER_LINES + 1  # the line under the first box: edges only
        await pilot.click(graph, offset=(graph.gutter.left + lay.width + 2, graph.gutter.top + blank_y), times=2)
        await pilot.pause()
        assert graph.cursor == cursor and screen.selected_node is None


async def test_zoom_redraws_the_graph_at_the_new_width_at_once(demo_trace):
    """After `z` on the graph panel (with no further key), the drawing fills the zoomed width: the boxes that
    were cut at the old right edge are whole; `z` again gives the old picture back."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        graph = screen.query_one("#graph", GraphCanvas)
        graph.focus()
        await pilot.pause()
        narrow = graph.size.width
        before = _panel_lines(graph)
        assert not any("[SumBackward0 s12]" in line for line in before)  # cut at the panel's right edge
        await pilot.press("z")
        await pilot.pause()
        await pilot.pause()
        assert graph.size.width > narrow
        lines = _screen_lines(app)
        assert any("[SumBackward0 s12]" in line for line in lines), "\n".join(lines)
        await pilot.press("z")
        await pilot.pause()
        await pilot.pause()
        assert _panel_lines(graph) == before


async def test_resize_redraws_the_graph_at_once(demo_trace):
    """A terminal grown from 80 to 120 columns shows the drawing at the new width without another key."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.resize_terminal(160, 40)
        await pilot.pause()
        await pilot.pause()
        lines = _screen_lines(app)
        assert any("[SumBackward0 s12]" in line and "[SumBackward0 s7]" in line for line in lines), "\n".join(lines)


def _screen_lines(app) -> list[str]:
    """What the terminal shows now, line by line (the compositor's lines, cached where nothing asked for a
    repaint, so a stale panel reads stale)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]



@pytest.mark.parametrize(("key", "panel"), [("4", "fwd"), ("7", "culprits"), ("9", "joint")])
async def test_zoom_keeps_the_panel_title_and_headers(key, panel):
    """A zoomed F↔B, Culprits or Joint panel keeps its title and its column headers on screen."""
    from tests.app.test_joint_panel import joint_trace

    app = AgdbApp(trace=joint_trace(), title="joint")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press(key)
        await pilot.pause()
        title = screen.query_one(f"#panel-{panel}").border_title
        header = screen.panel_widgets[panel].header().split()
        await pilot.press("z")
        await pilot.pause()
        await pilot.pause()
        assert screen.maximized is not None
        lines = _screen_lines(app)
        assert any(f"─ {title} ─" in line for line in lines), "\n".join(lines)
        assert any(all(word in line for word in header) for line in lines), "\n".join(lines)
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is None


async def test_joint_header_is_whole_at_120_columns():
    """At 120×40 the Joint panel's column header is on screen whole, in the tab below the graph as zoomed."""
    from tests.app.test_joint_panel import joint_trace

    app = AgdbApp(trace=joint_trace(), title="joint")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("9")
        await pilot.pause()
        header = " ".join(screen.panel_widgets["joint"].header().replace("│", " ").split())
        for zoom in ((), ("z",)):
            await pilot.press(*zoom)
            await pilot.pause()
            lines = [" ".join(line.replace("│", " ").split()) for line in _screen_lines(app)]
            assert any(header in line for line in lines), "\n".join(lines)


async def test_zoom_right_after_a_panel_key_zooms_that_panel(demo_trace):
    """`2`, `1`, `z` typed at once at 80×24 (one panel at a time) zoom the graph panel just shown, not the
    queues panel that had the focus a moment before and is now hidden (an empty, hatched screen)."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        await pilot.press("2")
        await pilot.pause()
        screen.action_show_panel("graph")  # `1` and `z` in one read of the terminal: no pause between them
        screen.action_zoom()
        await pilot.pause()
        assert screen.maximized is not None and screen.maximized.id == "panel-graph"
        assert screen.maximized.display
