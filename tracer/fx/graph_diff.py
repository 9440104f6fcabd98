"""What changed in the metadata between two captures of one program's graphs (`agdb fx diff A B`).

Two captures of the same program (before and after a pass, a re-trace, a torch upgrade) should give the same
forward-to-backward map. `diff(a, b)` compares them graph by graph (graphs matched by id, nodes by name) and
reports, per node, a seq_nr lost or changed, a `partitioner_tag` or `is_gradient_acc` changed, and `custom`
annotations dropped or changed; per joint family, the map's edges (forward node -> backward node) gained or lost;
and nodes only one side has. Two patterns are named as what they are instead of node by node: a graph whose calls
all took one number (re-traced without `preserve_node_seq_nr`), and a graph whose numbers all moved by the same
amount (an extra autograd node made earlier in the run: the map is the same).

Imports the standard library and tracer/fx only.
"""
from __future__ import annotations

from dataclasses import dataclass

from agdb.tracer.fx.family_map import family_map, same_value
from agdb.tracer.fx.graph import Graph, Node
from agdb.tracer.fx.graph_set import GraphSet


@dataclass(frozen=True)
class Change:
    """One difference: its kind, the graph, the nodes (empty for a whole graph) and a sentence."""

    kind: str
    graph: str
    nodes: tuple[str, ...]
    message: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "graph": self.graph, "nodes": list(self.nodes), "message": self.message}


def diff(a: GraphSet, b: GraphSet) -> list[Change]:
    """Every change from `a` to `b` (the module docstring lists the kinds)."""
    out: list[Change] = []
    ids_b = {e.id for e in b}
    ids_a = {e.id for e in a}
    out += [Change("graph_removed", e.id, (), f"graph {e.id} is only in the first capture") for e in a
            if e.id not in ids_b]
    out += [Change("graph_added", e.id, (), f"graph {e.id} is only in the second capture") for e in b
            if e.id not in ids_a]
    for ea in a:
        if ea.id in ids_b:
            out += _graph_changes(ea.id, ea.graph, b.entry(ea.id).graph)
    for root in a.roots("joint"):
        if root.id in ids_b and b.entry(root.id).kind == "joint":
            out += _map_changes(root.id, a, b)
    return out


def _graph_changes(graph_id: str, ga: Graph, gb: Graph) -> list[Change]:
    out: list[Change] = []
    names_b = {n.name for n in gb.nodes}
    names_a = {n.name for n in ga.nodes}
    gone = [n.name for n in ga.nodes if n.name not in names_b]
    new = [n.name for n in gb.nodes if n.name not in names_a]
    if gone:
        out.append(Change("nodes_removed", graph_id, tuple(gone), f"{graph_id}: {_names(gone)} only in the first"))
    if new:
        out.append(Change("nodes_added", graph_id, tuple(new), f"{graph_id}: {_names(new)} only in the second"))
    pairs = [(n, gb.node(n.name)) for n in ga.nodes if n.name in names_b]
    seq_summary = _seq_pattern(graph_id, pairs)
    if seq_summary is not None:
        out.append(seq_summary)
    per_node: list[Change] = []
    for na, nb in pairs:
        if seq_summary is None:
            per_node += _seq_change(graph_id, na, nb)
        per_node += _meta_changes(graph_id, na, nb)
    return out + _grouped(graph_id, per_node)


_GROUP_AT = 4
"""A kind of change met on this many nodes of a graph or more is said once, with the nodes listed."""

_GROUP_TEXT = {"seq_nr_lost": "lost their seq_nr", "seq_nr_gained": "gained a seq_nr",
               "seq_nr_changed": "have another seq_nr", "tag_dropped": "lost a tag (partitioner_tag or "
               "is_gradient_acc)", "tag_changed": "have another tag", "annotation_dropped": "lost custom annotations",
               "annotation_changed": "have other custom annotations", "annotation_added": "gained custom annotations"}


def _grouped(graph_id: str, changes: list[Change]) -> list[Change]:
    by_kind: dict[str, list[Change]] = {}
    for c in changes:
        by_kind.setdefault(c.kind, []).append(c)
    out = []
    for kind, group in by_kind.items():
        if len(group) < _GROUP_AT:
            out += group
            continue
        names = [c.nodes[0] for c in group]
        out.append(Change(kind, graph_id, tuple(names), f"{graph_id}: {_names(names)} {_GROUP_TEXT[kind]}; the "
                          f"first: {group[0].message.split(': ', 1)[-1]}"))
    return out


