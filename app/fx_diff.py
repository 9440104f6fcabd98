"""`agdb fx diff A B`: what changed in the FX metadata between two captures of one program (tracer/fx/graph_diff.py).

A and B are what `agdb fx --json` printed (either path: a script's own compiled graphs, or a marked target on torch
or on agdb's engine) or traces saved with `agdb fx -o` (their joint graph). Exit status 0 when nothing changed, 1
when something did, and 1 with one `agdb:` line for a file that is neither.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .commands import fail
from .fx_common import FxError

USAGE = "agdb fx diff A B [--json]: A and B are outputs of agdb fx --json, or traces saved with agdb fx -o"


def load_capture(path: str):
    """A GraphSet from a JSON report or a saved trace.

    Raises:
        FxError: the file is missing or is neither.
    """
    from agdb.tracer.fx.graph import from_data
    from agdb.tracer.fx.graph_set import GraphEntry, GraphSet, from_json

    p = Path(path)
    if not p.is_file():
        raise FxError(f"{path}: no such file")
    if p.suffix != ".json":
        return _from_trace(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FxError(f"{path}: not JSON ({e})") from None
    try:
        if isinstance(data, dict) and isinstance(data.get("graphs"), list):
            return from_json(data)
        graph = data.get("graph", data) if isinstance(data, dict) else None
        single = from_data(graph)  # the engine's report (agdb.fx-report/1), or one graph (agdb.fx/1)
    except ValueError as e:
        raise FxError(f"{path}: {e}") from None
    return GraphSet(graphs=[GraphEntry("c0.joint", "joint", None, 0, "joint", single)])


def _from_trace(path: str):
    from agdb.tracer.fx.graph_set import GraphEntry, GraphSet
    from agdb.tracer.store.tracefile import load
    from agdb.tracer.views.joint import joint_of_trace

    try:
        graph = joint_of_trace(load(path))  # ViewError, TraceFormatError: ValueErrors that say what is wrong
    except (OSError, ValueError) as e:
        raise FxError(f"{path}: {e}") from None
    return GraphSet(graphs=[GraphEntry("c0.joint", "joint", None, 0, "joint", graph)])


def cmd_fx_diff(paths: list[str], as_json: bool) -> int:
    from agdb.tracer.fx.graph_diff import diff

    if len(paths) != 2:
        return fail(USAGE)
    try:
        a, b = (load_capture(p) for p in paths)
    except FxError as e:
        return fail(str(e))
    changes = diff(a, b)
    if as_json:
        print(json.dumps({"format": "agdb.fx-diff/1", "a": paths[0], "b": paths[1],
                          "changes": [c.to_json() for c in changes]}, indent=2))
    else:
        out = sys.stdout
        out.write(f"A: {paths[0]} ({len(a)} graph{'s' if len(a) != 1 else ''})\n"
                  f"B: {paths[1]} ({len(b)} graph{'s' if len(b) != 1 else ''})\n")
        for c in changes:
            out.write(f"  [{c.kind}] {c.message}\n")
        out.write(f"{len(changes)} change{'s' if len(changes) != 1 else ''}\n" if changes else
                  "the metadata agrees: same nodes, seq_nrs, tags, annotations and map\n")
    return 1 if changes else 0
