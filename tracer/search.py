"""Find nodes by name or seq_nr, on the trace's columns. Imports numpy and the tracer only."""
from __future__ import annotations

import numpy as np

from .recorder import seq_code
from .trace import Trace


def find_nodes(trace: Trace, query: str) -> np.ndarray:
    """Nodes matching `query`, in node-table order.

    `12` or `seq 12` matches the node whose seq_nr is 12; any other text matches node names that contain
    it, ignoring case (`mul` finds MulBackward0, `accumulate` every AccumulateGrad).
    """
    text = query.strip()
    words = text.split()
    if len(words) == 2 and words[0].lower() in ("seq", "seq_nr") and words[1].isdigit():
        text = words[1]
    if text.isdigit():
        return np.flatnonzero(trace.columns["node_seq"] == seq_code(int(text)))
    if not text:
        return np.zeros(0, dtype=np.int64)
    lowered = text.lower()
    ids = [i for i, s in enumerate(trace.strings) if lowered in s.lower()]
    return np.flatnonzero(np.isin(trace.columns["node_name"], ids))
