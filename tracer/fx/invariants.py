"""The invariants of seed 001 on one graph, and what a pass changed of them: the graph-walking half of
`check_pass`, independent of what runs the graph.

A `GraphRunner` runs a graph and describes each node's value (`ValueSummary`: shape, stride, dtype and a storage
number that two values share exactly when they share memory). From a graph and its values, `invariants()`
computes:

- `stale`: call nodes whose `meta["val"]` differs from what they compute (shape, stride or dtype), as
  FakeTensorUpdater would find;
- `mutations`: in-place nodes other than the copy_ epilogue (`is_epilogue`);
- `input_aliases` / `output_aliases`: (input, output) and (output, output) pairs sharing storage.

`changes(before, after)` compares the invariants of the graph before and after a pass, and the `seq_nr`,
`partitioner_tag` and `custom` of each node with those of the node it replaced (`replaced_nodes`), and lists only
what the pass broke, so a pass that changes nothing is clean even on a graph that breaks a rule already (an in-place op
of the user's program, a val the capture recorded differently). Violation kinds:

| kind | a node of the graph after the pass ... |
|---|---|
| `stale_val` | computes a shape, stride or dtype other than its `meta["val"]`, and did not before |
| `mutation` | mutates its input and is not the copy_ epilogue, and was not such a node before |
| `new_alias` | is an output that now shares storage with an input, or with another output, and did not before |
| `lost_meta` | lacks, or has another, `seq_nr` / `partitioner_tag` / `custom` than the node it replaced (one per key) |

Imports the standard library only; the engine is check_pass.py's EngineRunner's business.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, TypedDict

from agdb.tracer.fx.graph import Graph, Node, map_arg, op_name

ViolationKind = Literal["stale_val", "mutation", "new_alias", "lost_meta"]

META_KEYS = ("seq_nr", "partitioner_tag", "custom")
"""The meta a pass must carry over to a node it puts in place of another (what maps backward to forward)."""

NOT_MUTATING = frozenset({"slice_"})
"""Ops whose name ends in `_` but that mutate nothing (the engine's formula helper for slice)."""


@dataclass(frozen=True)
class Violation:
    """One broken invariant at one node of the pass's output."""

    kind: ViolationKind
    node: str
    message: str

    def to_json(self) -> dict:
        """Plain data for --json."""
        return {"kind": self.kind, "node": self.node, "message": self.message}


class ValueSummary(TypedDict):
    """What the invariants need of one tensor value: its geometry and its storage (equal numbers: shared)."""

    shape: list[int]
    stride: list[int]
    dtype: str
    storage: int


Values = dict[str, "ValueSummary | list[ValueSummary | None] | None"]
"""Node name -> the summary of its value (a list for a node returning several tensors, None for no tensor)."""


class GraphRunner(Protocol):
    """Runs graphs on one set of example inputs (the same for every graph it runs, by placeholder name)."""

    def run(self, graph: Graph) -> Values:
        """Each placeholder's and each call/get_attr node's value summary; storage numbers are comparable
        within one run only."""
        ...

    def mutates(self, node: Node) -> bool:
        """Whether the node writes into one of its arguments (default: `is_inplace`)."""
        ...


def is_inplace(node: Node) -> bool:
    """An in-place op by PyTorch's naming: `engine.mul_`, `aten.add_.Tensor`, `copy_` (not `_unsafe_view`)."""
    if node.op != "call_function":
        return False
    name = op_name(node.target)
    return name.endswith("_") and not name.startswith("_") and name not in NOT_MUTATING


def is_epilogue(node: Node, graph: Graph) -> bool:
    """A `copy_` into a graph input after which the graph runs only more such copies, or, for a copy outside the
    backward part of a joint graph, backward nodes (`partitioner_tag` "is_backward"): AOT's input-mutation
    epilogue, at the end of the forward graph the joint graph's forward part becomes."""
    if not _is_input_copy(node):
        return False
    backward_may_follow = node.meta.get("partitioner_tag") != "is_backward"
    for n in graph.nodes[graph.nodes.index(node) + 1:]:
        if n.op != "call_function" or _is_input_copy(n):
            continue
        if not (backward_may_follow and n.meta.get("partitioner_tag") == "is_backward"):
            return False
    return True


def _is_input_copy(node: Node) -> bool:
    return (node.op == "call_function" and op_name(node.target) == "copy_" and bool(node.args)
            and isinstance(node.args[0], Node) and node.args[0].op == "placeholder")


@dataclass
class Invariants:
    """The invariants of one graph, computed from its values by `invariants()`."""

    stale: dict[str, str] = field(default_factory=dict)  # node -> "shape [4] but computes shape []"
    mutations: dict[str, str] = field(default_factory=dict)  # node -> target
    input_aliases: set[tuple[str, int]] = field(default_factory=set)  # (placeholder, output position)
    output_aliases: set[tuple[int, int]] = field(default_factory=set)  # (output position, later output position)


def invariants(graph: Graph, values: Values, mutates: Callable[[Node], bool] = is_inplace) -> Invariants:
    """The invariants of `graph`, given each node's value summary (a GraphRunner's `run`)."""
    inv = Invariants()
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        detail = _stale(n.meta.get("val"), values.get(n.name))
        if detail:
            inv.stale[n.name] = detail
        if mutates(n) and not is_epilogue(n, graph):
            inv.mutations[n.name] = n.target
    inputs = [(n.name, values.get(n.name)) for n in graph.nodes if n.op == "placeholder"]
    outs = _outputs(graph)
    storages = [_storages(values.get(v.name)) if isinstance(v, Node) else set() for v in outs]
    for i, st in enumerate(storages):
        for name, val in inputs:
            if st & _storages(val):
                inv.input_aliases.add((name, i))
        for j in range(i + 1, len(storages)):
            if st & storages[j]:
                inv.output_aliases.add((i, j))
    return inv


def _stale(val: Any, got: Any) -> str | None:
    """How a recorded val differs from the computed summary ("shape [4], stride [1] but it computes shape [],
    stride []"), or None; for a node returning several tensors, the first output that differs."""
    if isinstance(val, (list, tuple)) and isinstance(got, list) and len(val) == len(got):
        for i, (v, g) in enumerate(zip(val, got, strict=True)):
            detail = _stale(v, g)
            if detail:
                return f"output {i}: {detail}"
        return None
    if not (isinstance(val, dict) and isinstance(got, dict)):
        return None
    diffs = [k for k in ("shape", "stride", "dtype") if k in val and _as_list(val[k]) != _as_list(got[k])]
    if not diffs:
        return None
    return ", ".join(f"{k} {val[k]}" for k in diffs) + " but it computes " + ", ".join(f"{k} {got[k]}" for k in diffs)


def _as_list(v: Any) -> Any:
    return list(v) if isinstance(v, (list, tuple)) else v


def _outputs(graph: Graph) -> list[Any]:
    out = graph.output_node.args[0]
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _storages(summary: Any) -> set[int]:
    if isinstance(summary, dict):
        return {summary["storage"]} if summary.get("storage") is not None else set()
    if isinstance(summary, list):
        return {s["storage"] for s in summary if isinstance(s, dict) and s.get("storage") is not None}
    return set()


def changes(before: Graph, inv_before: Invariants, after: Graph, inv_after: Invariants) -> list[Violation]:
    """What the pass that turned `before` into `after` broke: each invariant of `after` that `before` kept.

    Nodes are matched by name (a pass edits a copy, so node objects differ)."""
    out: list[Violation] = []
    for name, detail in inv_after.stale.items():
        if inv_before.stale.get(name) != detail:
            out.append(Violation("stale_val", name, f"{name}: meta['val'] says {detail}"))
    for name, target in inv_after.mutations.items():
        if name not in inv_before.mutations:
            out.append(Violation("mutation", name, f"{name} ({target}) mutates its input: only a trailing copy_ "
                                 "epilogue may mutate between AOT tracing and Inductor"))
    outs = _outputs(after)

    def label(i: int) -> str:
        v = outs[i]
        return v.name if isinstance(v, Node) else f"output[{i}]"

    for name, i in sorted(inv_after.input_aliases - inv_before.input_aliases):
        out.append(Violation("new_alias", label(i), f"output {i} ({label(i)}) now shares storage with input "
                             f"{name}; it did not before the pass"))
    for i, j in sorted(inv_after.output_aliases - inv_before.output_aliases):
        out.append(Violation("new_alias", label(j), f"outputs {i} ({label(i)}) and {j} ({label(j)}) now share "
                             "storage; they did not before the pass"))
    out += lost_meta(before, after)
    return out


def replaced_nodes(before: Graph, after: Graph) -> dict[str, str]:
    """Which node of `after` stands where a node of `before` was: new name -> old name.

    A node of `after` whose name `before` has is the same node (a pass may edit it in place). A new node (a name
    `before` lacks) replaces a removed node (a name `after` lacks) when it took that node's place in the data
    flow: an argument of a node, at the same position among its node arguments, or an output position, that held
    the removed node before now holds the new one (what `replace_all_uses_with(old, new)` does). From such a pair
    the match goes on through their arguments: where the removed node read another removed node and the new one
    reads another new node at the same position, those are a pair too (a chain rewritten as a
    chain). A new node that took no
    removed node's place (an extra op feeding a replacement) replaces nothing."""
    old_names = {n.name for n in before.nodes}
    new_names = {n.name for n in after.nodes}
    pairs: dict[str, str] = {}
    work: list[tuple[Node, Node]] = []

    def pair_refs(old_refs: list, new_refs: list) -> None:
        for o, n in zip(old_refs, new_refs, strict=False):  # args of two ops may differ in number
            if isinstance(o, Node) and isinstance(n, Node) and o.name not in new_names and n.name not in old_names \
                    and n.name not in pairs and o.op != "output":
                pairs[n.name] = o.name
                work.append((o, n))

    by_name = {n.name: n for n in before.nodes}
    for n in after.nodes:
        old = by_name.get(n.name)
        if old is not None:
            pair_refs(_node_refs(old), _node_refs(n))
    while work:
        o, n = work.pop()
        pair_refs(_node_refs(o), _node_refs(n))
    return pairs


def _node_refs(node: Node) -> list[Node]:
    """The Node arguments of `node`, in order, repeats included (for the output node: its values)."""
    refs: list[Node] = []
    map_arg((node.args, node.kwargs), refs.append)
    return refs


def lost_meta(before: Graph, after: Graph) -> list[Violation]:
    """`lost_meta` violations: a node of `after` that lacks, or changed, a META_KEYS entry that its own earlier
    version (same name) or the node it replaced (`replaced_nodes`) had."""
    old_by_name = {n.name: n for n in before.nodes}
    replaced = replaced_nodes(before, after)
    out = []
    for n in after.nodes:
        if n.op == "output":
            continue
        old_name = n.name if n.name in old_by_name else replaced.get(n.name)
        if old_name is None:
            continue
        old = old_by_name[old_name]
        for key in META_KEYS:
            if key not in old.meta or n.meta.get(key) == old.meta[key]:
                continue
            how = (f"has meta[{key!r}] = {n.meta[key]!r}" if key in n.meta else f"has no meta[{key!r}]")
            was = f"{old_name}, which it replaced," if old_name != n.name else "it"
            out.append(Violation("lost_meta", n.name, f"{n.name} {how}; {was} had {old.meta[key]!r} (a pass must "
                                 "keep seq_nr, partitioner_tag and custom, or backward nodes lose their forward "
                                 "node)"))
    return out
