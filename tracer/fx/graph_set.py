"""Every graph of a compiled run: joint, forward and backward graphs of each compile, and their nested subgraphs.

A `GraphSet` is what `agdb fx --torch` captures from a script's own `torch.compile` run (docs/fx.md, "The run's own
graphs"): one `GraphEntry` per graph, with an id, a kind, its parent (the graph that holds it as a submodule, for a
higher-order op's subgraph) and the compile it belongs to. `to_json`/`from_json` are the JSON contract of
`agdb fx --torch --json` (docs/fx-graphs.schema.json).

Imports the standard library and tracer/fx only; never torch, the engine, textual or rich.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

from agdb.tracer.fx.graph import Graph, Node, Opaque, _decode, _encode

GraphKind = Literal["joint", "forward", "backward", "subgraph"]
FORMAT = "agdb.fx-graphs/1"


@dataclass
class Compile:
    """One AOTAutograd compile of the run: a compiled region, or a recompile of one, or a piece after a graph break.

    `compile_id` is Dynamo's (`"0/0"`: frame 0, first compile; `"0/1"` its recompile; `"1/0"` the next frame, as
    after a graph break), or None when AOTAutograd ran without Dynamo."""

    index: int
    compile_id: str | None = None
    function: str | None = None  # the compiled frame's function, file and first line, as Dynamo names it
    file: str | None = None
    line: int | None = None
    inference: bool = False  # nothing needed a gradient: one forward graph, no joint
    aot_id: int | None = None  # AOTAutograd's id of the compile, which its CompiledFunctionBackward nodes carry

    def title(self) -> str:
        where = f" ({self.function} in {self.file}:{self.line})" if self.function and self.file else ""
        ident = f" [{self.compile_id}]" if self.compile_id else ""
        return f"compile {self.index}{ident}{where}"


@dataclass
class GraphEntry:
    """One graph: `id` is unique in the set (`c0.joint`, `c0.joint/repeated_subgraph1`); `parent` is the id of the
    graph that holds this one as a submodule, or None; `name` is that submodule's attribute name (or the kind)."""

    id: str
    kind: GraphKind
    parent: str | None
    compile: int
    name: str
    graph: Graph

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "parent": self.parent, "compile": self.compile, "name": self.name,
                "info": json_value(self.graph.info), "nodes": [_node_json(n) for n in self.graph.nodes]}


ALWAYS = ("seq_nr", "partitioner_tag", "custom")
"""Meta keys every node of the JSON has, null where torch set none (`is_gradient_acc` is always a bool)."""


def _node_json(n: Node) -> dict:
    meta = {k: json_value(v) for k, v in n.meta.items()}
    for key in ALWAYS:
        meta.setdefault(key, None)
    meta["is_gradient_acc"] = bool(n.meta.get("is_gradient_acc", False))
    return {"name": n.name, "op": n.op, "target": n.target, "args": _encode(n.args), "kwargs": _encode(n.kwargs),
            "meta": meta}


def json_value(v: Any) -> Any:
    """A meta value as plain JSON: dicts stay objects (keys as text), tuples become lists, a node its name."""
    if isinstance(v, Node):
        return v.name
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [json_value(x) for x in v]
    if isinstance(v, Opaque):
        return v.text
    if hasattr(v, "expr"):  # agdb's descriptors, written as torch's are (tracer/sources/torch/fx_run.py)
        return {"class": type(v).__name__, "expr": v.expr()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


@dataclass
class GraphSet:
    """The graphs in the order torch made them (a joint before its partitions; a parent before its subgraphs)."""

    compiles: list[Compile] = field(default_factory=list)
    graphs: list[GraphEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    takers: dict[int, list[dict]] = field(default_factory=dict)
    """seq_nr -> the Python frames in flight when torch's tracing took it (`{"file", "line", "function",
    "code"}`, innermost last), when the capture watched for them (`agdb fx --torch --torch-frames`)."""

    def __iter__(self) -> Iterator[GraphEntry]:
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.graphs)

    def entry(self, graph_id: str) -> GraphEntry:
        for e in self.graphs:
            if e.id == graph_id:
                return e
        raise KeyError(f"no graph {graph_id!r}")

    def children(self, graph_id: str) -> list[GraphEntry]:
        return [e for e in self.graphs if e.parent == graph_id]

    def family(self, graph_id: str) -> list[GraphEntry]:
        """The graph and every graph nested in it, parents first (as `GraphModule.modules()` walks them)."""
        out = [self.entry(graph_id)]
        for child in self.children(graph_id):
            out.extend(self.family(child.id))
        return out

    def roots(self, kind: str | None = None) -> list[GraphEntry]:
        """The graphs no other graph holds, of `kind` if given."""
        return [e for e in self.graphs if e.parent is None and (kind is None or e.kind == kind)]

    def to_json(self) -> dict:
        data = {"format": FORMAT, "notes": list(self.notes),
                "compiles": [vars(c).copy() for c in self.compiles],
                "graphs": [e.to_json() for e in self.graphs]}
        if self.takers:
            data["takers"] = {str(k): v for k, v in sorted(self.takers.items())}
        return data


def from_json(data: Any) -> GraphSet:
    """A GraphSet from `GraphSet.to_json()`'s output (or the whole `agdb fx --torch --json` report).

    Raises:
        ValueError: the data is not such an object.
    """
    if not isinstance(data, dict) or not isinstance(data.get("graphs"), list):
        raise ValueError("not agdb's graphs of a compiled run (expected an object with a list of graphs)")
    out = GraphSet(notes=[str(n) for n in data.get("notes") or []])
    out.takers = {int(k): v for k, v in (data.get("takers") or {}).items()} if isinstance(data.get("takers"), dict) \
        else {}
    try:
        out.compiles = [Compile(**c) for c in data.get("compiles") or []]
        for g in data["graphs"]:
            out.graphs.append(GraphEntry(g["id"], g["kind"], g["parent"], int(g.get("compile", 0)),
                                         g.get("name", g["kind"]), _graph_from_json(g)))
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"a graph or node is malformed ({type(e).__name__}: {e})") from None
    return out


def _graph_from_json(g: dict) -> Graph:
    graph = Graph()
    graph.info = dict(g.get("info") or {})
    for row in g["nodes"]:
        meta = {k: v for k, v in row["meta"].items()
                if not (v is None and k in ALWAYS) and not (k == "is_gradient_acc" and v is False)}
        n = graph.create_node(row["op"], row["target"], tuple(_decode(row.get("args", []), graph)),
                              _decode(row.get("kwargs", {"dict": {}}), graph), name=row["name"], meta=meta)
        if n.name != row["name"]:
            raise ValueError(f"node name {row['name']!r} appears twice in graph {g.get('id')!r}")
    return graph
