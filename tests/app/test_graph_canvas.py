"""The graph panel's drawn graph, driven by Pilot: the `v` toggle, the cursor walking boxes, following the
running node, and large traces laid out in a worker."""
from __future__ import annotations

import pytest

from agdb.app.app import AgdbApp
from agdb.app.screens.step import StepScreen
from agdb.tracer.store.events import NodeStarted
from agdb.widgets.graph_canvas import GraphCanvas
from tests import graph_programs


@pytest.fixture(scope="module")
def diamond():
    return graph_programs.diamond()


@pytest.fixture(scope="module")
def chain():
    """A 20-step loop, 63 nodes: small enough to draw unfolded, 126 lines tall."""
    return graph_programs.loop(20)


async def _graph(app, pilot) -> GraphCanvas:
    await pilot.pause()
    assert isinstance(app.screen, StepScreen)
    return app.screen.query_one("#graph", GraphCanvas)


def _panel_text(graph: GraphCanvas) -> str:
    return "\n".join(strip.text for strip in (graph.render_line(y) for y in range(graph.size.height)))


async def test_v_toggles_between_drawn_graph_and_list(diamond):
    """The panel starts drawn (boxes and arrows); `v` lists the nodes one a row, and `v` again draws them."""
    app = AgdbApp(trace=diamond)
    async with app.run_test(size=(120, 40)) as pilot:
        graph = await _graph(app, pilot)
        assert graph.drawn and graph.has_class("-drawn")
        drawn = _panel_text(graph)
        assert "[AddBackward0 s3]" in drawn and "▼" in drawn and "├" in drawn
        await pilot.press("v")
        await pilot.pause()
        assert not graph.drawn
        listed = _panel_text(graph)
        assert "[AddBackward0" not in listed and "▼" not in listed
        assert listed.splitlines()[0].split()[0] == "SumBackward0"  # newest first, as the list always was
        await pilot.press("v")
        await pilot.pause()
        assert graph.drawn and _panel_text(graph) == drawn


async def test_cursor_walks_the_boxes_in_reading_order(diamond):
    """`j` moves the cursor to the next box (line by line, left to right) and `k` back; Enter selects it."""
    app = AgdbApp(trace=diamond)
    async with app.run_test(size=(120, 40)) as pilot:
        graph = await _graph(app, pilot)
        lay = graph.picture
        names = [lay.labels[b] for b in lay.reading]
        assert lay.labels[lay.box_of(graph.node_at(graph.cursor))] == names[0]
        await pilot.press("j", "j", "j")
        await pilot.pause()
        assert lay.labels[lay.box_of(graph.node_at(graph.cursor))] == names[3] == "CosBackward0 s2"
        await pilot.press("k", "enter")
        await pilot.pause()
        assert app.screen.selected_node == graph.node_at(graph.cursor)
        assert lay.labels[lay.box_of(app.screen.selected_node)] == "SinBackward0 s1"


async def test_running_node_is_marked_and_followed(chain):
    """At each node run the cursor is on the running node's box, marked ▶, and its line is on screen: at the
    bottom of a tall picture for the last run, back at the top for the first."""
    starts = [e for e in chain if isinstance(e, NodeStarted)]
    app = AgdbApp(trace=chain)
    async with app.run_test(size=(80, 24)) as pilot:
        graph = await _graph(app, pilot)
        lay = graph.picture
        assert not lay.is_folded and lay.height > 100
        for event in (starts[-1], starts[len(starts) // 2], starts[0]):
            app.screen.step = event.step
            await pilot.pause()
            box = lay.box_of(event.node)
            assert graph.node_at(graph.cursor) == event.node
            assert graph.marks.get(box) == "▶"
            line = int(lay.box_y[box]) + 1  # under the header line
            top = graph.scroll_offset.y
            assert top <= line < top + graph.scrollable_content_region.height
            row = graph.render_line(line - top).text
            assert f"▶[{lay.labels[box]}]" in row


async def test_ready_queue_is_marked_in_pop_order(diamond):
    """The add pushes Sin and Cos; Cos (the higher seq_nr) pops first, so while it runs Sin waits in the ready
    queue, marked with its place (1 pops next)."""
    app = AgdbApp(trace=diamond)
    async with app.run_test(size=(120, 40)) as pilot:
        graph = await _graph(app, pilot)
        lay = graph.picture
        cos = next(e for e in diamond if isinstance(e, NodeStarted) and e.node_name == "CosBackward0")
        app.screen.step = cos.step
        await pilot.pause()
        boxes = {lay.labels[b]: b for b in range(lay.num_boxes)}
        assert graph.marks == {boxes["CosBackward0 s2"]: "▶", boxes["SinBackward0 s1"]: "1"}
        assert "1[SinBackward0 s1] ▶[CosBackward0 s2]" in _panel_text(graph)


async def test_large_trace_is_laid_out_in_a_worker(monkeypatch):
    """Above SYNC_NODES the panel says it is laying out, stepping does not start the worker (it waits for a
    pause), and once the worker is done the folded graph is drawn."""
    import agdb.widgets.graph_canvas as canvas

    monkeypatch.setattr(canvas, "SYNC_NODES", 100)
    monkeypatch.setattr(canvas, "IDLE_BEFORE_LAYOUT", 3600.0)  # the test starts the worker itself
    trace = graph_programs.loop(100)
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(120, 40)) as pilot:
        graph = await _graph(app, pilot)
        await pilot.press("l", "l")
        await pilot.pause()
        assert graph.picture is None and not graph._laying_out
        assert _panel_text(graph).startswith("laying out 303 nodes…")
        graph._lay_out()  # what the timer does when the user pauses
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert graph.picture is not None and graph.picture.is_folded
        text = _panel_text(graph)
        assert "303 nodes in 4 boxes" in text and "[× 100: Mul·Add·Tanh]" in text


async def test_graph_too_tangled_to_draw_falls_back_to_the_list(monkeypatch):
    """A layout that gives up (LayoutTooLarge) leaves the panel listing the nodes, says why, and `v` stays there."""
    import agdb.tracer.views.layout as graph_layout

    monkeypatch.setattr(graph_layout, "MAX_CELLS", 5)  # the diamond's edges cross more cells than that
    app = AgdbApp(trace=graph_programs.diamond())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        graph = await _graph(app, pilot)
        assert not graph.drawn and "more than 5 cells" in graph.cannot_draw
        assert _panel_text(graph).splitlines()[0].split()[0] == "SumBackward0"  # the list
        await pilot.press("v")
        await pilot.pause()
        assert not graph.drawn
        assert any("too large to draw" in n.message for n in app._notifications)
