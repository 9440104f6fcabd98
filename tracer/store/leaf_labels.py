"""How every reader tells AccumulateGrads apart: by their leaf's name (NOTE [leaf names] in leaf_names), made unique.

Never imports the engine, textual or rich. The TUI's panels, `agdb show` and the graph views all read
`trace.index.leaf_labels`, so a leaf reads the same everywhere.
"""
from __future__ import annotations

import numpy as np

from agdb.tracer.store.columns import TraceColumns
from agdb.tracer.store.printable import printable
from agdb.tracer.store.schema import short_name


def stored_names(trace: TraceColumns) -> dict[int, str]:
    """node -> the name stored for its leaf: the `node_leaf_name` column (format 5 on), else the torch bridge's
    `meta["parameter_names"]` (node row as a string -> name), ignoring entries that are not that."""
    c = trace.columns
    column = c.get("node_leaf_name")
    if column is not None:
        rows = np.flatnonzero(column >= 0)
        return {int(r): trace.strings[int(column[r])] for r in rows.tolist()}
    meta = trace.meta.get("parameter_names")
    out: dict[int, str] = {}
    if isinstance(meta, dict):
        for key, name in meta.items():
            if isinstance(key, str) and key.isdigit() and int(key) < trace.num_nodes and isinstance(name, str):
                out[int(key)] = printable(name)
    return out


def leaf_labels(trace: TraceColumns) -> dict[int, str]:
    """node -> what tells each AccumulateGrad apart: its leaf's name (`fc1.weight`, `w`), or `leaf N` (N its number
    among the AccumulateGrads, in the order they were made) for a leaf with no name.

    A name that several AccumulateGrads share gets the function whose line made each (`w (layer1)`, `w (layer2)`)
    when that tells them apart, then a count in the order they were made (`fc1.weight #2`: the second one made,
    in a training loop its second step).
    """
    nodes = np.flatnonzero(trace.nodes_named(lambda s: short_name(s) == "AccumulateGrad"))
    ordered = nodes[np.argsort(trace.created_steps()[nodes], kind="stable")].tolist()
    names = stored_names(trace)
    labels = {n: names.get(n) or f"leaf {i + 1}" for i, n in enumerate(ordered)}
    named = [n for n in ordered if names.get(n)]
    for group in _repeats(named, labels).values():
        functions = _functions(trace, group)
        if len(set(functions)) > 1:
            for n, function in zip(group, functions, strict=True):
                labels[n] = f"{labels[n]} ({function})" if function else labels[n]
    for group in _repeats(named, labels).values():
        for k, n in enumerate(group, 1):
            labels[n] = f"{labels[n]} #{k}"
    return labels


def _functions(trace: TraceColumns, nodes: list[int]) -> list[str]:
    """The function whose line made each node ('' when unknown), read from the columns (a training loop has
    thousands of AccumulateGrads)."""
    c = trace.columns
    frames = np.asarray(c["node_frame"][nodes], dtype=np.int64)
    ids = np.where(frames >= 0, c["frame_func"][np.maximum(frames, 0)], -1) if len(c["frame_func"]) else \
        np.full(len(nodes), -1)
    return [trace.strings[i] if i >= 0 else "" for i in ids.tolist()]


def _repeats(nodes: list[int], labels: dict[int, str]) -> dict[str, list[int]]:
    """The labels more than one of `nodes` has, each with those nodes in order."""
    by_label: dict[str, list[int]] = {}
    for n in nodes:
        by_label.setdefault(labels[n], []).append(n)
    return {label: group for label, group in by_label.items() if len(group) > 1}
