"""tracer/views/json_render.py: the `agdb.graph/1` JSON of a graph model, and the three renderers of one model.

Checked on the `small` trace (x.exp().sin().cos() * w, summed: Sum -> Mul -> {Cos -> Sin -> Exp -> Acc_x, Acc_w})
against its node table, and against DOT and the terminal layout of the same model.
"""
from __future__ import annotations

import json
import re

from agdb.tracer.replay.replay import Replay
from agdb.tracer.views.dot import render as dot_text
from agdb.tracer.views.graph_model import backward_graph, graph_model
from agdb.tracer.views.json_render import SCHEMA, to_json
from agdb.tracer.views.layout import drawn_model, layout
from tests import graph_programs


def test_every_node_is_a_box_and_every_next_edge_an_arrow(small):
    """After the trace: a box n{v} per node, done, showing that node alone, its label's first line its name
    (`MulBackward0 seq S`, `AccumulateGrad x`) and its brief the box-width name; an arrow per next edge,
    labelled input_nr; only the legend cluster; and the object survives a JSON round trip."""
    t, idx = small
    data = json.loads(json.dumps(to_json(backward_graph(t))))
    assert data["schema"] == SCHEMA == "agdb.graph/1"
    nodes = {b["id"]: b for b in data["boxes"] if b["kind"] == "node"}
    assert set(nodes) == {f"n{v}" for v in range(t.num_nodes)}
    mul = t.node(idx["MulBackward0"])
    box = nodes[f"n{idx['MulBackward0']}"]
    assert box["label"][0] == f"MulBackward0 seq {mul.seq_nr}" and box["brief"] == f"MulBackward0 s{mul.seq_nr}"
    assert (box["node"], box["nodes"], box["state"], box["topological_nr"]) == \
        (idx["MulBackward0"], [idx["MulBackward0"]], "done", mul.topological_nr)
    acc = nodes[f"n{idx['Acc_x']}"]
    assert acc["label"][0] == acc["brief"] == "AccumulateGrad x" and acc["peripheries"] == 2
    expected = sorted((f"n{p}", f"n{c}", str(nr)) for p in range(t.num_nodes)
                      for c, nr in t.node(p).next_edges if c is not None)
    assert sorted((a["from"], a["to"], a["label"]) for a in data["arrows"] if a["kind"] == "next") == expected
    assert [c["id"] for c in data["clusters"]] == ["legend"]
    assert all(b["cluster"] == "legend" for b in data["boxes"] if b["kind"] == "legend")


def test_a_step_with_a_queue_has_its_cluster_in_pop_order(small):
    """At the step Mul's two children are queued, the queue cluster lists its entries in pop order, each pointing
    at its node's box, and the boxes carry their states."""
    t, idx = small
    replay = Replay(t)
    step = next(s for s in range(len(t)) if sum(len(q.tasks) for q in replay.state_at(s).ready_queues) == 2)
    state = replay.state_at(step)
    data = to_json(graph_model(t, step, state=state))
    (queue,) = [c for c in data["clusters"] if c["kind"] == "queue"]
    boxes = {b["id"]: b for b in data["boxes"]}
    assert [boxes[m]["node"] for m in queue["members"]] == [task.node for task in state.ready_queues[0].tasks]
    assert [boxes[m]["nodes"] for m in queue["members"]] == [[task.node] for task in state.ready_queues[0].tasks]
    points = {a["from"]: a["to"] for a in data["arrows"] if a["kind"] == "points_at"}
    assert [points[m] for m in queue["members"]] == [f"n{task.node}" for task in state.ready_queues[0].tasks]
    assert {boxes[f"n{task.node}"]["state"] for task in state.ready_queues[0].tasks} == {"ready"}


def test_a_folded_box_lists_every_node_it_holds():
    """A 100-step loop folded (303 nodes): the `× 100` box shows the loop's 300 nodes, each shown once in all."""
    trace = graph_programs.loop(100)
    data = to_json(graph_model(trace, collapse=True))
    (repeat,) = [b for b in data["boxes"] if b["kind"] == "repeat"]
    assert len(repeat["nodes"]) == 300 and repeat["brief"] == "× 100: Mul·Add·Tanh"
    shown = [n for b in data["boxes"] for n in b["nodes"]]
    assert sorted(shown) == list(range(trace.num_nodes))


def _dot_boxes(text: str) -> dict[str, list[str]]:
    return {m.group(1): m.group(2).split("\\n") for m in re.finditer(r'^\s+(\w+) \[label="([^"]*)"', text, re.M)}


def test_dot_json_and_the_drawn_graph_render_one_model():
    """The model the TUI draws: DOT writes each box's label as JSON has it, and the terminal layout draws each
    box's brief, with an arrow between the same boxes as JSON's next arrows."""
    trace = graph_programs.diamond()
    model = drawn_model(trace)
    data = to_json(model)
    boxes = [b for b in data["boxes"] if b["kind"] in ("node", "chain", "repeat")]
    dot = _dot_boxes(dot_text(model))
    assert {b["id"]: b["label"] for b in boxes} == {k: v for k, v in dot.items() if k in {b["id"] for b in boxes}}
    lay = layout(model)
    assert list(lay.labels) == [b["brief"] for b in boxes]
    assert sorted(lay.labels) == sorted(["SumBackward0 s4", "AddBackward0 s3", "SinBackward0 s1", "CosBackward0 s2",
                                         "ExpBackward0 s0", "AccumulateGrad x"])  # by hand: seq_nrs in order made
    ids = [b["id"] for b in boxes]
    drawn = sorted((ids[p], ids[c]) for p, c, _ in lay.paths)
    assert drawn == sorted({(a["from"], a["to"]) for a in data["arrows"] if a["kind"] == "next"})
