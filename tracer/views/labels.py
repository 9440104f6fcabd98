"""A node's name, written once for every place that shows one: the TUI's panels, status line and drawn graph,
`agdb show`, `agdb export` (DOT and JSON), `agdb diff`, the culprits table.

The rule. A node is its short name (PyTorch's namespace dropped: `AccumulateGrad`, never
`torch::autograd::AccumulateGrad`), then what tells it apart from the other nodes of that name. Only the width
changes from place to place:

    the node                             box (drawn graph)    list (lists, sentences,     column (beside a
                                                              show, DOT, diff)            seq_nr column)
    a numbered node, seq_nr 8            MulBackward0 s8      MulBackward0 seq 8          MulBackward0
    an AccumulateGrad of a named leaf    AccumulateGrad w     AccumulateGrad w            AccumulateGrad w
    an AccumulateGrad of a nameless one  AccumulateGrad leaf 2  (the same)                (the same)
    a node with no seq_nr of its own     Error n4             Error node 4                Error node 4
      (an Error node: seq_nr 2**64-1, not an AccumulateGrad; told apart by its index in the trace)
    a ready-queue task with no node      (wake-up)            (wake-up)                   (wake-up)

A leaf's name is `trace.index.leaf_labels` (tracer/store/leaf_labels.py): a module parameter's path
(`fc1.weight`), the variable bound to it (`w`, `w (layer1)` when two functions bind a `w`), else `leaf N`, N its
number among the AccumulateGrads in the order they were made. A box cuts a leaf's name to BOX_LEAF_MAX
characters; a list cuts the whole label to its column (`fit`).

A seq_nr is its number, or `max` for 2**64-1 (UINT64_MAX: AccumulateGrad's and Error's); a priority (depth,
seq_nr) is `(1, max)`. JSON keeps the numbers as numbers; its display fields (`labels` in agdb.state/1, `label`
and `brief` in agdb.graph/1) follow this rule.

`NodeLabels(trace)` names one node at a time (lists, sentences, show); `label_pieces` names a whole column of
nodes at once, as the graph models' label pieces (tracer/views/model.py). Both read the same tables, so a box
and a list row cannot disagree. Imports numpy and the tracer's store and views' model only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from agdb.tracer.store.schema import UINT64_MAX, WAKE_UP_PRIORITY, short_name
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.model import Ints, Piece, Texts

Width = Literal["box", "list", "column"]
"""How much room a name has: a drawn box, a list or sentence, or a name column beside a seq_nr column."""

MAX_SEQ = "max"
"""How a seq_nr of UINT64_MAX (2**64-1: AccumulateGrad's and Error's, which pop first at their depth) is written."""
WAKE_UP = "(wake-up)"
"""A ready-queue task with no node: it only wakes the thread that owns the queue."""
NAME_WIDTH_MAX = 40
"""A list's name column is at most this wide: a longer name (a leaf's, a custom Function's) is cut (`fit`)."""
BOX_LEAF_MAX = 40
"""A drawn box cuts a leaf's name to this many characters."""

_LEAF, _NUMBERED, _UNNUMBERED = 0, 1, 2
"""What tells a node apart: its leaf's name, its seq_nr, or (no seq_nr of its own) its index in the trace."""
_BEFORE_NUMBER: dict[Width, tuple[str, str, str]] = {
    "box": ("", " s", " n"), "list": ("", " seq ", " node "), "column": ("", "", " node ")}
"""Per width, the text between the name and the number, by _LEAF, _NUMBERED, _UNNUMBERED."""


def seq_text(seq_nr: int) -> str:
    """A seq_nr as every place writes it: the number, or `max` for UINT64_MAX."""
    return MAX_SEQ if seq_nr == UINT64_MAX else str(seq_nr)


def priority_text(priority: tuple[int, int]) -> str:
    """A ready-queue priority (depth, seq_nr): `(0, 3)`, `(1, max)`; a wake-up task's `(first: a wake-up)`."""
    if priority == WAKE_UP_PRIORITY:
        return "(first: a wake-up)"
    depth, seq = priority
    return f"({depth}, {seq_text(seq)})"


