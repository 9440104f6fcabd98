"""An exported picture of the built-in example: a reused AccumulateGrad shows every execution index it ran at,
the legend keeps only the entries the picture uses, and the forward view names its leaves."""
from __future__ import annotations

import numpy as np
import pytest

from agdb.app.demo import record_example
from agdb.tracer.store.schema import Kind
from agdb.tracer.views.graph_model import graph_model
from agdb.tracer.views.json_render import to_json


@pytest.fixture(scope="module")
def demo():
    return record_example()


def _runs(trace) -> np.ndarray:
    """Per NodeStarted, in order, the node that started: its position is the execution index."""
    return np.asarray(trace.columns["ev_node"][trace.steps_of(Kind.NODE_STARTED)])


def _node_box(model_json, node):
    return next(b for b in model_json["boxes"] if b["kind"] == "node" and b["node"] == node)


def test_reused_accumulategrad_shows_every_execution_index(demo):
    """x's AccumulateGrad ran three times (three backward calls); its box lists all three indices (from the
    trace's NodeStarted order, counted independently here), and a node that ran once shows one."""
    runs = _runs(demo)
    counts = np.bincount(runs)
    reused = int(np.flatnonzero(counts == 3)[0])
    boxed = to_json(graph_model(demo, None, "backward"))
    label = " ".join(_node_box(boxed, reused)["label"])
    want = " · " + ", ".join(f"#{i}" for i in np.flatnonzero(runs == reused).tolist())
    assert want in label, label
    once = int(np.flatnonzero(counts == 1)[0])
    assert f"· #{int(np.flatnonzero(runs == once)[0])}" in " ".join(_node_box(boxed, once)["label"])


def test_reused_node_at_a_step_shows_the_runs_so_far(demo):
    """At a step between its second and third run, the reused AccumulateGrad lists the first two only."""
    runs = _runs(demo)
    reused = int(np.flatnonzero(np.bincount(runs) == 3)[0])
    starts = demo.steps_of(Kind.NODE_STARTED)
    first, second, third = (int(starts[i]) for i in np.flatnonzero(runs == reused))
    for step in range(second + 1, third):
        label = " ".join(_node_box(to_json(graph_model(demo, step, "backward")), reused)["label"])
        indices = np.flatnonzero(runs == reused).tolist()
        if f"#{indices[1]}" in label:
            assert f"#{indices[0]}, #{indices[1]}" in label and f"#{indices[2]}" not in label, label
            return
    pytest.fail("no step between the second and third run shows the reused node's indices")


def test_legend_keeps_only_the_entries_the_picture_uses(demo):
    """The legend has one box per state some box of the picture is in, plus accumulation when a box has a
    double border; a focused picture of a few nodes has a short legend."""
    for step, focus in ((None, None), (40, None), (None, 0)):
        boxed = to_json(graph_model(demo, step, "backward", focus, 1))
        shown = [b for b in boxed["boxes"] if b["kind"] in ("node", "chain", "repeat")]
        legend = [b for b in boxed["boxes"] if b["kind"] == "legend"]
        used = {b["state"] for b in shown}
        want = used | ({"accumulation"} if any(b["peripheries"] == 2 for b in shown) else set())
        assert {b["state"] if b["state"] else "accumulation" for b in legend} == want, (step, focus, legend)
        assert len(legend) < 13


def test_forward_view_names_its_leaves(demo):
    """In the forward view, each leaf's box says which leaf (x, w), not only `leaf`."""
    boxed = to_json(graph_model(demo, None, "forward"))
    leaves = [b for b in boxed["boxes"] if b["kind"] == "node" and b["label"][0].startswith("leaf")]
    assert leaves
    names = {b["label"][0] for b in leaves}
    assert {"leaf x", "leaf w"} <= names, names
