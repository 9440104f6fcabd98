"""Find nodes by name or seq_nr, on the trace's columns. Imports numpy and the tracer only."""
from __future__ import annotations

import numpy as np

from .schema import UINT64_MAX, seq_code
from .trace import Trace


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

    `12` or `seq 12` matches the node whose seq_nr is 12; any other text matches node names that contain
    it, ignoring case (`mul` finds MulBackward0, `accumulate` every AccumulateGrad).
    """
    text = query.strip()
    words = text.split()
    if len(words) == 2 and words[0].lower() in ("seq", "seq_nr") and is_number(words[1]):
        text = words[1]
    if is_number(text):
        return nodes_with_seq(trace, int(text))
    if not text:
        return np.zeros(0, dtype=np.int64)
    lowered = text.lower()
    return np.flatnonzero(trace.nodes_named(lambda s: lowered in s.lower()))
