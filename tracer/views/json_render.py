"""The JSON form of a graph model, schema `agdb.graph/1`: what `agdb export -o FILE.json` writes.

A third renderer of the model DOT (views/dot.py) and the TUI's drawn graph (views/layout.py) draw, with nothing
laid out: a program draws it its own way. docs/trace-format.md documents the form:

    {"schema": "agdb.graph/1",
     "graph": {"title": str, "rankdir": "TB", "straight_edges": bool},
     "boxes": [{"id": "n12", "kind": "node" | "chain" | "repeat" | "task" | "legend",
                "label": [str, ...],        # the label's lines, as DOT draws them: `MulBackward0 seq 3`, `topo 2 · #0`
                "brief": str,               # the one line a terminal box shows: `MulBackward0 s3`
                "node": int | null,         # the trace node it stands for (a folded box: its first), null: none
                "nodes": [int, ...],        # every trace node it shows (a folded box: all of them)
                "state": str | null,        # tracer.replay.node_states.STATES at the step, null: none (a queue entry)
                "topological_nr": int | null,
                "peripheries": 1 | 2,       # 2: an accumulation point (the engine sums grads there)
                "emphasized": bool,         # the focus node of `--focus`
                "cluster": str | null}],    # the id of the cluster that holds it
     "arrows": [{"kind": "next" | "order" | "points_at", "from": box id, "to": box id, "label": str | null}],
     "clusters": [{"id": str, "kind": "set_apart" | "queue" | "legend", "label": str, "members": [box id, ...]}]}

Boxes come in the model's order (the graph's boxes first), arrows block by block, cluster members in the
cluster's order (a ready queue's first member pops first). New fields may be added within a version; a field
that changes meaning or goes bumps it. Imports numpy and the tracer only.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from agdb.tracer.replay.node_states import STATES
from agdb.tracer.views.model import GRAPH_KINDS, EdgeBlock, GraphModel, NodeBlock, label_texts

SCHEMA = "agdb.graph/1"
"""Bumped when a field changes meaning or disappears; new fields may be added within a version."""


def to_json(model: GraphModel) -> dict[str, Any]:
    """The `agdb.graph/1` object of `model`."""
    ids: list[str] = []
    for block in model.nodes:
        ids.extend(_ids(block))
    cluster_of = model.cluster_of_rows().tolist()
    members = _members(model)
    boxes: list[dict[str, Any]] = []
    for b, block in enumerate(model.nodes):
        start = int(model.starts[b])
        boxes.extend(_boxes(block, ids[start:start + len(block)], cluster_of[start:start + len(block)],
                            members[start:start + len(block)], model))
    a = model.attrs
    return {"schema": SCHEMA,
            "graph": {"title": a.title, "rankdir": a.rankdir, "straight_edges": a.has_straight_edges},
            "boxes": boxes,
            "arrows": [arrow for e in model.edges for arrow in _arrows(e, ids)],
            "clusters": [{"id": c.id, "kind": c.kind, "label": c.label, "members": [ids[r] for r in c.members.tolist()],
                          **({"parent": c.parent} if c.parent else {})} for c in model.clusters]}


def _ids(block: NodeBlock) -> list[str]:
    return [block.id_prefix + key for key in label_texts((block.id_key,), len(block))]


def _members(model: GraphModel) -> list[list[int]]:
    """Per model row, the trace nodes its box shows: for the graph's boxes the model's node_rows grouped (a folded
    box shows many), for any other box (a queue entry) and without node_rows the box's own node."""
    out: list[list[int]] = [[] for _ in range(model.num_rows)]
    mapped = model.node_rows is not None
    for b, block in enumerate(model.nodes):
        if mapped and block.kind in GRAPH_KINDS:
            continue
        for i, node in enumerate(block.node.tolist()):
            if node >= 0:
                out[int(model.starts[b]) + i].append(node)
    if mapped:
        shown = np.flatnonzero(model.node_rows >= 0)
        for node, row in zip(shown.tolist(), model.node_rows[shown].tolist(), strict=True):
            out[row].append(node)
    return out


def _boxes(block: NodeBlock, ids: list[str], clusters: list[int], members: list[list[int]],
           model: GraphModel) -> list[dict[str, Any]]:
    n = len(block)
    labels = label_texts(block.label, n)
    briefs = block.brief_texts()
    peripheries = block.peripheries.tolist() if block.peripheries is not None else [1] * n
    emphasized = block.is_emphasized.tolist() if block.is_emphasized is not None else [False] * n
    topo = block.topo.tolist() if block.topo is not None else [None] * n
    cluster_ids = [c.id for c in model.clusters]
    return [{"id": ids[i], "kind": block.kind, "label": labels[i].split("\n"), "brief": briefs[i],
             "node": node if node >= 0 else None, "nodes": members[i],
             "state": STATES[state] if state >= 0 else None, "topological_nr": topo[i],
             "peripheries": int(peripheries[i]), "emphasized": bool(emphasized[i]),
             "cluster": cluster_ids[clusters[i]] if clusters[i] >= 0 else None}
            for i, (node, state) in enumerate(zip(block.node.tolist(), block.state.tolist(), strict=True))]


def _arrows(edges: EdgeBlock, ids: list[str]) -> list[dict[str, Any]]:
    labels = label_texts(edges.label, len(edges)) if edges.label else [None] * len(edges)
    return [{"kind": edges.kind, "from": ids[t], "to": ids[h], "label": label}
            for t, h, label in zip(edges.tail.tolist(), edges.head.tolist(), labels, strict=True)]