def _seq_pattern(graph_id: str, pairs: list[tuple[Node, Node]]) -> Change | None:
    """A re-trace (every call now has one number) or a uniform shift, said once for the graph."""
    calls = [(na, nb) for na, nb in pairs if na.op == "call_function" and na.meta.get("seq_nr") is not None]
    if len(calls) < 2:
        return None
    before = {na.meta["seq_nr"] for na, _ in calls}
    after = {nb.meta.get("seq_nr") for _, nb in calls}
    names = tuple(na.name for na, _ in calls)
    if len(before) > 1 and len(after) == 1:
        (s,) = after
        if s is None:
            return Change("seq_nr_lost", graph_id, names, f"{graph_id}: no node has a seq_nr any more: the map is "
                          "gone (a pass or re-trace that does not copy meta)")
        return Change("retraced", graph_id, names, f"{graph_id}: every node now has seq_nr {s}: re-traced "
                      "without preserve_node_seq_nr, so every backward node maps to one forward node")
    deltas = {nb.meta.get("seq_nr") - na.meta["seq_nr"] for na, nb in calls if nb.meta.get("seq_nr") is not None}
    if len(deltas) == 1 and all(nb.meta.get("seq_nr") is not None for _, nb in calls):
        (d,) = deltas
        if d != 0:
            return Change("seq_nr_shifted_all", graph_id, names, f"{graph_id}: every seq_nr moved by {d:+d} (an "
                          "autograd node made earlier in the run, or another torch); the map is the same")
    return None


def _seq_change(graph_id: str, na: Node, nb: Node) -> list[Change]:
    sa, sb = na.meta.get("seq_nr"), nb.meta.get("seq_nr")
    if sa == sb:
        return []
    if sb is None:
        return [Change("seq_nr_lost", graph_id, (na.name,), f"{graph_id}: {na.name} lost its seq_nr {sa}")]
    if sa is None:
        return [Change("seq_nr_gained", graph_id, (na.name,), f"{graph_id}: {na.name} now has seq_nr {sb}")]
    return [Change("seq_nr_changed", graph_id, (na.name,), f"{graph_id}: {na.name} seq_nr {sa} -> {sb}")]


def _meta_changes(graph_id: str, na: Node, nb: Node) -> list[Change]:
    out = []
    for key in ("partitioner_tag", "is_gradient_acc"):
        va, vb = na.meta.get(key), nb.meta.get(key)
        if (va or None) != (vb or None):
            kind = "tag_dropped" if vb is None or vb is False else "tag_changed"
            out.append(Change(kind, graph_id, (na.name,), f"{graph_id}: {na.name} {key} {va!r} -> {vb!r}"))
    ca, cb = na.meta.get("custom") or {}, nb.meta.get("custom") or {}
    if isinstance(ca, dict) and isinstance(cb, dict):
        dropped = [k for k in ca if k not in cb]
        changed = [k for k in ca if k in cb and not same_value(ca[k], cb[k])]
        added = [k for k in cb if k not in ca]
        if dropped:
            out.append(Change("annotation_dropped", graph_id, (na.name,), f"{graph_id}: {na.name} lost "
                              + ", ".join(f"custom[{k!r}] = {ca[k]!r}" for k in dropped)))
        if changed:
            out.append(Change("annotation_changed", graph_id, (na.name,), f"{graph_id}: {na.name} "
                              + ", ".join(f"custom[{k!r}] {ca[k]!r} -> {cb[k]!r}" for k in changed)))
        if added:
            out.append(Change("annotation_added", graph_id, (na.name,), f"{graph_id}: {na.name} gained "
                              + ", ".join(f"custom[{k!r}] = {cb[k]!r}" for k in added)))
    return out


def _map_changes(root_id: str, a: GraphSet, b: GraphSet) -> list[Change]:
    ea, eb = _edges(root_id, a), _edges(root_id, b)
    out = []
    lost = [e for e in ea if e not in eb]
    gained = [e for e in eb if e not in ea]
    if lost:
        out.append(Change("map_edges_lost", root_id, tuple(f"{f}->{x}" for f, x in lost), f"the map of {root_id} "
                          f"lost {len(lost)} edge{'s' if len(lost) != 1 else ''}: " + _edges_text(lost)))
    if gained:
        out.append(Change("map_edges_gained", root_id, tuple(f"{f}->{x}" for f, x in gained), f"the map of "
                          f"{root_id} gained {len(gained)} edge{'s' if len(gained) != 1 else ''}: "
                          + _edges_text(gained)))
    return out


def _edges(root_id: str, found: GraphSet) -> list[tuple[str, str]]:
    members = [(e.id, e.graph) for e in found.family(root_id)]
    m = family_map(members)
    return [(_ref(fid, f.name, root_id), _ref(gid, name, root_id)) for (gid, name), (fid, f) in m.partner.items()]


def _ref(graph_id: str, name: str, root_id: str) -> str:
    return name if graph_id == root_id else f"{graph_id.rsplit('/', 1)[-1]}.{name}"


def _edges_text(edges: list[tuple[str, str]], shown: int = 8) -> str:
    text = ", ".join(f"{f} -> {x}" for f, x in edges[:shown])
    return text + (f", ... ({len(edges) - shown} more)" if len(edges) > shown else "")


def _names(names: list[str], shown: int = 8) -> str:
    text = ", ".join(names[:shown]) + (f", ... ({len(names) - shown} more)" if len(names) > shown else "")
    return f"{len(names)} node{'s' if len(names) != 1 else ''} ({text})"

