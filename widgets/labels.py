"""How every panel spells a seq_nr and a node's name, so that the same thing reads the same everywhere."""
from __future__ import annotations

from agdb.tracer.store.schema import UINT64_MAX, short_name
from agdb.tracer.store.trace import Trace

NAME_WIDTH_MAX = 40
"""A list's name column is at most this wide: a longer name (a leaf's, a custom Function's) is cut (NodeLabels.fit)."""

MAX_SEQ = "max"
"""How a seq_nr of UINT64_MAX (2**64-1, AccumulateGrad's: it runs last among ties) is written on screen."""


def seq_text(seq_nr: int) -> str:
    """A seq_nr as the panels write it: the number, or `max` for UINT64_MAX."""
    return MAX_SEQ if seq_nr == UINT64_MAX else str(seq_nr)


class NodeLabels:
    """Names that tell a trace's nodes apart: `MulBackward0 seq 8`, `AccumulateGrad fc1.weight`.

    Every AccumulateGrad has seq_nr max, so a leaf is told apart by its name in the user's program (a module's
    parameter path, or the variable bound to it: tracer.store.leaf_labels), or, when it has none, by its number among
    the leaves, in the order ops first used them: `AccumulateGrad leaf 2`.
    """

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._leaf = trace.index.leaf_labels

    def column_width(self, minimum: int, with_seq: bool = False) -> int:
        """How wide a column of `column_name`s (or, `with_seq`, of `label`s) must be for this trace's longest, within
        `minimum`..NAME_WIDTH_MAX: asked once per panel, from the few distinct names and the leaves' labels."""
        names = [len(short_name(self.trace.strings[i])) for i in self.trace.distinct_names()]
        if with_seq and names:
            seqs = self.trace.columns["node_seq"]
            names = [n + len(" seq ") + max(len(MAX_SEQ), len(str(int(seqs.max(initial=0))))) for n in names]
        names += [len(f"AccumulateGrad {leaf}") for leaf in self._leaf.values()]
        return min(NAME_WIDTH_MAX, max([minimum, *names]))

    @staticmethod
    def fit(text: str, width: int) -> str:
        """`text` padded to `width`, or cut to it with an ellipsis."""
        return f"{text:<{width}}" if len(text) <= width else text[:width - 1] + "…"

    def name(self, node: int) -> str:
        """The node's name as every panel writes it (PyTorch's namespace dropped)."""
        return short_name(self.trace.node_name(node))

    def column_name(self, node: int) -> str:
        """The name for a list with a seq_nr column: `MulBackward0` (the column tells those apart), but
        `AccumulateGrad fc1.weight` (every one has seq_nr max)."""
        leaf = self._leaf.get(node)
        return self.name(node) if leaf is None else f"AccumulateGrad {leaf}"

    def label(self, node: int) -> str:
        """The name and what tells it apart from other nodes of that name."""
        name, seq_nr, _ = self.trace.node_brief(node)
        name = short_name(name)
        leaf = self._leaf.get(node)
        return f"{name} {leaf}" if leaf is not None else f"{name} seq {seq_text(seq_nr)}"

    def distinction(self, node: int) -> str:
        """Only what tells it apart: `seq 8`, `fc1.weight` or `leaf 2`."""
        leaf = self._leaf.get(node)
        return leaf if leaf is not None else f"seq {seq_text(self.trace.node_brief(node)[1])}"