def priority_cells(priority: tuple[int, int]) -> tuple[str, str]:
    """A ready-queue priority's depth and seq_nr cells: `0`, `3`; blank for a wake-up task, which has neither."""
    if priority == WAKE_UP_PRIORITY:
        return "", ""
    depth, seq = priority
    return str(depth), seq_text(seq)


def shown_name(recorded: str) -> str:
    """A recorded node name as people read it: PyTorch's namespace dropped (no node index needed)."""
    return short_name(recorded)


def fit(text: str, width: int) -> str:
    """`text` padded to `width`, or cut to it with an ellipsis."""
    return f"{text:<{width}}" if len(text) <= width else text[:width - 1] + "…"


def cut(text: str, width: int) -> str:
    """`text`, cut to `width` characters with an ellipsis when longer (never padded)."""
    return text if len(text) <= width else text[:width - 1] + "…"


THREAD_WIDTH = 12
"""A thread column is at most this wide: a longer name keeps its end (`…Executor-0_1`), where numbered names differ."""


def thread_labels(trace: Trace, rows: np.ndarray) -> dict[int, str]:
    """Thread row -> its name for a thread column, for the threads among `rows` (event or node thread rows; -1:
    none); {} when they are fewer than two, since one thread needs no column. Two threads of one name are told apart
    by their rows (`w#3`)."""
    shown = [r for r in np.unique(rows).tolist() if 0 <= r < len(trace.threads)]
    if len(shown) < 2:
        return {}
    names = {r: trace.threads[r][1] for r in shown}
    repeated = {n for n in names.values() if list(names.values()).count(n) > 1}
    labels = {r: f"{n}#{r}" if n in repeated else n for r, n in names.items()}
    return {r: n if len(n) <= THREAD_WIDTH else "…" + n[-(THREAD_WIDTH - 1):] for r, n in labels.items()}


@dataclass(frozen=True, eq=False)
class _Columns:
    """Per node, what its label is made of: name code, kind of distinction, number, leaf code (0: none)."""

    names: tuple[str, ...]  # short names, by name code
    name_codes: np.ndarray  # int32 per node
    kinds: np.ndarray  # int8 per node: _LEAF, _NUMBERED, _UNNUMBERED
    numbers: np.ndarray  # int64 per node: seq_nr (_NUMBERED), node index (_UNNUMBERED), -1 (_LEAF)
    leaves: tuple[str, ...]  # leaf labels, by leaf code - 1
    leaf_codes: np.ndarray  # int32 per node

    @classmethod
    def of(cls, trace: Trace) -> _Columns:
        """The columns of `trace`: O(nodes) numpy passes, names looked up once per distinct name."""
        c = trace.columns
        n = trace.num_nodes
        distinct = trace.distinct_names()
        lookup = np.zeros(len(trace.strings), dtype=np.int32)
        lookup[distinct] = np.arange(len(distinct), dtype=np.int32)
        name_codes = lookup[c["node_name"]] if n else np.zeros(0, dtype=np.int32)
        labels = trace.index.leaf_labels
        leaf_codes = np.zeros(n, dtype=np.int32)
        leaf_codes[np.fromiter(labels, np.int64, len(labels))] = np.arange(1, len(labels) + 1, dtype=np.int32)
        seq = np.asarray(c["node_seq"], dtype=np.int64)  # UINT64_MAX is stored as -1
        kinds = np.where(leaf_codes > 0, _LEAF, np.where(seq < 0, _UNNUMBERED, _NUMBERED)).astype(np.int8)
        numbers = np.where(kinds == _NUMBERED, seq, np.where(kinds == _UNNUMBERED, np.arange(n), -1))
        return cls(tuple(short_name(trace.strings[i]) for i in distinct), name_codes, kinds,
                   numbers.astype(np.int64), tuple(labels.values()), leaf_codes)


def _columns(trace: Trace) -> _Columns:
    """The trace's label columns, made once per trace."""
    return trace.index.memo("views.labels", lambda: _Columns.of(trace))


def label_pieces(trace: Trace, nodes: np.ndarray | None, width: Width) -> tuple[Piece, ...]:
    """The labels of `nodes` (None: every node, in order) at `width`, as model label pieces (one row a node):
    the same text `NodeLabels.label(node, width)` gives, made for a whole column at once."""
    cols = _columns(trace)
    codes = cols.name_codes if nodes is None else cols.name_codes[nodes]
    return (Texts(codes, cols.names), *distinction_pieces(trace, nodes, width))


