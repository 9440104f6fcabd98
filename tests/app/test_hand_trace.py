"""A trace written by hand with TraceBuilder, with no engine in sight, goes through the whole tool: saved,
loaded, opened in the TUI and exported; the panels whose events its source cannot provide say so."""
from __future__ import annotations

import shutil

import pytest

from agdb.app.app import AgdbApp
from agdb.app.cli import main
from agdb.app.screens.step import StepScreen
from agdb.tracer import Kind
from agdb.tracer.store.tracefile import load, save
from agdb.widgets.graph_view import GraphView
from agdb.widgets.lazy_list import LazyList
from tests.tracer.test_trace_format import hand_trace

QUEUE_KINDS = (Kind.TASK_PUSHED, Kind.TASK_POPPED)


@pytest.fixture
def hand_file(tmp_path):
    """The hand trace of tests/tracer/test_trace_format.py from a source that cannot see the ready queues."""
    trace = hand_trace(source="my-tool", provenance={k: "observed" for k in Kind if k not in QUEUE_KINDS},
                       queues=False)
    path = tmp_path / "hand.agdb"
    save(trace, path)
    return path


async def test_the_tui_opens_a_hand_written_trace_and_says_what_its_source_lacks(hand_file):
    """Opened from the file: the queues panel says the source records no ready-queue events; the graph panel
    lists both nodes; stepping to the end runs every event through every panel without an error."""
    trace = load(hand_file)
    assert len(trace) == 11 and trace.source == "my-tool"
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StepScreen)
        queues = screen.query_one("#queues")
        assert not isinstance(queues, LazyList)
        assert str(queues.render()) == "this trace's source (my-tool) does not record ready-queue events"
        graph = screen.query_one(GraphView)
        await pilot.press("G")
        await pilot.pause()
        assert screen.step == len(trace) - 1
        rows = [graph.row_text(i).plain for i in range(graph.row_count())]
        assert len(rows) == 2 and any("MulBackward0" in r for r in rows) and any("AccumulateGrad" in r for r in rows)
        assert all("done" in r for r in rows), rows  # both ran: the graph's states come from node runs
        for key in "12345678":
            await pilot.press(key)
            await pilot.pause()
        assert not [n for n in app._notifications if n.severity == "error"]


def test_a_hand_written_trace_exports_to_dot(hand_file, tmp_path, capsys):
    """`agdb export` draws the hand trace: both boxes, the edge Mul -> AccumulateGrad with its input_nr 0."""
    out = tmp_path / "hand.dot"
    assert main(["export", str(hand_file), "-o", str(out)]) == 0
    text = out.read_text()
    assert "MulBackward0" in text and "AccumulateGrad" in text
    assert text.count("->") >= 1 and 'label="0"' in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_a_hand_written_trace_exports_to_svg(hand_file, tmp_path, capsys):
    """The same through Graphviz: an SVG that names both nodes."""
    out = tmp_path / "hand.svg"
    assert main(["export", str(hand_file), "-o", str(out)]) == 0
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "MulBackward0" in svg and "AccumulateGrad" in svg
