"""The forward-to-backward map of a joint graph, its anomalies, and seq_nr preservation on re-tracing.

`copy_fwd_metadata_to_bw_nodes` does what PyTorch 2.13's does (the first forward node of each seq_nr wins;
grad-acc nodes are skipped; only `fwd_nn_module_stack`, `fwd_source_fn_stack` and a merged `custom` are
copied). `anomalies` names every place where the map breaks, with the Python line behind it when the capture
saw one (`graph.info["bumps"]`). `retrace` re-traces a joint graph, as `invoke_subgraph` re-enters make_fx:
without `preserve_node_seq_nr()` every node takes a new number and the map is lost.

Imports the standard library and the engine (re-tracing only); never textual or rich.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

from agdb.tracer.fx.graph import Graph, Node, op_name


def _is_forward(n: Node) -> bool:
    return n.op == "call_function" and n.meta.get("partitioner_tag") != "is_backward" and "seq_nr" in n.meta


def _is_backward(n: Node) -> bool:
    return n.op == "call_function" and n.meta.get("partitioner_tag") == "is_backward" and "seq_nr" in n.meta


def forward_of_seq(graph: Graph) -> dict[int, Node]:
    """seq_nr -> the first forward node with it (later ones are assumed to have made no autograd node)."""
    found: dict[int, Node] = {}
    for n in graph.nodes:
        if _is_forward(n):
            found.setdefault(n.meta["seq_nr"], n)
    return found


def copy_fwd_metadata_to_bw_nodes(graph: Graph) -> None:
    """Copy each forward node's nn_module_stack, source_fn_stack and custom meta to its backward nodes."""
    fwd = forward_of_seq(graph)
    for n in graph.nodes:
        if not _is_backward(n) or n.meta.get("is_gradient_acc"):
            continue
        f = fwd.get(n.meta["seq_nr"])
        if f is None:
            continue
        n.meta["fwd_nn_module_stack"] = f.meta.get("nn_module_stack")
        n.meta["fwd_source_fn_stack"] = f.meta.get("source_fn_stack")
        if "custom" in f.meta:
            n.meta["custom"] = {**n.meta.get("custom", {}), **copy.deepcopy(f.meta["custom"])}


@dataclass(frozen=True)
class SeqMap:
    """Forward node -> its backward nodes, and back (grad-acc nodes belong to no forward node)."""

    backward_of: dict[Node, list[Node]]
    forward_of: dict[Node, Node]


def seq_map(graph: Graph) -> SeqMap:
    """The one-to-many map copy_fwd_metadata_to_bw_nodes uses."""
    fwd = forward_of_seq(graph)
    backward_of: dict[Node, list[Node]] = {f: [] for f in fwd.values()}
    forward_of: dict[Node, Node] = {}
    for n in graph.nodes:
        if _is_backward(n) and not n.meta.get("is_gradient_acc"):
            f = fwd.get(n.meta["seq_nr"])
            if f is not None:
                backward_of[f].append(n)
                forward_of[n] = f
    return SeqMap(backward_of, forward_of)


AnomalyKind = Literal["no_forward", "shared_seq_nr", "minus_one", "gradient_acc", "shifted"]


@dataclass(frozen=True)
class Anomaly:
    """One place where the seq_nr map breaks or needs care; `culprits` are (file, line, function, node name)."""

    kind: AnomalyKind
    seq_nr: int
    nodes: tuple[str, ...]
    message: str
    culprits: tuple[tuple[str, int, str, str], ...] = field(default=())

    def to_json(self) -> dict:
        """Plain data for --json."""
        return {"kind": self.kind, "seq_nr": self.seq_nr, "nodes": list(self.nodes), "message": self.message,
                "culprits": [{"file": f, "line": ln, "function": fn, "node": nd} for f, ln, fn, nd in self.culprits]}


