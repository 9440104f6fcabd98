"""Find nodes by name or seq_nr, on the trace's columns. Imports numpy and the tracer only."""
from __future__ import annotations

import re

import numpy as np

from agdb.tracer.store.schema import UINT64_MAX, seq_code, short_name
from agdb.tracer.store.trace import Trace


def is_number(text: str) -> bool:
    """ASCII digits only (`str.isdigit` also accepts `²`, which `int` refuses)."""
    return text.isascii() and text.isdigit()


def nodes_with_seq(trace: Trace, seq: int) -> np.ndarray:
    """Nodes whose seq_nr is `seq` (2**64-1 is AccumulateGrad's and Error's; no other seq reaches 2**63)."""
    if seq >= 2**63 and seq != UINT64_MAX:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(trace.columns["node_seq"] == seq_code(seq))


def find_nodes(trace: Trace, query: str) -> np.ndarray:
    """Nodes matching `query`, in node-table order.

    `12` or `seq 12` matches the node whose seq_nr is 12; any other text matches, ignoring case, the names in
    which it starts a word (`mul` finds MulBackward0, `accumulate` and `grad` every AccumulateGrad, `backward0`
    every XBackward0), never a piece from inside a word: `mul` does not find AccumulateGrad. It also finds an
    AccumulateGrad by its leaf's name (tracer.store.leaf_labels) the same way: `fc1` finds model.fc1.weight's and
    model.fc1.bias's, `fc1.weight` the first, `weight` every parameter named weight.
    """
    text = query.strip()
    words = text.split()
    if len(words) == 2 and words[0].lower() in ("seq", "seq_nr") and is_number(words[1]):
        text = words[1]
    if is_number(text):
        return nodes_with_seq(trace, int(text))
    if not text:
        return np.zeros(0, dtype=np.int64)
    found = trace.nodes_named(lambda s: name_matches(s, text))
    leaves = [n for n, label in trace.index.leaf_labels.items() if label_matches(label, text)]
    if leaves:
        found = found.copy()
        found[leaves] = True
    return np.flatnonzero(found)


_LABEL_WORD = re.compile(r"[A-Za-z0-9_]+")
"""The words of a leaf's label: `model.fc1.weight` -> model, fc1, weight; `w (layer1)` -> w, layer1."""


def label_matches(label: str, query: str) -> bool:
    """Whether `query` (ignoring case) starts a leaf's label or the label from one of its words on: `fc1` and
    `fc1.weight` find `model.fc1.weight`, `c1` does not."""
    wanted = query.strip().lower()
    lowered = label.lower()
    return lowered.startswith(wanted) or any(lowered[w.start():].startswith(wanted)
                                             for w in _LABEL_WORD.finditer(label))


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
"""The words of a node name: `AccumulateGrad` -> Accumulate, Grad; `MmBackward0` -> Mm, Backward, 0; `NLLLoss` ->
NLL, Loss."""


def name_matches(name: str, query: str) -> bool:
    """Whether `query` (ignoring case) starts `name`, or starts one of the words of its short name."""
    wanted = query.strip().lower()
    if name.lower().startswith(wanted):
        return True
    short = short_name(name)
    return any(short[w.start():].lower().startswith(wanted) for w in _WORD.finditer(short))
