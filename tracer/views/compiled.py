"""Which compile a compiled region's backward node belongs to, and that compile's graphs, read from a trace's meta
(NOTE [compiled function nodes] in tracer/sources/torch/compiling.py): the node inspector's and `agdb show
--node`'s line "compiled graph c0: c0.forward / c0.backward".

Imports the standard library only; never torch, the engine, textual or rich.
"""
from __future__ import annotations

import os
from typing import Any

COMPILES = "compiles"
"""The meta key of the FX capture's compiles, saved with the trace by `agdb fx --torch -o` (with_compiles)."""
COMPILED_FUNCTIONS = "compiled_functions"
"""The meta key of the bridge's `{"node", "aot_id"}` per CompiledFunctionBackward node."""
COMPILED_LINE = "compiled graph "
"""How the inspector's line naming a node's compile begins (the TUI opens the compile's joint graph from it)."""
IN_FX_JOINT = "fx_joint"
"""A compile's `joint` when its joint graph is the trace's own `fx_joint` (kept once)."""


def has_joint(c: dict) -> bool:
    """Whether a `compiles` entry carries its joint graph (its data, or IN_FX_JOINT)."""
    return isinstance(c.get("joint"), dict) or c.get("joint") == IN_FX_JOINT


def compile_of_node(trace: Any, node: int) -> dict | None:
    """The compile `node` belongs to: the `compiles` entry whose `aot_id` the node carries; `{"aot_id": id}` alone
    when the trace holds no such entry (recorded without the FX capture); None for a node of no compiled region."""
    meta = trace.meta
    aot_id = next((e["aot_id"] for e in meta.get(COMPILED_FUNCTIONS) or () if e["node"] == node), None)
    if aot_id is None:
        return None
    found = next((c for c in meta.get(COMPILES) or () if c.get("aot_id") == aot_id), None)
    return found if found is not None else {"aot_id": aot_id}


def compiled_graph_lines(trace: Any, node: int) -> list[str]:
    """What the node inspector says of a compiled region's backward node (nothing for any other node): its compile's
    graphs, where the compile came from, and whether the trace holds its joint graph (the Joint panel's)."""
    c = compile_of_node(trace, node)
    if c is None:
        return []
    if "index" not in c:
        return [f"compiled region of AOTAutograd compile {c['aot_id']}: `agdb torch --fx SCRIPT -o FILE.agdb` records "
                "the run with its graphs, linked here"]
    i = c["index"]
    graphs = [g for g in c.get("graphs") or () if not g.endswith(".joint")] or [f"c{i}.forward", f"c{i}.backward"]
    where = ""
    if c.get("function") and c.get("file"):
        where = f" of {c['function']} ({os.path.basename(c['file'])}:{c.get('line')})"
    ident = f", Dynamo compile {c['compile_id']}" if c.get("compile_id") else ""
    lines = [f"{COMPILED_LINE}c{i}: {' / '.join(graphs)}{where}{ident}"]
    if has_joint(c):
        lines.append(f"  its joint graph c{i}.joint is in this trace (in the TUI, Enter on the line above shows it "
                     "in the Joint panel)")
    return lines


def compile_joint(trace: Any, index: int) -> Any:
    """The joint graph (with its subgraphs in `info`) of compile `index` of the trace's `compiles`.

    Raises:
        ViewError: the trace holds no joint graph of that compile, or it cannot be read.
    """
    from agdb.tracer.fx.graph import from_data
    from agdb.tracer.views.joint import joint_of_trace
    from agdb.tracer.views.model import ViewError

    c = next((c for c in trace.meta.get(COMPILES) or () if c.get("index") == index), None)
    if c is None or not has_joint(c):
        raise ViewError(f"this trace holds no joint graph of compile c{index}: `agdb fx --torch SCRIPT -o "
                        "FILE.agdb` saves every compile's")
    if c["joint"] == IN_FX_JOINT:
        return joint_of_trace(trace)
    try:
        return from_data(c["joint"])
    except (ValueError, KeyError, TypeError) as e:
        raise ViewError(f"the joint graph of compile c{index} cannot be read: {e}") from None


def with_compiles(trace: Any, compiles: list[dict]) -> Any:
    """A copy of `trace` whose meta holds the capture's compiles: `{"index", "compile_id", "function", "file",
    "line", "inference", "aot_id", "graphs": [ids of its top graphs], "joint": its joint graph's data, or "fx_joint"
    for the one the trace holds as its own joint graph (absent for an inference compile)}` each."""
    from agdb.tracer.store.trace import Trace

    return Trace(trace.columns, trace.strings, {**trace.meta, COMPILES: compiles})