def anomalies(graph: Graph) -> list[Anomaly]:
    """Every anomaly of the map: backward nodes with no forward node, forward nodes sharing a number, -1,
    gradient-accumulation nodes (and hook ops marked like them), and forward nodes whose number was taken from
    an increment no op of theirs made (with the line that made it)."""
    out: list[Anomaly] = []
    fwd = forward_of_seq(graph)
    bumps = {b["seq_nr"]: b for b in graph.info.get("bumps", ()) if b.get("phase") == "forward"}
    by_seq: dict[int, list[Node]] = {}
    for n in graph.nodes:
        if _is_forward(n) and n.target != "getitem":
            by_seq.setdefault(n.meta["seq_nr"], []).append(n)
    for n in graph.nodes:
        if n.op != "call_function" or "seq_nr" not in n.meta:
            continue
        s = n.meta["seq_nr"]
        if s == -1:
            out.append(Anomaly("minus_one", s, (n.name,), f"{n.name} has seq_nr -1: it was made before any "
                               "autograd node on its thread (as Dynamo's proxies are)"))
        if n.meta.get("is_gradient_acc"):
            hook = op_name(n.target) != "add"
            what = ("an op run by a tensor hook, marked as gradient accumulation (PyTorch's known mislabelling)"
                    if hook else "a gradient sum for a tensor used more than once")
            out.append(Anomaly("gradient_acc", s, (n.name,), f"{n.name}: {what}; its seq_nr {s} is the forward "
                               "rule's (the last forward number), not a related node's"))
        elif _is_backward(n) and s not in fwd:
            out.append(Anomaly("no_forward", s, (n.name,), f"backward node {n.name} has seq_nr {s}, which no "
                               "forward node has: its metadata cannot be copied"))
    for s, nodes in by_seq.items():
        if len(nodes) > 1:
            out.append(Anomaly("shared_seq_nr", s, tuple(n.name for n in nodes),
                               f"forward nodes {', '.join(n.name for n in nodes)} share seq_nr {s}: only "
                               f"{nodes[0].name} maps to backward nodes"))
        if s in bumps and s != -1:  # info["bumps"] holds only the increments no FX node owns
            b = bumps[s]
            out.append(Anomaly("shifted", s, tuple(n.name for n in nodes),
                               f"{', '.join(n.name for n in nodes)} took seq_nr {s} from {b['node']}, an "
                               f"increment none of them made", ((b["file"], b["line"], b["function"], b["node"]),)))
    return out


# -- preservation and re-tracing -------------------------------------------------------------------------------
class _Tracing:
    preserve_seq_nr = False
    replay_node: Node | None = None


_state = _Tracing()


@contextmanager
def preserve_node_seq_nr(preserve: bool = True) -> Iterator[None]:
    """While on, a re-trace keeps each node's seq_nr from the node being re-traced (fx.traceback's
    `_preserve_node_seq_nr`)."""
    saved = _state.preserve_seq_nr
    _state.preserve_seq_nr = preserve
    try:
        yield
    finally:
        _state.preserve_seq_nr = saved


@contextmanager
def set_current_replay_node(node: Node | None) -> Iterator[None]:
    """Nodes made inside take `node`'s seq_nr (functionalization's view replay), unless preservation is on."""
    saved = _state.replay_node
    _state.replay_node = node
    try:
        yield
    finally:
        _state.replay_node = saved


def new_seq_nr(current: Node | None, counter: int) -> int | None:
    """The seq_nr a node made while re-tracing `current` gets: preserved, the replay node's, or the forward
    rule's `counter - 1` (torch.fx.proxy._get_seq_nr, outside backward)."""
    if _state.preserve_seq_nr:
        seq = current.meta.get("seq_nr") if current is not None else None
    else:
        seq = counter - 1
        if _state.replay_node is not None and "seq_nr" in _state.replay_node.meta:
            seq = _state.replay_node.meta["seq_nr"]
    return seq


def retrace(graph: Graph) -> Graph:
    """Re-trace a joint graph node by node on the engine, as a higher-order op re-enters make_fx: the new
    graph has the same nodes and meta, and seq_nrs given by `new_seq_nr` (lost unless preserved)."""
    from agdb import engine
    from agdb.engine import _state as engine_state
    from agdb.tracer.fx.interpret import run_node

    new = Graph()
    new.info = dict(graph.info)
    new.constants = dict(graph.constants)
    env: dict[Node, Any] = {}
    copies: dict[Node, Node] = {}
    for n in graph.nodes:
        if n.op == "placeholder":
            val = n.meta.get("val") or {"shape": [], "dtype": "float32"}
            env[n] = engine.randn(tuple(val["shape"])).requires_grad_(True)
        elif n.op in ("call_function", "get_attr"):
            env[n] = run_node(n, env, graph)
        meta = {k: v for k, v in n.meta.items() if k != "seq_nr"}
        if n.op in ("call_function", "get_attr"):
            seq = new_seq_nr(n, engine_state.tls.seq_nr)
            if seq is not None:
                meta["seq_nr"] = seq
        from agdb.tracer.fx.graph import map_arg

        copies[n] = new.create_node(n.op, n.target, map_arg(n.args, lambda a: copies[a]),
                                    map_arg(n.kwargs, lambda a: copies[a]), name=n.name, meta=meta)
    return new
