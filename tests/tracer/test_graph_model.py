"""tracer.views.graph_model: the plain model a view builds, checked on a graph small enough to derive by hand.

The graph: x.exp().sin().cos() * w, summed, backward. Its backward nodes are SumBackward0 -> MulBackward0 ->
{CosBackward0 -> SinBackward0 -> ExpBackward0 -> AccumulateGrad(x), AccumulateGrad(w)}: 7 nodes, 6 next edges.
"""
from __future__ import annotations

import pytest

from agdb.tracer.replay.node_states import STATES
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import short_name
from agdb.tracer.views.graph_model import LEGEND, backward_graph, forward_graph, graph_model
from agdb.tracer.views.model import ViewError


def boxes(model):
    """{id: (kind, label, state name or None)} over every block."""
    out = {}
    for b in model.nodes:
        for i in range(len(b)):
            out[b.id(i)] = (b.kind, b.label_text(i), STATES[b.state[i]] if b.state[i] >= 0 else None)
    return out


def arrows(model, kind="next"):
    ids = [b.id(i) for b in model.nodes for i in range(len(b))]
    return sorted((ids[t], ids[h]) for e in model.edges if e.kind == kind
                  for t, h in zip(e.tail.tolist(), e.head.tolist(), strict=True))


def test_backward_graph_after_the_trace(small):
    """Seven boxes, one per node, all done; six arrows along next edges; only the legend cluster."""
    t, idx = small
    m = backward_graph(t)
    assert m.num_boxes == 7 and m.num_arrows == 6
    b = boxes(m)
    graph = {k: v for k, v in b.items() if v[0] == "node"}
    assert set(graph) == {f"n{v}" for v in idx.values()}
    assert {state for _, _, state in graph.values()} == {"done"}
    n = {name: f"n{v}" for name, v in idx.items()}
    assert arrows(m) == sorted([(n["SumBackward0"], n["MulBackward0"]), (n["MulBackward0"], n["CosBackward0"]),
                                (n["MulBackward0"], n["Acc_w"]), (n["CosBackward0"], n["SinBackward0"]),
                                (n["SinBackward0"], n["ExpBackward0"]), (n["ExpBackward0"], n["Acc_x"])])
    assert [c.id for c in m.clusters] == ["legend"]
    assert not m.attrs.has_straight_edges and m.attrs.title == f"agdb: backward graph after all {len(t)} events"


def test_labels_hold_name_seq_topo_order_and_marks(small):
    """A label's lines: the name with its seq_nr (`MulBackward0 seq S`, an AccumulateGrad with its leaf's name),
    `topo T`, ` · #k` once it ran, and a leaf's accumulation mark; the brief is the box-width name."""
    t, idx = small
    model = backward_graph(t)
    b = boxes(model)
    mul = t.node(idx["MulBackward0"])
    lines = b[f"n{idx['MulBackward0']}"][1].split("\n")
    assert lines[:2] == [f"MulBackward0 seq {mul.seq_nr}", f"topo {mul.topological_nr} · #1"]  # Sum ran first
    assert b[f"n{idx['SumBackward0']}"][1].split("\n")[1].endswith(" · #0")
    acc = b[f"n{idx['Acc_x']}"][1].split("\n")
    assert acc[:2] == ["AccumulateGrad x", "topo 0 · #6"]  # after Acc_w (seq max pops first), Cos, Sin, Exp
    assert acc[-1] == "accumulates into .grad"
    block = next(x for x in model.nodes if x.kind == "node")
    briefs = dict(zip(block.node.tolist(), block.brief_texts(), strict=True))
    assert briefs[idx["MulBackward0"]] == f"MulBackward0 s{mul.seq_nr}" and briefs[idx["Acc_x"]] == "AccumulateGrad x"
    block = next(x for x in backward_graph(t).nodes if x.kind == "node")
    peripheries = dict(zip(block.node.tolist(), block.peripheries.tolist(), strict=True))
    assert peripheries[idx["Acc_x"]] == 2 and peripheries[idx["SinBackward0"]] == 1


def test_collapse_folds_the_four_node_chain(small):
    """Cos -> Sin -> Exp -> Acc_x (one user and one child each) folds into one chain box; Sum -> Mul is two
    nodes, below MIN_CHAIN, and stays: 4 boxes, 3 arrows."""
    t, idx = small
    m = backward_graph(t, collapse=True)
    b = boxes(m)
    chains = [v for v in b.values() if v[0] == "chain"]
    assert m.num_boxes == 4 and m.num_arrows == 3 and len(chains) == 1
    assert chains[0][1].split("\n")[0] == "4 nodes in a chain" and chains[0][2] == "done"
    assert {k for k, v in b.items() if v[0] == "node"} == {f"n{idx[k]}" for k in ("SumBackward0", "MulBackward0",
                                                                                    "Acc_w")}


def test_focus_radius_one(small):
    """Around CosBackward0 with radius 1: Mul, Cos and Sin, with the two arrows between them; Cos emphasized."""
    t, idx = small
    m = backward_graph(t, focus=idx["CosBackward0"], radius=1)
    assert m.num_boxes == 3 and m.num_arrows == 2
    block = m.nodes[0]
    assert block.is_emphasized.tolist() == (block.node == idx["CosBackward0"]).tolist()


def test_ready_queue_cluster_at_the_first_push(small):
    """At the first push of a node, a queue cluster holds one entry, which points at that node's box."""
    t, idx = small
    push = next(e for e in t if isinstance(e, ev.TaskPushed) and e.node is not None)
    m = backward_graph(t, step=push.step)
    queues = [c for c in m.clusters if c.kind == "queue"]
    assert len(queues) == 1 and len(queues[0].members) == 1
    block, i = m.block_of(int(queues[0].members[0]))
    assert block.kind == "task" and block.label_text(i).startswith(f"1. {short_name(t.node(push.node).name)}\n")
    assert arrows(m, "points_at") == [(block.id(i), f"n{push.node}")]
    assert boxes(m)[f"n{push.node}"][2] == "ready"


def test_forward_graph_reverses_arrows(small):
    """The forward view's arrows run from an op's input to the op, its boxes name the forward op."""
    t, idx = small
    m = forward_graph(t)
    assert (f"n{idx['ExpBackward0']}", f"n{idx['SinBackward0']}") in arrows(m)
    assert boxes(m)[f"n{idx['MulBackward0']}"][1].split("\n")[0] == "mul"


def test_legend_and_errors():
    """The legend has a box per state and one for accumulation; impossible views raise ViewError."""
    assert len(LEGEND) == len(STATES) + 1 and LEGEND.id(0) == f"legend_{STATES[0]}"
    with pytest.raises(ViewError, match="holds no joint graph"):
        graph_model(None, view="joint")
