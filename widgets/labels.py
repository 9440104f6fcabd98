"""How every panel spells a seq_nr and a node's name, so that the same thing reads the same everywhere."""
from __future__ import annotations

import numpy as np

from tracer.schema import UINT64_MAX, short_name
from tracer.trace import Trace

MAX_SEQ = "max"
"""How a seq_nr of UINT64_MAX (2**64-1, AccumulateGrad's: it runs last among ties) is written on screen."""


def seq_text(seq_nr: int) -> str:
    """A seq_nr as the panels write it: the number, or `max` for UINT64_MAX."""
    return MAX_SEQ if seq_nr == UINT64_MAX else str(seq_nr)


class NodeLabels:
    """Names that tell a trace's nodes apart: `MulBackward0 seq 8`, `AccumulateGrad leaf 2`.

    Every AccumulateGrad has seq_nr max, so a leaf is told apart by its number among the leaves, in the order
    ops first used them (the forward ↔ backward panel and the node inspector show each one's line).
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        nodes = np.flatnonzero(trace.nodes_named(lambda s: short_name(s) == "AccumulateGrad"))
        ordered = nodes[np.argsort(trace.created_steps()[nodes], kind="stable")].tolist()
        self._leaf = {n: i + 1 for i, n in enumerate(ordered)}

    def name(self, node: int) -> str:
        """The node's name as every panel writes it (PyTorch's namespace dropped)."""
        return short_name(self.trace.node_name(node))

    def column_name(self, node: int) -> str:
        """The name for a list with a seq_nr column: `MulBackward0` (the column tells those apart), but
        `AccumulateGrad leaf 2` (every one has seq_nr max)."""
        leaf = self._leaf.get(node)
        return self.name(node) if leaf is None else f"AccumulateGrad leaf {leaf}"

    def label(self, node: int) -> str:
        """The name and what tells it apart from other nodes of that name."""
        name, seq_nr, _ = self.trace.node_brief(node)
        name = short_name(name)
        leaf = self._leaf.get(node)
        return f"{name} leaf {leaf}" if leaf is not None else f"{name} seq {seq_text(seq_nr)}"

    def distinction(self, node: int) -> str:
        """Only what tells it apart: `seq 8` or `leaf 2`."""
        leaf = self._leaf.get(node)
        return f"leaf {leaf}" if leaf is not None else f"seq {seq_text(self.trace.node_brief(node)[1])}"
