"""The terminal layout of the backward graph's model (tracer/views/layout.py) against pictures derived by hand."""
from __future__ import annotations

import numpy as np
import pytest

from agdb.tracer.views.folding import no_folding
from agdb.tracer.views.layout import DOWN, LEFT, RIGHT, UP, cell_char, drawn_model, text_lines
from agdb.tracer.views.layout import layout as lay_out
from tests import graph_programs


@pytest.fixture(scope="module")
def diamond():
    return graph_programs.diamond()


def layout(trace, folding=None):
    """The layout of the model the TUI draws for `trace`."""
    return lay_out(drawn_model(trace, folding))


def _boxes(lay) -> dict[str, int]:
    return {label: b for b, label in enumerate(lay.labels)}


def test_diamond_layers_are_topological_nr(diamond):
    """Each box's layer is its node's topological_nr: the leaf 0, Exp 1, Sin and Cos 2, Add 3, Sum 4."""
    lay = layout(diamond)
    b = _boxes(lay)
    layers = {name: int(lay.box_layer[b[name]]) for name in b}
    assert layers == {"AccumulateGrad x": 0, "ExpBackward0 s0": 1, "SinBackward0 s1": 2, "CosBackward0 s2": 2,
                      "AddBackward0 s3": 3, "SumBackward0 s4": 4}
    topo = diamond.columns["node_topo"]
    assert [int(topo[n]) for n in lay.box_node] == lay.box_layer.tolist()


def test_diamond_picture(diamond):
    """Hand-derived: boxes centred under their parents' mean centre, packed 2 cells apart; Sin and Cos's
    fans overlap at Exp's column, so they take two tracks; arrows end every edge; the leaf is named by its
    variable, x."""
    assert text_lines(layout(diamond)) == [
        " [SumBackward0 s4]",
        "         ▼",
        " [AddBackward0 s3]",
        "         ├──────────────────┐",
        "         ▼                  ▼",
        " [SinBackward0 s1]  [CosBackward0 s2]",
        "         └────────┐         │",
        "                  ├─────────┘",
        "                  ▼",
        "          [ExpBackward0 s0]",
        "                  ▼",
        "         [AccumulateGrad x]",
    ]


def test_diamond_edge_routes(diamond):
    """Each edge's corners, (column, line): from under the parent's centre, along its track, down to the child."""
    lay = layout(diamond)
    b = _boxes(lay)
    routes = {(lay.labels[p], lay.labels[c]): corners for p, c, corners in lay.paths}
    assert routes == {
        ("SumBackward0 s4", "AddBackward0 s3"): ((9, 1), (9, 2)),
        ("AddBackward0 s3", "SinBackward0 s1"): ((9, 3), (9, 5)),
        ("AddBackward0 s3", "CosBackward0 s2"): ((9, 3), (28, 3), (28, 5)),
        ("SinBackward0 s1", "ExpBackward0 s0"): ((9, 6), (18, 6), (18, 9)),
        ("CosBackward0 s2", "ExpBackward0 s0"): ((28, 6), (28, 7), (18, 7), (18, 9)),
        ("ExpBackward0 s0", "AccumulateGrad x"): ((18, 10), (18, 11)),
    }
    assert (int(lay.box_x[b["CosBackward0 s2"]]), int(lay.box_y[b["CosBackward0 s2"]])) == (20, 5)
    assert lay.center(b["ExpBackward0 s0"]) == 18


def test_edge_that_skips_a_layer_passes_a_dummy():
    """MulBackward0 (topo 2) -> AccumulateGrad (topo 0) runs down beside ExpBackward0 (topo 1), then joins the
    edge from ExpBackward0 above the leaf."""
    lay = layout(graph_programs.skip())
    routes = {(lay.labels[p], lay.labels[c]): corners for p, c, corners in lay.paths}
    assert routes[("MulBackward0 s1", "AccumulateGrad x")] == ((9, 3), (19, 3), (19, 7), (14, 7), (14, 9))
    assert text_lines(lay)[5] == " [ExpBackward0 s0] │"  # the dummy, one cell after Exp (no mark needs room)


def test_loop_folds_into_a_repeat():
    """A 100-step loop (303 nodes) folds as `agdb export --collapse` does: the sum, one `× 100` box holding
    the loop's nodes, and the two shared leaves (w and x) on the bottom layer."""
    trace = graph_programs.loop(100)
    lay = layout(trace)
    assert lay.is_folded and trace.num_nodes == 303
    assert sorted(lay.labels) == ["AccumulateGrad w", "AccumulateGrad x", "SumBackward0 s300",
                                  "× 100: Mul·Add·Tanh"]
    b = _boxes(lay)
    assert int(lay.box_layer[b["SumBackward0 s300"]]) == 2 and int(lay.box_layer[b["× 100: Mul·Add·Tanh"]]) == 1
    assert sorted(lay.box_layer.tolist()) == [0, 0, 1, 2]
    repeat = b["× 100: Mul·Add·Tanh"]
    assert len(lay.folding.group(repeat)) == 300  # every node of the loop, in one box
    assert all(lay.box_of(n) == repeat for n in lay.folding.group(repeat).tolist())


def test_small_graph_can_be_left_unfolded():
    """An explicit one-box-per-node folding of the loop draws every node, still layered by topological_nr."""
    trace = graph_programs.loop(3)
    lay = layout(trace, no_folding(np.arange(trace.num_nodes), trace.num_nodes))
    assert lay.num_boxes == trace.num_nodes and not lay.is_folded
    assert lay.box_layer.tolist() == np.unique(trace.columns["node_topo"], return_inverse=True)[1].tolist()


def test_cells_draw_the_matching_box_character():
    """A cell's mask of directions draws the box-drawing character that joins them."""
    assert cell_char(UP | DOWN) == "│" and cell_char(UP | RIGHT) == "└" and cell_char(DOWN | LEFT) == "┐"
    assert cell_char(UP | DOWN | RIGHT) == "├" and cell_char(LEFT | RIGHT) == "─"
    assert cell_char(UP | DOWN | LEFT | RIGHT) == "┼"


def test_reading_order_is_by_line_then_column(diamond):
    """The cursor walks the boxes top to bottom, left to right."""
    lay = layout(diamond)
    assert [lay.labels[b] for b in lay.reading] == [
        "SumBackward0 s4", "AddBackward0 s3", "SinBackward0 s1", "CosBackward0 s2", "ExpBackward0 s0",
        "AccumulateGrad x"]


def test_too_tangled_a_graph_is_refused_quickly(diamond, monkeypatch):
    """Past MAX_CELLS cells of edges (or MAX_DUMMIES rows of long edges) the layout raises LayoutTooLarge,
    whose message says how large the graph is."""
    import agdb.tracer.views.layout as graph_layout

    monkeypatch.setattr(graph_layout, "MAX_CELLS", 10)
    with pytest.raises(graph_layout.LayoutTooLarge, match="6 boxes whose edges cross more than 10 cells"):
        layout(diamond)
    monkeypatch.setattr(graph_layout, "MAX_DUMMIES", 0)
    with pytest.raises(graph_layout.LayoutTooLarge, match="pass 1 rows"):
        layout(graph_programs.skip())
