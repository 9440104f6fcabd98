"""The graph model's data: boxes, arrows, clusters and graph attributes, as columns (no renderer syntax).

Every view builds a `GraphModel` (views/graph_model.py: the backward and forward graphs; views/joint.py: an FX joint
graph); every renderer draws one: DOT text (views/dot.py), the TUI's drawn graph (views/layout.py lays it out for a
terminal) and JSON (views/json_render.py). A 100k-node graph must become a model in a few tens of ms, so the model
is columnar, like the Trace: boxes and arrows come in blocks whose fields are numpy columns, not one Python object
per box. A label is a sequence of pieces, each the same text for every box (`str`) or a column (`Ints`, `Texts`);
joined, the pieces make the label's text, lines separated by newlines. `NodeBlock.label_text(i)` and
`label_texts` join them. A box has two texts: its `label` (every line, as DOT draws it) and its `brief` (one line,
as narrow as a terminal's box: views/labels.py's box width).

Imports numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from typing import Literal

import numpy as np

LARGE = 100
"""Pictures with more boxes than this ask for straight edges (GraphAttrs.has_straight_edges)."""

NodeKind = Literal["node", "chain", "repeat", "task", "legend"]
"""node: one trace node; chain: a folded linear chain of nodes; repeat: a folded repeated block (`× N`); task: a
ready-queue entry; legend: a key."""
GRAPH_KINDS: tuple[NodeKind, ...] = ("node", "chain", "repeat")
"""The kinds of boxes that stand for the graph's nodes."""
EdgeKind = Literal["next", "order", "points_at"]
"""next: a next edge (or, in the forward view, data flowing into an op); order: keeps a cluster's members in
their order (not drawn as an arrow); points_at: a queue entry points at its node's box."""
ClusterKind = Literal["set_apart", "queue", "legend"]


class ViewError(ValueError):
    """The view asked for cannot be drawn from this trace; the message says what to do instead."""


# -- label pieces -------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Ints:
    """A column of integers shown in decimal; negative values show as `negative` (e.g. `max`, or nothing)."""

    values: np.ndarray
    negative: str = ""


@dataclass(frozen=True, eq=False)
class Texts:
    """A column of texts, as codes into a small table (a 100k-node graph has a few dozen distinct names)."""

    codes: np.ndarray
    table: tuple[str, ...]


Piece = str | Ints | Texts
"""One piece of a label, an id or an arrow's label: the same text for every row, or a column."""


def piece_text(piece: Piece, i: int) -> str:
    """Row `i`'s text of one piece."""
    if isinstance(piece, str):
        return piece
    if isinstance(piece, Ints):
        v = int(piece.values[i])
        return piece.negative if v < 0 else str(v)
    return piece.table[int(piece.codes[i])]


def take_piece(piece: Piece, rows: np.ndarray) -> Piece:
    """The piece's rows `rows` (a constant piece stays as it is)."""
    if isinstance(piece, Ints):
        return Ints(piece.values[rows], piece.negative)
    if isinstance(piece, Texts):
        return Texts(piece.codes[rows], piece.table)
    return piece


def label_texts(pieces: tuple[Piece, ...], n: int) -> list[str]:
    """The joined text of each of `n` rows, a column at a time."""
    if not n:
        return []
    columns = [_column_texts(p, n) for p in pieces]
    if not columns:
        return [""] * n
    return ["".join(row) for row in zip(*columns, strict=True)]


def _column_texts(piece: Piece, n: int) -> list[str]:
    if isinstance(piece, str):
        return [piece] * n
    if isinstance(piece, Ints):
        return [piece.negative if v < 0 else str(v) for v in piece.values.tolist()]
    table = np.asarray(piece.table, dtype=object)
    return table[np.asarray(piece.codes, dtype=np.intp)].tolist()


