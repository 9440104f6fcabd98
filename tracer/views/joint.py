"""The joint view: a saved FX joint graph as a `GraphModel`, so DOT (and any renderer) draws it.

A box per FX node, labelled with its name, target, seq_nr, tags and `custom` annotations; the forward nodes in one
cluster and the backward nodes in another; an arrow from each argument node to its user. The subgraphs the joint
graph holds (a nested compile region's, under `info["subgraphs"]`) are clusters of their own, drawn inside the
cluster of the graph that holds them. Gradient-accumulation nodes have a double border; nodes the anomalies report
names are emphasized.

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


SUBGRAPHS = "subgraphs"
"""The key of a joint graph's `info` that lists the graphs nested in it: `[{"id", "parent", "name", "graph"}]`, each
graph as tracer.fx.graph.to_data's plain data, parents before their children (`with_joint(..., subgraphs=...)`)."""


def subgraphs_of(graph: Graph) -> list[tuple[str, str, str, Graph]]:
    """(id, parent id, name, graph) of each graph nested in a joint graph, parents first. Raises ViewError for a
    malformed list."""
    out = []
    for i, entry in enumerate(graph.info.get(SUBGRAPHS) or ()):
        try:
            out.append((str(entry["id"]), str(entry["parent"]), str(entry["name"]), from_data(entry["graph"])))
        except (ValueError, KeyError, TypeError) as e:
            raise ViewError(f"the joint graph's subgraph {i} cannot be read: {e}") from None
    return out


def node_label(n) -> str:
    """A box's text: name, target, seq_nr with the node's tags, and its custom annotations."""
    tags = []
    if "seq_nr" in n.meta:
        tags.append(f"seq_nr {n.meta['seq_nr']}")
    if n.meta.get("is_gradient_acc"):
        tags.append("grad acc")
    desc = n.meta.get("desc")
    lines = [n.name, n.target if n.op == "call_function" else n.op]
    if desc is not None and n.op == "placeholder":
        lines.append(desc.expr() if hasattr(desc, "expr") else str(desc.get("expr", "")) if isinstance(desc, dict)
                     else str(desc))
    if tags:
        lines.append(" · ".join(tags))
    custom = n.meta.get("custom")
    if isinstance(custom, dict) and custom:
        lines.append("custom " + ", ".join(f"{k}={v!r}" for k, v in custom.items()))
    return "\n".join(lines)


def joint_model(graph: Graph, title: str = "joint graph", flagged: frozenset[str] = frozenset()) -> GraphModel:
    """The model of `graph` and its subgraphs: boxes in graph order (the joint's, then each subgraph's), forward and
    backward clusters, a cluster per subgraph inside its parent's, data-flow arrows. `flagged` names nodes to
    emphasize (`name`, or `subgraph_id:name` for a subgraph's)."""
    family = [("", "", "", graph)] + subgraphs_of(graph)
    nodes = [(gid, x) for gid, _, _, g in family for x in g.nodes]
    n = len(nodes)
    row = {(gid, x.name): i for i, (gid, x) in enumerate(nodes)}
    labels = [node_label(x) for _, x in nodes]
    table = tuple(dict.fromkeys(labels))
    code = {t: i for i, t in enumerate(table)}
    peripheries = np.array([2 if x.meta.get("is_gradient_acc") else 1 for _, x in nodes], dtype=np.int8)
    emphasized = np.array([(f"{gid}:{x.name}" if gid else x.name) in flagged for gid, x in nodes], dtype=bool)
    block = NodeBlock("node", "fx", Ints(np.arange(n, dtype=np.int64)),
                      (Texts(np.array([code[t] for t in labels], dtype=np.int64), table),),
                      np.full(n, -1, dtype=np.int64), np.full(n, STATE_CODE["unreached"], dtype=np.int8),
                      peripheries, emphasized)
    tails, heads = [], []
    for gid, x in nodes:
        for a in x.all_input_nodes:
            tails.append(row[(gid, a.name)])
            heads.append(row[(gid, x.name)])
    arrows = EdgeBlock("next", np.array(tails, dtype=np.int64), np.array(heads, dtype=np.int64))
    clusters = []
    for tag, label in (("is_forward", "forward (partitioner_tag is_forward)"),
                       ("is_backward", "backward (partitioner_tag is_backward)")):
        members = np.array([i for i, (gid, x) in enumerate(nodes) if not gid and x.op == "call_function"
                            and x.meta.get("partitioner_tag") == tag], dtype=np.int64)
        if len(members):
            clusters.append(Cluster(tag.removeprefix("is_"), "queue", label, members))
    ids = {gid: f"sub{k}" for k, (gid, _, _, _) in enumerate(family) if gid}
    for gid, parent, name, _ in family[1:]:
        members = np.array([i for i, (g, _) in enumerate(nodes) if g == gid], dtype=np.int64)
        clusters.append(Cluster(ids[gid], "queue", f"subgraph {name}", members, ids.get(parent, "")))
    return GraphModel(GraphAttrs(title, "TB", n > 100), (block,), (arrows,), tuple(clusters))


def with_joint(trace, graph: Graph, subgraphs: list[tuple[str, str, str, Graph]] = ()):  # type: ignore[assignment]
    """A copy of `trace` that carries `graph` in its meta (saved with it, drawn by `--view joint`), with the graphs
    nested in it: (id, parent id, name, graph), parents first; a subgraph of the joint graph itself has parent ""."""
    from agdb.tracer.fx.graph import to_data
    from agdb.tracer.store.trace import Trace

    data = to_data(graph)
    if subgraphs:
        data["info"] = {**data["info"], SUBGRAPHS: [{"id": i, "parent": p, "name": n, "graph": to_data(g)}
                                                    for i, p, n, g in subgraphs]}
    return Trace(trace.columns, trace.strings, {**trace.meta, META_KEY: data})
