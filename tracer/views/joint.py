"""The joint view: a saved FX joint graph as a `GraphModel`, so DOT (and any renderer) draws it.

A box per FX node, labelled with its name, target, seq_nr and tags; the forward nodes in one cluster and the
backward nodes in another; an arrow from each argument node to its user. Gradient-accumulation nodes have a
double border; nodes the anomalies report names are emphasized.

Imports numpy, the FX graph model (tracer/fx/graph.py: plain data, no engine) and the stages below views.
"""
from __future__ import annotations

import numpy as np

from agdb.tracer.fx.graph import Graph, from_data
from agdb.tracer.replay.node_states import STATE_CODE
from agdb.tracer.views.model import Cluster, EdgeBlock, GraphAttrs, GraphModel, Ints, NodeBlock, Texts, ViewError

META_KEY = "fx_joint"
"""The key of a trace's `meta` that holds its joint graph (tracer.fx.graph.to_data's plain data)."""


def joint_of_trace(trace) -> Graph:
    """The joint graph a trace carries. Raises ViewError when it has none."""
    data = getattr(trace, "meta", {}).get(META_KEY)
    if data is None:
        raise ViewError("this trace holds no joint graph: record one with `agdb fx SCRIPT -o FILE.agdb` "
                        "(docs/fx.md), or draw --view backward or --view forward")
    try:
        return from_data(data)
    except (ValueError, KeyError, TypeError) as e:
        raise ViewError(f"the trace's joint graph cannot be read: {e}") from None


def node_label(n) -> str:
    """A box's text: name, target, and seq_nr with the node's tags."""
    tags = []
    if "seq_nr" in n.meta:
        tags.append(f"seq_nr {n.meta['seq_nr']}")
    if n.meta.get("is_gradient_acc"):
        tags.append("grad acc")
    desc = n.meta.get("desc")
    lines = [n.name, n.target if n.op == "call_function" else n.op]
    if desc is not None and n.op == "placeholder":
        lines.append(desc.expr())
    if tags:
        lines.append(" · ".join(tags))
    return "\n".join(lines)


def joint_model(graph: Graph, title: str = "joint graph", flagged: frozenset[str] = frozenset()) -> GraphModel:
    """The model of `graph`: boxes in graph order, forward and backward clusters, data-flow arrows."""
    nodes = graph.nodes
    n = len(nodes)
    row = {node: i for i, node in enumerate(nodes)}
    labels = [node_label(x) for x in nodes]
    table = tuple(dict.fromkeys(labels))
    code = {t: i for i, t in enumerate(table)}
    peripheries = np.array([2 if x.meta.get("is_gradient_acc") else 1 for x in nodes], dtype=np.int8)
    emphasized = np.array([x.name in flagged for x in nodes], dtype=bool)
    block = NodeBlock("node", "fx", Ints(np.arange(n, dtype=np.int64)),
                      (Texts(np.array([code[t] for t in labels], dtype=np.int64), table),),
                      np.full(n, -1, dtype=np.int64), np.full(n, STATE_CODE["unreached"], dtype=np.int8),
                      peripheries, emphasized)
    tails, heads = [], []
    for x in nodes:
        for a in x.all_input_nodes:
            tails.append(row[a])
            heads.append(row[x])
    arrows = EdgeBlock("next", np.array(tails, dtype=np.int64), np.array(heads, dtype=np.int64))
    clusters = []
    for tag, label in (("is_forward", "forward (partitioner_tag is_forward)"),
                       ("is_backward", "backward (partitioner_tag is_backward)")):
        members = np.array([i for i, x in enumerate(nodes) if x.op == "call_function"
                            and x.meta.get("partitioner_tag") == tag], dtype=np.int64)
        if len(members):
            clusters.append(Cluster(tag.removeprefix("is_"), "queue", label, members))
    return GraphModel(GraphAttrs(title, "TB", n > 100), (block,), (arrows,), tuple(clusters))


def with_joint(trace, graph: Graph):
    """A copy of `trace` that carries `graph` in its meta (saved with it, drawn by `--view joint`)."""
    from agdb.tracer.fx.graph import to_data
    from agdb.tracer.store.trace import Trace

    return Trace(trace.columns, trace.strings, {**trace.meta, META_KEY: to_data(graph)})