# -- the model ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NodeBlock:
    """Boxes of one kind, as columns with one entry per box.

    A box's id is `id_prefix` followed by its `id_key` text (`n12`, `chain3`, `q0_1`, `legend_done`); ids are
    unique across the model. Boxes are numbered across the model's blocks in order (the model's rows), and
    arrows and clusters refer to boxes by row.
    """

    kind: NodeKind
    id_prefix: str
    id_key: Ints | Texts
    label: tuple[Piece, ...]
    node: np.ndarray  # int64: the trace node the box stands for (a chain or repeat: its first node), or -1
    state: np.ndarray  # int8: index into node_states.STATES, or -1 for a box with no state (a queue entry)
    peripheries: np.ndarray | None = None  # int8 borders per box: 1, or 2 (an accumulation point); None: all 1
    is_emphasized: np.ndarray | None = None  # bool: the focus node, drawn with a heavier border; None: none
    brief: tuple[Piece, ...] = ()  # the box's one-line text for a terminal box; (): its label's first line
    topo: np.ndarray | None = None  # int64: a one-node box's topological_nr (a layered drawing's layer); None: unknown

    def __len__(self) -> int:
        return len(self.node)

    def id(self, i: int) -> str:
        """Box `i`'s id."""
        return self.id_prefix + piece_text(self.id_key, i)

    def label_text(self, i: int) -> str:
        """Box `i`'s label, lines separated by newlines."""
        return "".join(piece_text(p, i) for p in self.label)

    def brief_texts(self) -> list[str]:
        """Every box's one-line text (its label's first line when the block has no brief)."""
        if self.brief:
            return label_texts(self.brief, len(self))
        return [t.partition("\n")[0] for t in label_texts(self.label, len(self))]

    def take(self, rows: np.ndarray) -> NodeBlock:
        """The boxes at `rows` of this block, as a block."""
        def per(column: np.ndarray | None) -> np.ndarray | None:
            return None if column is None else column[rows]

        return NodeBlock(self.kind, self.id_prefix, take_piece(self.id_key, rows),  # type: ignore[arg-type]
                         tuple(take_piece(p, rows) for p in self.label), self.node[rows], self.state[rows],
                         per(self.peripheries), per(self.is_emphasized), tuple(take_piece(p, rows) for p in self.brief),
                         per(self.topo))


@dataclass(frozen=True, eq=False)
class EdgeBlock:
    """Arrows of one kind from box `tail[i]` to box `head[i]` (model rows), with optional labels."""

    kind: EdgeKind
    tail: np.ndarray
    head: np.ndarray
    label: tuple[Piece, ...] = ()
    cluster: str = ""  # order: the cluster whose members it orders; points_at: the queue cluster it leaves

    def __len__(self) -> int:
        return len(self.tail)


@dataclass(frozen=True, eq=False)
class Cluster:
    """Boxes drawn together under a label; `members` are model rows, in the cluster's order (a queue pops
    its first member first). `parent` is the id of the cluster this one is drawn inside (a subgraph's cluster in
    its parent graph's), or "" for none; a row belongs to one cluster only."""

    id: str
    kind: ClusterKind
    label: str
    members: np.ndarray
    parent: str = ""


@dataclass(frozen=True, slots=True)
class GraphAttrs:
    """What the whole picture says and how it is laid out."""

    title: str
    rankdir: Literal["TB", "BT", "LR", "RL"] = "TB"
    has_straight_edges: bool = False  # large pictures: curved edges take a layout minutes (see LARGE)


@dataclass(frozen=True, eq=False)
class GraphModel:
    """A view of a trace at a step: boxes, arrows, clusters and graph attributes; no renderer syntax."""

    attrs: GraphAttrs
    nodes: tuple[NodeBlock, ...]
    edges: tuple[EdgeBlock, ...]
    clusters: tuple[Cluster, ...]
    node_rows: np.ndarray | None = None  # per trace node: the model row of the box showing it, -1: not shown
    starts: np.ndarray = field(init=False)  # model row of each block's first box, and the total

    def __post_init__(self) -> None:
        sizes = [len(b) for b in self.nodes]
        object.__setattr__(self, "starts", np.asarray([0, *accumulate(sizes)], dtype=np.int64))

    @property
    def num_rows(self) -> int:
        """How many boxes the model holds (the legend and queue entries included)."""
        return int(self.starts[-1])

    @property
    def num_boxes(self) -> int:
        """How many boxes stand for the graph: nodes, folded chains and repeats (not queue entries or the legend)."""
        return sum(len(b) for b in self.nodes if b.kind in GRAPH_KINDS)

    @property
    def num_arrows(self) -> int:
        """How many arrows stand for the graph's edges."""
        return sum(len(e) for e in self.edges if e.kind == "next")

    def block_of(self, row: int) -> tuple[NodeBlock, int]:
        """The block holding model row `row`, and the row's index within it."""
        b = int(np.searchsorted(self.starts, row, side="right")) - 1
        return self.nodes[b], row - int(self.starts[b])

    def cluster_of_rows(self) -> np.ndarray:
        """Per model row: the index of its cluster in `clusters`, or -1."""
        out = np.full(self.num_rows, -1, dtype=np.int64)
        for k, c in enumerate(self.clusters):
            out[c.members] = k
        return out
