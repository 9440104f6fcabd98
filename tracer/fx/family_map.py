"""The forward-to-backward map of a joint graph and its nested subgraphs, and its anomalies, as torch 2.13 walks them.

torch's `copy_fwd_metadata_to_bw_nodes` (torch/_functorch/_aot_autograd/utils.py) builds one map for a joint
GraphModule and every GraphModule under it (`fx_g.modules()`: the graph, then its submodules depth first): a node
whose `partitioner_tag` is not `is_backward` and that has a `seq_nr` is a forward node, whatever its op (a
placeholder or a get_attr counts), and the first such node of each seq_nr, in that walk, wins. Every node tagged
`is_backward` with a `seq_nr`, except gradient-accumulation nodes, then gets `fwd_nn_module_stack`,
`fwd_source_fn_stack` and the forward node's `custom` merged over its own (forward keys win). This module uses
exactly those rules, so its map is the one torch used, and its anomalies say where that map fails the user:

- `no_forward`: a backward node whose seq_nr no forward node has (its annotations and module path are lost);
- `annotation`: a backward node lacking a key of its forward partner's `custom`, or holding another value for it
  (torch's copy would have set it: something after the copy dropped or changed it, a pass, a re-trace);
- `retraced`: every call of a graph, or of the whole family, has one seq_nr, forward calls and backward calls
  alike, as a re-trace without `preserve_node_seq_nr` leaves them (NOTE [telling a re-trace]);
- `untagged`: a call with a seq_nr and no `partitioner_tag` in a graph whose other nodes have one: torch's rule counts
  it as a forward node, so it maps to nothing and gets no annotation (torch 2.13 leaves a custom Function's backward
  ops so under torch.compile);
- `shared_seq_nr`: forward calls sharing a number (only the first maps; `getitem` and AOT's `detach` are left out);
- `minus_one`: a node numbered -1 (made before any autograd node on its thread, as Dynamo's proxies are);
- `gradient_acc`: gradient sums (and tensor-hook ops torch labels like them), which map to no forward node.

Imports the standard library and tracer/fx only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from agdb.tracer.fx.graph import Graph, Node

Member = tuple[str, Graph]
"""A graph of the family and its id, in torch's walk order (the root first)."""


@dataclass(frozen=True)
class FamilyAnomaly:
    """One place where the map breaks: its kind, the graph it is in, the nodes, and a sentence for the user."""

    kind: str
    graph: str
    nodes: tuple[str, ...]
    message: str
    seq_nr: int | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "graph": self.graph, "nodes": list(self.nodes), "message": self.message,
                "seq_nr": self.seq_nr}


def is_forward(n: Node) -> bool:
    """torch's `_is_forward_node_with_seq_nr`."""
    return n.meta.get("partitioner_tag") != "is_backward" and n.meta.get("seq_nr") is not None


def is_backward(n: Node) -> bool:
    """torch's `_is_backward_node_with_seq_nr`."""
    return n.meta.get("partitioner_tag") == "is_backward" and n.meta.get("seq_nr") is not None


@dataclass(frozen=True)
class FamilyMap:
    """seq_nr -> (graph id, forward node), and each backward node's partner (keyed by graph id and node name)."""

    forward_of_seq: dict[int, tuple[str, Node]]
    partner: dict[tuple[str, str], tuple[str, Node]]


def family_map(members: Sequence[Member]) -> FamilyMap:
    fwd: dict[int, tuple[str, Node]] = {}
    for graph_id, g in members:
        for n in g.nodes:
            if is_forward(n):
                fwd.setdefault(n.meta["seq_nr"], (graph_id, n))
    partner: dict[tuple[str, str], tuple[str, Node]] = {}
    for graph_id, g in members:
        for n in g.nodes:
            if is_backward(n) and not n.meta.get("is_gradient_acc") and n.meta["seq_nr"] in fwd:
                partner[(graph_id, n.name)] = fwd[n.meta["seq_nr"]]
    return FamilyMap(fwd, partner)


def family_anomalies(members: Sequence[Member]) -> list[FamilyAnomaly]:
    """Every anomaly of the family's map (the module docstring lists the kinds), graph by graph in walk order."""
    m = family_map(members)
    out: list[FamilyAnomaly] = []
    whole = _retraced([n for _, g in members for n in g.nodes])
    for graph_id, g in members:
        retraced = _retraced(g.nodes) if whole is None else whole
        if retraced is not None and any(n.op == "call_function" for n in g.nodes):
            out.append(FamilyAnomaly("retraced", graph_id, tuple(n.name for n in g.nodes if n.op == "call_function"),
                                     f"every call in {graph_id} has seq_nr {retraced}: re-traced without "
                                     "preserve_node_seq_nr, so no backward node maps to its forward node", retraced))
            continue
        out.extend(_node_anomalies(graph_id, g, m))
        untagged = _untagged(g)
        out.extend(FamilyAnomaly("untagged", graph_id, (n.name,), f"{n.name} in {graph_id} has seq_nr "
                                 f"{n.meta['seq_nr']} and no partitioner_tag, where the graph's other nodes have one: "
                                 "torch's map counts it as a forward node, so no annotation reaches it",
                                 n.meta["seq_nr"]) for n in untagged)
        out.extend(_shared(graph_id, g, set(untagged)))
    return out


