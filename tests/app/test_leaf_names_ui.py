"""Issue 16 item 2's last part: every place that lists an AccumulateGrad names it by its leaf (tests/snapshots/
leaf_names.py: an MLP's parameters, `b`, `w` in layer1 and in layer2, and one unnamed leaf, the eighth)."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from agdb.app.app import AgdbApp
from agdb.app.screens.step import StepScreen
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import short_name
from agdb.tracer.store.tracefile import save
from tests.app.show_text import table
from tests.app.test_cli import agdb

SCRIPT = Path(__file__).resolve().parents[1] / "snapshots" / "leaf_names.py"
NAMES = ["model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias", "w (layer1)", "w (layer2)", "b",
         "leaf 8"]
"""Each AccumulateGrad's label, in the order the script made them (by hand from its source)."""


@pytest.fixture(scope="module")
def trace():
    from agdb.app.run_script import run_recorded

    box = {}
    thread = threading.Thread(target=lambda: box.update(run=run_recorded(str(SCRIPT), [])), name="script")
    thread.start()
    thread.join()
    return box["run"].trace


def _accumulates(trace) -> list[int]:
    nodes = np.flatnonzero(trace.nodes_named(lambda s: short_name(s) == "AccumulateGrad"))
    return sorted(nodes.tolist(), key=lambda n: int(trace.created_steps()[n]))


def _screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def test_the_script_gives_the_names_written_by_hand(trace):
    """The recorded names, read in the order the AccumulateGrads were made."""
    labels = trace.index.leaf_labels
    assert [labels[n] for n in _accumulates(trace)] == NAMES


async def test_the_graph_list_queue_and_inspector_name_each_leaf(trace):
    """The graph panel's list view, the ready queue (when an AccumulateGrad waits there) and the node inspector
    say `AccumulateGrad <name>`."""
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StepScreen)
        await pilot.press("1", "v", "z")  # the graph as a list, zoomed: every node on screen
        await pilot.pause()
        text = _screen_text(app)
        for name in NAMES:
            assert f"AccumulateGrad {name}" in text, name
        await pilot.press("z")
        acc = set(_accumulates(trace))
        pushed = next(e for e in trace if isinstance(e, ev.TaskPushed) and e.node in acc)
        screen.step = pushed.step
        await pilot.press("2")
        await pilot.pause()
        assert f"AccumulateGrad {trace.index.leaf_labels[pushed.node]}" in _screen_text(app)
        screen.selected_node = _accumulates(trace)[4]
        await pilot.press("5")
        await pilot.pause()
        assert "AccumulateGrad w (layer1)" in _screen_text(app)


def test_show_and_export_name_each_leaf(trace, tmp_path, capsys, monkeypatch):
    """`agdb show` names AccumulateGrads by their leaves in its lists, and `agdb export` in the DOT boxes."""
    path = tmp_path / "leaves.agdb"
    save(trace, path)
    step = next(e.step for e in trace if isinstance(e, ev.DependenciesComputed))
    code, out, err = agdb(["show", str(path), "--step", step, "--all"], capsys, monkeypatch)
    assert code == 0, err
    deps = [row[0] for row in table(out, "dependencies and input buffers:")]
    for name in NAMES:
        assert f"AccumulateGrad {name}" in deps, name
    code, out, err = agdb(["show", str(path), "--all"], capsys, monkeypatch)
    assert code == 0, err
    assert "→ AccumulateGrad model.fc1.weight" in " ".join(out.split())
    dot = tmp_path / "leaves.dot"
    code, out, err = agdb(["export", str(path), "-o", str(dot)], capsys, monkeypatch)
    assert code == 0, err
    text = dot.read_text()
    for name in NAMES:
        assert f'label="AccumulateGrad {name}\\n' in text, name


def test_search_finds_a_leaf_by_its_name(trace):
    """`/fc1` finds model.fc1.weight's and model.fc1.bias's AccumulateGrads, `/layer2` the `w` of layer2, `/weight` both
    weights; `mul` still finds only the MulBackward0 nodes (word starts, never a piece of a word)."""
    from agdb.tracer.replay.search import find_nodes

    labels = trace.index.leaf_labels

    def found(query: str) -> list[str]:
        return [labels.get(n, short_name(trace.node_name(n))) for n in find_nodes(trace, query).tolist()]

    assert found("fc1") == ["model.fc1.weight", "model.fc1.bias"]
    assert found("fc1.weight") == found("model.fc1.weight") == ["model.fc1.weight"]  # a query may span words
    assert found("c1") == [] and found("1.weight") == []
    assert found("layer2") == ["w (layer2)"]
    assert found("weight") == ["model.fc1.weight", "model.fc2.weight"]
    assert set(found("mul")) == {"MulBackward0"}
