"""`check_pass`: run a graph pass on a copy and name the nodes where it broke an invariant (seed 001).

Three invariants of graphs between AOT tracing and Inductor:
- `meta["val"]` matches what each node computes (recomputed by running the graph, as FakeTensorUpdater does);
- no mutation, except a trailing `copy_` epilogue;
- no input and output alias (share storage) unless they did before the pass.

Imports numpy and the engine (to run the graph); never textual or rich.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np

from agdb.tracer.fx.graph import Graph, Node
from agdb.tracer.fx.interpret import run

ViolationKind = Literal["stale_val", "mutation", "new_alias"]


@dataclass(frozen=True)
class Violation:
    """One broken invariant at one node of the pass's output."""

    kind: ViolationKind
    node: str
    message: str

    def to_json(self) -> dict:
        """Plain data for --json."""
        return {"kind": self.kind, "node": self.node, "message": self.message}


def _example_inputs(graph: Graph, seed: int = 0) -> dict[str, Any]:
    """One random tensor per placeholder, from its val (the same values for the graph before and after)."""
    from agdb.engine._tensor import make_tensor

    rng = np.random.default_rng(seed)
    out = {}
    for n in graph.nodes:
        if n.op == "placeholder":
            val = n.meta.get("val") or {"shape": [], "dtype": "float32"}
            dtype = {"float64": np.float64, "int64": np.int64, "bool": np.bool_}.get(val.get("dtype"), np.float32)
            out[n.name] = make_tensor(rng.standard_normal(val["shape"]).astype(dtype))
    return out


def _run(graph: Graph, inputs: dict[str, Any]) -> dict[Node, Any]:
    from agdb import engine

    with engine.no_grad():
        ph = {n: inputs[n.name].clone() for n in graph.nodes if n.op == "placeholder"}
        env = run(graph, ph)
        env.update(ph)
    return env


def _val_of(t: Any) -> dict:
    data = t._data
    return {"shape": list(data.shape), "stride": [s // data.itemsize for s in data.strides], "dtype": t.dtype.name}


def _is_mutation(n: Node) -> bool:
    name = n.target.rsplit(".", 1)[-1]
    return n.op == "call_function" and name.endswith("_") and not name.startswith("_") and name != "getitem"


def _aliases(graph: Graph, env: dict[Node, Any]) -> set[tuple[str, int]]:
    """(input name, output position) pairs whose storages overlap."""
    from agdb.engine import Tensor

    ins = [(n.name, env[n]) for n in graph.nodes if n.op == "placeholder"]
    outs = graph.output_node.args[0]
    found = set()
    for i, v in enumerate(outs):
        if isinstance(v, Node) and isinstance(env.get(v), Tensor):
            for name, t in ins:
                if np.shares_memory(env[v]._data, t._data):
                    found.add((name, i))
    return found


def check_pass(graph: Graph, pass_fn: Callable[[Graph], Graph | None]) -> list[Violation]:
    """Run `pass_fn` on a copy of `graph` (it may edit the copy or return a new graph) and list what it broke.

    Raises:
        Whatever the pass raises; interpret.NotRunnable when the graph cannot run on the engine.
    """
    before = graph.copy()
    after = graph.copy()
    result = pass_fn(after)
    if isinstance(result, Graph):
        after = result
    after.changed()
    inputs = _example_inputs(before)
    out: list[Violation] = []
    env = _run(after, inputs)
    from agdb.engine import Tensor

    for n in after.nodes:
        val, got = n.meta.get("val"), env.get(n)
        if n.op == "call_function" and isinstance(val, dict) and isinstance(got, Tensor):
            now = _val_of(got)
            diffs = [k for k in ("shape", "stride", "dtype") if k in val and val[k] != now[k]]
            if diffs:
                out.append(Violation("stale_val", n.name, f"{n.name}: meta['val'] says "
                                     + ", ".join(f"{k} {val[k]}" for k in diffs) + " but it computes "
                                     + ", ".join(f"{k} {now[k]}" for k in diffs)))
    calls = [n for n in after.nodes if n.op == "call_function"]
    epilogue = len(calls)
    while epilogue > 0 and calls[epilogue - 1].target.endswith("copy_"):
        epilogue -= 1
    for n in calls[:epilogue]:
        if _is_mutation(n):
            out.append(Violation("mutation", n.name, f"{n.name} ({n.target}) mutates its input: only a trailing "
                                 "copy_ epilogue may mutate between AOT tracing and Inductor"))
    old = _aliases(before, _run(before, inputs))
    outs = after.output_node.args[0]
    for name, i in sorted(_aliases(after, env) - old):
        node = outs[i].name if isinstance(outs[i], Node) else f"output[{i}]"
        out.append(Violation("new_alias", node, f"output {i} ({node}) now shares storage with input {name}; it did "
                             "not before the pass"))
    return out