def _untagged(g: Graph) -> list[Node]:
    if not any(n.meta.get("partitioner_tag") for n in g.nodes):
        return []  # a graph torch never tags (Dynamo's own region graphs)
    return [n for n in g.nodes if n.op == "call_function" and n.meta.get("seq_nr") is not None
            and n.meta.get("partitioner_tag") is None]


def _retraced(nodes: Sequence[Node]) -> int | None:
    """The one seq_nr of every call among `nodes`, when they look re-traced (NOTE [telling a re-trace]); else None.

    NOTE [telling a re-trace]
    A re-trace under preserve_node_meta but without preserve_node_seq_nr (`make_fx(Interpreter(gm).run)` in a
    joint pass) gives every node the autograd counter's value at that moment. One number on every call is not
    enough to say so: `x.sin()` alone makes a joint of sin, cos and mul that truly share sin's number. What a
    correct graph does not have is two forward calls (not getitem, AOT's detach, an alias) on one number, with
    backward calls on it too, and nothing else: that is the re-trace. (A forward call on tensors needing no
    gradient makes no autograd node and repeats the latest number, so a graph of one differentiable op and such a
    call would be reported too.) The test runs on one graph (a joint) and on a whole family at once, since the
    partitioner puts a re-traced joint's forward calls and backward calls in two graphs, each one-sided alone."""
    calls = [n for n in nodes if n.op == "call_function" and n.target != "getitem"]
    numbers = {n.meta.get("seq_nr") for n in calls}
    if len(numbers) != 1 or None in numbers:
        return None
    forward = [n for n in calls if n.meta.get("partitioner_tag") != "is_backward" and n.target not in _NO_NODE]
    if len(forward) >= 2 and any(n.meta.get("partitioner_tag") == "is_backward" for n in calls):
        return numbers.pop()
    return None


def _node_anomalies(graph_id: str, g: Graph, m: FamilyMap) -> list[FamilyAnomaly]:
    out = []
    for n in g.nodes:
        s = n.meta.get("seq_nr")
        if s is None:
            continue
        if s == -1 and n.op == "call_function":
            out.append(FamilyAnomaly("minus_one", graph_id, (n.name,), f"{n.name} in {graph_id} has seq_nr -1: it "
                                     "was made before any autograd node on its thread (as Dynamo's proxies are)", s))
        if not is_backward(n):
            continue
        if n.meta.get("is_gradient_acc"):
            if n.op == "call_function":
                out.append(FamilyAnomaly("gradient_acc", graph_id, (n.name,), f"{n.name} in {graph_id}: a gradient "
                                         f"sum (or an op a tensor hook ran); seq_nr {s} relates it to no forward node",
                                         s))
            continue
        found = m.partner.get((graph_id, n.name))
        if found is None:
            out.append(FamilyAnomaly("no_forward", graph_id, (n.name,), f"backward node {n.name} in {graph_id} has "
                                     f"seq_nr {s}, which no forward node has: its annotations and module path are "
                                     "not copied to it", s))
            continue
        lost, wanted = _custom_lost(found[1], n)
        if lost:
            out.append(FamilyAnomaly("annotation", graph_id, (n.name, found[1].name),
                                     f"backward node {n.name} in {graph_id} {' and '.join(lost)}, where its forward "
                                     f"node {found[1].name} (in {found[0]}, seq_nr {s}) has {wanted!r}: the copy "
                                     "torch makes of a forward node's annotations was dropped or changed", s))
    return out


def _custom_lost(fwd: Node, bwd: Node) -> tuple[list[str], dict]:
    """How the backward node's `custom` falls short of its forward node's (`lacks custom['k']`, `has custom['k'] =
    v`), and the forward's values of those keys; nothing when it carries every forward key with its value."""
    want = fwd.meta.get("custom") or {}
    have = bwd.meta.get("custom") or {}
    if not isinstance(want, dict) or not isinstance(have, dict):
        return [], {}
    keys = [k for k in want if k not in have or not same_value(have[k], want[k])]
    return ([f"lacks custom[{k!r}]" if k not in have else f"has custom[{k!r}] = {have[k]!r}" for k in keys],
            {k: want[k] for k in keys})


def same_value(a: Any, b: Any) -> bool:
    """Two meta values equal, a list and a tuple of the same items included (plain data turns tuples into lists)."""
    return a == b or (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and list(a) == list(b))


_NO_NODE = ("getitem", "aten.detach.default", "aten.alias.default")
"""Calls that never make an autograd node of their own (AOT adds the detaches of saved activations)."""


def _shared(graph_id: str, g: Graph, untagged: set[Node]) -> list[FamilyAnomaly]:
    by_seq: dict[int, list[Node]] = {}
    for n in g.nodes:
        if n.op == "call_function" and n.target not in _NO_NODE and is_forward(n) and n.meta["seq_nr"] != -1 \
                and n not in untagged:
            by_seq.setdefault(n.meta["seq_nr"], []).append(n)
    return [FamilyAnomaly("shared_seq_nr", graph_id, tuple(n.name for n in ns),
                          f"forward calls {', '.join(n.name for n in ns)} in {graph_id} share seq_nr {s} (one "
                          "autograd node's: an op decomposed into several, or ops that made no node of their own): "
                          f"torch maps backward nodes to the first, {ns[0].name}, only", s)
            for s, ns in by_seq.items() if len(ns) > 1]