def distinction_pieces(trace: Trace, nodes: np.ndarray | None, width: Width) -> tuple[Piece, ...]:
    """What tells each of `nodes` apart, with the space before it (` s8`, ` fc1.weight`, ` node 4`), as pieces
    that follow a name: `NodeLabels.distinction` for a whole column."""
    cols = _columns(trace)

    def at(column: np.ndarray) -> np.ndarray:
        return column if nodes is None else column[nodes]

    kinds = at(cols.kinds)
    numbers = at(cols.numbers)
    if width == "column":
        numbers = np.where(kinds == _NUMBERED, -1, numbers)
    leaves = tuple(" " + _leaf_text(leaf, width) for leaf in cols.leaves)
    return (Texts(at(cols.leaf_codes), ("", *leaves)), Texts(kinds, _BEFORE_NUMBER[width]), Ints(numbers, ""))


def short_names(trace: Trace, nodes: np.ndarray) -> np.ndarray:
    """The short names of `nodes`, as an object array (for a folded box's list of names)."""
    cols = _columns(trace)
    return np.asarray(cols.names, dtype=object)[cols.name_codes[nodes]]


def brief_name(name: str) -> str:
    """A name without PyTorch's `Backward0` suffix, where a folded box lists many names in little room."""
    return name.removesuffix("Backward0").removesuffix("Backward") or name


def _leaf_text(leaf: str, width: Width) -> str:
    return cut(leaf, BOX_LEAF_MAX) if width == "box" else leaf


class NodeLabels:
    """Names that tell a trace's nodes apart, one node at a time, by the module's rule."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._cols = _columns(trace)

    def name(self, node: int) -> str:
        """The node's short name alone (`MulBackward0`): what two nodes of one kind share."""
        return self._cols.names[int(self._cols.name_codes[node])]

    def distinction(self, node: int, width: Width = "list") -> str:
        """Only what tells it apart: `seq 8` (`s8` in a box, nothing in a column), `fc1.weight`, `node 4`."""
        cols = self._cols
        kind = int(cols.kinds[node])
        if kind == _LEAF:
            return _leaf_text(cols.leaves[int(cols.leaf_codes[node]) - 1], width)
        if kind == _NUMBERED and width == "column":
            return ""
        return _BEFORE_NUMBER[width][kind].lstrip() + str(int(cols.numbers[node]))

    def label(self, node: int, width: Width = "list") -> str:
        """The node's name at `width`: `MulBackward0 seq 8` (list), `MulBackward0 s8` (box), `MulBackward0`
        (column), `AccumulateGrad fc1.weight` (any), `Error node 4` (list, column), `Error n4` (box)."""
        rest = self.distinction(node, width)
        return f"{self.name(node)} {rest}" if rest else self.name(node)

    def box(self, node: int) -> str:
        """The node's name in a drawn box: `MulBackward0 s8`."""
        return self.label(node, "box")

    def column_name(self, node: int) -> str:
        """The node's name in a list with a seq_nr column: `MulBackward0`, `AccumulateGrad fc1.weight`."""
        return self.label(node, "column")

    def task(self, node: int | None, width: Width = "list") -> str:
        """A ready-queue task's name: its node's label, or `(wake-up)` for a task with no node."""
        return WAKE_UP if node is None or node < 0 else self.label(node, width)

    def column_width(self, minimum: int, with_seq: bool = False) -> int:
        """How wide a column of `column_name`s (or, `with_seq`, of list `label`s) must be for this trace's
        longest, within `minimum`..NAME_WIDTH_MAX: asked once per panel, from the few distinct names and leaves."""
        cols = self._cols
        widest = max((len(n) for n in cols.names), default=0)
        numbers = cols.numbers[cols.kinds != _LEAF]
        digits = len(str(int(numbers.max(initial=0))))
        rest = len(" node ") + digits if (cols.kinds == _UNNUMBERED).any() else 0
        if with_seq:
            rest = max(rest, len(" seq ") + digits)
        names = [widest + rest] if widest else []
        names += [len(f"AccumulateGrad {leaf}") for leaf in cols.leaves]
        return min(NAME_WIDTH_MAX, max([minimum, *names]))
