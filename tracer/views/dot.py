"""DOT text of a graph model: boxes styled by state, the pruned nodes set apart, the ready queue, a legend.

`render(model)` draws any `tracer.views.graph_model.GraphModel`; `picture` and `to_dot` build the model of a view
of a trace and draw it. Imports numpy and the tracer only: this is pure text making. Running Graphviz's `dot`
on the text is the app's business (app/export.py), because it is slow and needs a program that may be missing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agdb.tracer.replay.node_states import STATES
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.printable import printable
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.graph_model import VIEWS, View, graph_model
from agdb.tracer.views.model import (
    GRAPH_KINDS,
    LARGE,
    Cluster,
    EdgeBlock,
    GraphModel,
    Ints,
    NodeBlock,
    Piece,
    Texts,
    ViewError,
    take_piece,
)

__all__ = ["LARGE", "STATE_STYLE", "VIEWS", "Picture", "View", "ViewError", "picture", "render", "to_dot"]

STATE_STYLE = {
    "unreached": 'color="#9e9e9e", fontcolor="#757575", fillcolor="#ffffff"',
    "counted": 'color="#424242", fillcolor="#ffffff"',
    "waiting": 'color="#b7950b", fillcolor="#fff3c4"',
    "ready": 'color="#1e8449", fillcolor="#c8f7c5", penwidth=2',
    "running": 'color="#1f618d", fillcolor="#9ad0ff", penwidth=3',
    "done": 'color="#7f8c8d", fillcolor="#e8e8e8", fontcolor="#555555"',
    "pruned": 'color="#c0392b", fillcolor="#fdecea", fontcolor="#c0392b", style="rounded,filled,dashed"',
    "skipped": 'color="#c0392b", fillcolor="#ffffff", fontcolor="#c0392b", style="rounded,filled,dotted"',
    "captured": 'color="#6c3483", fillcolor="#e0c8ff", penwidth=2',
    "not_created": 'color="#bdbdbd", fontcolor="#9e9e9e", fillcolor="#ffffff", style="rounded,filled,dotted"',
    "to_push": 'color="#1e8449", fillcolor="#ffffff", penwidth=2, style="rounded,filled,dashed"',
    "raised": 'color="#c0392b", fillcolor="#f5b7b1", fontcolor="#7b241c", penwidth=3',
}
"""Graphviz attributes per node state (the TUI's graph panel shows the same states)."""
_CLUSTER_STYLE = {"set_apart": 'style=dashed; color="#c0392b"; fontcolor="#c0392b";',
                  "queue": 'style=filled; fillcolor="#f4f9f4"; color="#1e8449";',
                  "legend": 'style=rounded; color="#bbbbbb"; fontsize=10;'}
_EDGE_STYLE = {"order": "style=invis", "points_at": 'style=dotted, color="#1e8449", constraint=false'}
# Straight edges and a bounded crossing search past LARGE boxes: routing curved edges around many long ones
# takes dot minutes (a 200-box folded 100k-node graph: over 60 s); this way about 1 s.
_STRAIGHT = ", splines=line, mclimit=0.2, nslimit=1, nslimit1=1"


@dataclass(frozen=True, slots=True)
class Picture:
    """What `picture` decided to draw: the DOT text and how many boxes and arrows it holds."""

    dot: str
    num_boxes: int
    num_arrows: int


def to_dot(trace: Trace, step: int | None = None, view: View = "backward", focus: int | None = None,
           radius: int = 2, collapse: bool = False, state: EngineState | None = None) -> str:
    """The DOT text of `view` after event `step` (None: after the whole trace). See `picture`."""
    return picture(trace, step, view, focus, radius, collapse, state).dot


def picture(trace: Trace, step: int | None = None, view: View = "backward", focus: int | None = None,
            radius: int = 2, collapse: bool = False, state: EngineState | None = None) -> Picture:
    """Draw the trace's graph: `graph_model.graph_model`'s model (same arguments) as DOT text.

    Raises:
        ViewError: an unknown or unavailable view, a step outside the trace, a focus node not in it.
    """
    model = graph_model(trace, step, view, focus, radius, collapse, state)
    return Picture(render(model), model.num_boxes, model.num_arrows)


def render(model: GraphModel) -> str:
    """The DOT text of a model: the free boxes grouped by state, the set-apart cluster, the arrows, then the
    other clusters (each queue followed by its arrows to the graph) and the legend."""
    a = model.attrs
    lines = ["digraph agdb {",
             f'  graph [label="{_q(a.title)}", labelloc=t, fontname="Helvetica", '
             f'rankdir={a.rankdir}{_STRAIGHT if a.has_straight_edges else ""}];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9, color="#555555"];']
    placed = [_rows_by_block(model, c.members) for c in model.clusters]
    lines.extend(_by_state(model, placed, -1))
    ids = _Ids(model)
    for k, c in enumerate(model.clusters):
        if c.kind == "set_apart":
            lines.append(f'  subgraph cluster_{c.id} {{ label="{_q(c.label)}"; {_CLUSTER_STYLE[c.kind]}')
            lines.extend(_by_state(model, placed, k))
            lines.append("  }")
    lines.extend(_edge_text(e, ids, "  ") for e in model.edges if e.kind == "next")
    inner: dict[str, list[str]] = {}  # a cluster's id -> the lines of the clusters drawn inside it
    for c, blocks in reversed(list(zip(model.clusters, placed, strict=True))):  # children come after parents
        if c.kind != "set_apart" and c.parent:
            inner.setdefault(c.parent, [])[:0] = _cluster_lines(model, c, blocks, ids, inner.pop(c.id, []))
    for c, blocks in zip(model.clusters, placed, strict=True):
        if c.kind != "set_apart" and not c.parent:
            lines.extend(_cluster_lines(model, c, blocks, ids, inner.pop(c.id, [])))
            lines.extend(_edge_text(e, ids, "  ") for e in model.edges if e.kind == "points_at" and e.cluster == c.id)
    for orphans in inner.values():  # a parent the model does not have: drawn at the top level rather than lost
        lines.extend(orphans)
    lines.append("}")
    body = [line for line in lines if line]
    body.append("")  # the text ends with a newline (`+ "\n"` would copy the whole text once more)
    return "\n".join(body)


def _cluster_lines(model: GraphModel, c: Cluster, blocks: list[tuple[int, np.ndarray]], ids: _Ids,
                   inner: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    """A cluster (its members split by `_rows_by_block`) with its boxes, the clusters drawn inside it (`inner`, their
    lines) and the arrows that order them; the legend's, the same in every picture, once."""
    block = model.nodes[blocks[0][0]] if len(blocks) == 1 else None
    legend = id(block) if block is not None and block.kind == "legend" and len(blocks[0][1]) == len(block) else None
    if legend in _LEGEND_LINES:
        return _LEGEND_LINES[legend]
    lines = [f'  subgraph cluster_{c.id} {{ label="{_q(c.label)}"; {_CLUSTER_STYLE[c.kind]}']
    lines.extend(_box_text(model.nodes[b].take(rows)) for b, rows in blocks)
    lines.extend(inner)
    lines.extend(_edge_text(e, ids, "    ") for e in model.edges if e.kind == "order" and e.cluster == c.id)
    lines.append("  }")
    if legend is not None:
        _LEGEND_LINES[legend] = lines
    return lines


_LEGEND_LINES: dict[int, list[str]] = {}
"""A legend's lines by its block's id: graph_model's legends are made once per set of states (`_legend_of`) and
live as long as the process, so an id names one legend for good."""


# -- boxes ----------------------------------------------------------------------------------------------------
def _rows_by_block(model: GraphModel, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """`rows` (model rows, ascending within each block) split by block: (block number, indexes within it).
    Only blocks that the rows' span reaches are searched: a cluster is usually one block's rows, or a few."""
    if not len(rows):
        return []
    lo, hi = int(rows.min()), int(rows.max())
    starts = model.starts.tolist()
    out = []
    for b in range(len(model.nodes)):
        start, end = starts[b], starts[b + 1]
        if lo < end and start <= hi:
            inside = rows if start <= lo and hi < end else rows[(rows >= start) & (rows < end)]
            if len(inside):
                out.append((b, inside - start))
    return out


def _by_state(model: GraphModel, placed: list[list[tuple[int, np.ndarray]]], cluster: int) -> list[str]:
    """The graph boxes of one cluster (-1: those in none; `placed`: each cluster's rows by block), in one
    anonymous subgraph per state, whose node defaults carry the state's style; states in code order, blocks
    in model order within a state."""
    groups: dict[int, list[str]] = {}
    for b, block in enumerate(model.nodes):
        if block.kind not in GRAPH_KINDS:
            continue
        here = _here(b, len(block), placed, cluster)
        codes = block.state
        everywhere = here is None  # the usual case: no box set apart, no copy of the codes to count them
        present = np.flatnonzero(np.bincount(codes if everywhere else codes[here],
                                             minlength=len(STATES))).tolist()  # np.unique: slower
        if not present:
            continue
        parts = _box_parts(block)
        if len(present) == 1 and everywhere:
            groups.setdefault(present[0], []).append(_rows_text(parts, None, len(block)))
            continue
        for code in present:
            rows = np.flatnonzero(codes == code) if everywhere else np.flatnonzero(here & (codes == code))
            groups.setdefault(code, []).append(_rows_text(parts, rows, len(rows)))
    out = []
    for code in sorted(groups):
        state = STATES[code]
        out.extend([f'  subgraph {{ node [class="agdb-{state}", {STATE_STYLE[state]}];', *groups[code], "  }"])
    return out


def _here(b: int, n: int, placed: list[list[tuple[int, np.ndarray]]], cluster: int) -> np.ndarray | None:
    """Which of block b's n boxes are in `cluster` (-1: in no cluster), as a mask; None: all of them."""
    mine = [rows for blocks in (placed if cluster < 0 else [placed[cluster]]) for bb, rows in blocks if bb == b]
    if cluster < 0 and not mine:
        return None
    here = np.zeros(n, dtype=bool)
    for rows in mine:
        here[rows] = True
    return ~here if cluster < 0 else here


_NODE_EXTRAS = ("", "", ", peripheries=2", ", penwidth=4", ", penwidth=4", ", peripheries=2, penwidth=4")
"""A box's extra attributes, by its peripheries (0 to 2), plus 3 when it is emphasized: the peripheries column
is the codes as it is (no numpy call a picture)."""


def _box_text(block: NodeBlock) -> str:
    """One line per box of `block` (no newline after the last)."""
    return _rows_text(_box_parts(block), None, len(block))


def _rows_text(parts: list[Piece], rows: np.ndarray | None, n: int) -> str:
    """The lines of `rows` (None: all n) of a block whose line pieces are `parts` (no newline after the last)."""
    if rows is not None:
        parts = [take_piece(p, rows) for p in parts]
    return _lines(parts, n, "    ")  # type: ignore[arg-type]


def _box_parts(block: NodeBlock) -> list[Piece]:
    """The pieces of a box's line, escaped: columns of the block."""
    n = len(block)
    parts: list[Piece | list[str]] = [*_escaped(_id_pieces(block)), ' [label="', *_escaped(block.label), '"']
    if block.kind == "node":
        # No style here: each box sits in its state's subgraph, whose node defaults carry the style.
        extra = block.peripheries if block.peripheries is not None else np.ones(n, dtype=np.int8)
        if block.is_emphasized is not None:
            extra = extra + 3 * block.is_emphasized
        parts.append(Texts(extra, _NODE_EXTRAS))
    elif block.kind in ("chain", "repeat"):
        parts.append(Texts(block.state, tuple(f', class="agdb-{block.kind} agdb-{s}", shape=box3d'
                                              + (", peripheries=2" if block.kind == "repeat" else "")
                                              for s in STATES)))
    elif block.kind == "task":
        parts.append(', shape=box, style="filled", fillcolor="#c8f7c5", class="agdb-queue"')
    else:  # legend
        parts.append(Texts(block.state.astype(np.int64) + 1,
                           (', peripheries=2, fillcolor="#ffffff", class="agdb-legend"',
                            *(f', class="agdb-legend", {STATE_STYLE[s]}' for s in STATES))))
    parts.append("];")
    return parts  # type: ignore[return-value]


def _id_pieces(block: NodeBlock) -> tuple[Piece, ...]:
    return (block.id_prefix, block.id_key)


# -- arrows ---------------------------------------------------------------------------------------------------
class _Ids:
    """Each model row's id text, made on first use (the legend's arrows need only the legend's)."""

    def __init__(self, model: GraphModel) -> None:
        self.model = model
        self._all: np.ndarray | None = None
        self._first_top: int | None = None  # the first block's largest key, found once for all arrow blocks

    def of(self, rows: np.ndarray) -> list[str | list[str]]:
        """The ids of `rows`, as pieces of a line: usually the id prefix, then the keys' number texts (the same
        text objects as the boxes' numbers: on a cold cache, reading them again is cheaper than other ones)."""
        first = self.model.nodes[0] if self.model.nodes else None
        if (isinstance(first, NodeBlock) and isinstance(first.id_key, Ints) and len(rows)
                and int(rows.max()) < len(first)):  # the usual case: arrows among plain nodes
            keys = first.id_key.values
            if self._first_top is None:
                self._first_top = int(keys.max())
            return [first.id_prefix, _number_texts(keys[rows], "", self._first_top).tolist()]
        if self._all is None:
            self._all = np.concatenate([_id_texts(b) for b in self.model.nodes]) if self.model.nodes else \
                np.zeros(0, dtype=object)
        return [self._all[rows].tolist()]


def _id_texts(block: NodeBlock) -> np.ndarray:
    """The ids of a block's boxes, as an object array."""
    key = block.id_key
    if isinstance(key, Ints):
        return _number_texts(key.values, block.id_prefix)
    table = np.asarray([block.id_prefix + _q(t) for t in key.table], dtype=object)
    return table[key.codes]


def _edge_text(edges: EdgeBlock, ids: _Ids, indent: str) -> str:
    """One line per arrow (no newline after the last)."""
    n = len(edges)
    if not n:
        return ""
    style = _EDGE_STYLE.get(edges.kind)
    parts: list[Piece | list[str]] = [*ids.of(edges.tail), " -> ", *ids.of(edges.head)]
    if edges.label:
        parts.extend([' [label="', *_escaped(edges.label), '"'])
        parts.append(f", {style}];" if style else "];")
    else:
        parts.append(f" [{style}];" if style else ";")
    return _lines(parts, n, indent)


# -- columns of text ------------------------------------------------------------------------------------------
def _escaped(pieces: tuple[Piece, ...]) -> list[Piece]:
    """Pieces of a quoted string, DOT-escaped (a Texts' table once, not each row)."""
    out: list[Piece] = []
    for p in pieces:
        if isinstance(p, str):
            out.append(_q(p))
        elif isinstance(p, Ints):
            out.append(p if not p.negative else Ints(p.values, _q(p.negative)))
        else:
            out.append(Texts(p.codes, _q_table(p.table)))
    return out


_ESCAPED_TABLES: dict[tuple[str, ...], tuple[str, ...]] = {}
"""Small tables (names, marks) escaped once, kept between pictures: they repeat from picture to picture."""
_SMALL_TABLE = 64


def _q_table(table: tuple[str, ...]) -> tuple[str, ...]:
    if len(table) > _SMALL_TABLE:  # per-box labels: hashing them would cost as much as escaping them
        return tuple(_q(t) for t in table)
    found = _ESCAPED_TABLES.get(table)
    if found is None:
        if len(_ESCAPED_TABLES) >= 256:  # many traces drawn in one process: start afresh
            _ESCAPED_TABLES.clear()
        found = _ESCAPED_TABLES[table] = tuple(_q(t) for t in table)
    return found


_FEW = 16
"""Up to this many rows, text is made row by row."""


def _few_texts(piece: Ints | Texts) -> list[str]:
    if isinstance(piece, Ints):
        return [piece.negative if v < 0 else str(v) for v in piece.values.tolist()]
    return [piece.table[c] for c in piece.codes.tolist()]


def _column(piece: _Column, n: int) -> str | list[str]:
    """A piece's text, as is (escaping is the caller's): one str for a constant piece, else a list of n."""
    if isinstance(piece, (str, list)):
        return piece
    if isinstance(piece, _Numbers):
        ints = piece.ints
        out = _number_texts(ints.values, "", piece.top, piece.low >= 0).tolist()
        if piece.low < 0:
            for i in np.flatnonzero(np.asarray(ints.values) < 0).tolist():
                out[i] = ints.negative
        return out
    table = np.asarray(piece.table, dtype=object)
    return table[np.asarray(piece.codes, dtype=np.intp)].tolist()


def _numbers(piece: Ints, n: int) -> Texts | _Numbers:
    """Ints as a column to draw: few distinct small values (arrow labels: input_nr) as Texts, so a constant can
    join them; others as _Numbers."""
    values = np.asarray(piece.values)
    low, top = (int(values.min()), max(int(values.max()), 0)) if len(values) else (0, 0)
    if top >= 256 or top * 4 > n:
        return _Numbers(piece, low, top)
    codes = values + 1 if low >= 0 else np.maximum(values + 1, 0)
    return Texts(codes, (piece.negative, *map(str, range(top + 1))))


@dataclass(frozen=True, slots=True)
class _Numbers:
    """Ints to draw, with their smallest and largest (at least 0) values, found once: each numpy call costs
    microseconds on a cold cache, a good part of a 1k-node picture.

    A constant before them is not folded into their texts (one piece fewer a row): every number column of a
    picture then picks from the same kept texts, which after the first column are in the CPU's cache, while
    texts of their own per prefix ("n12", " · topo 12") would be read from memory (a 1k-node picture: ~0.1 ms).
    """

    ints: Ints
    low: int
    top: int


_Column = Piece | _Numbers | list[str]


def _fold(parts: list[_Column], n: int) -> list[_Column]:
    """Fewer pieces a row to join (a 100k-node graph's boxes are ~14 pieces each): merge adjacent constants, a
    constant into the small table of a Texts beside it, and two adjacent Texts of small tables into one."""
    out: list[_Column] = []
    for p in parts:
        if isinstance(p, Ints):
            p = _numbers(p, n)
        last = out[-1] if out else None
        if isinstance(p, str) and isinstance(last, str):
            out[-1] = last + p
        elif isinstance(p, str) and isinstance(last, Texts) and len(last.table) < max(n, 2):
            out[-1] = Texts(last.codes, tuple(t + p for t in last.table))
        elif isinstance(last, str) and isinstance(p, Texts) and len(p.table) < max(n, 2):
            out[-1] = Texts(p.codes, tuple(last + t for t in p.table))
        elif isinstance(last, Texts) and isinstance(p, Texts) and len(last.table) * len(p.table) <= n // 4:
            codes = np.multiply(last.codes, len(p.table), dtype=np.int64)
            codes += p.codes
            out[-1] = Texts(codes, tuple(a + b for a in last.table for b in p.table))
        else:
            out.append(p)
    return out


def _lines(parts: list[_Column], n: int, indent: str) -> str:
    """n lines, line i being `indent` then row i's pieces, joined by newlines (none after the last)."""
    if n <= _FEW:  # a queue, the legend: numpy's fixed costs would outweigh the rows'
        cols = [[p] * n if isinstance(p, str) else p if isinstance(p, list) else _few_texts(p) for p in parts]
        return "\n".join(indent + "".join(row) for row in zip(*cols, strict=True))
    cols = _fold(parts, n)
    if len(cols) == 1 and isinstance(cols[0], str):
        return "\n".join([indent + cols[0]] * n)
    # A row's leading constant and the newline before it end the row before (base's "];\n    n"): the
    # first line gets them in front, the last line's end is put back.
    lead = cols.pop(0) if isinstance(cols[0], str) else ""
    sep = "\n" + indent + lead
    end = cols[-1]
    if isinstance(end, Texts):
        cols[-1] = Texts(end.codes, tuple(t + sep for t in end.table))
        last = end.table[int(end.codes[-1])]
    else:
        cols.append(sep)
        last = ""
    return indent + lead + _interleave(cols, n, last)


def _interleave(cols: list[_Column], n: int, last: str) -> str:
    """Row after row, each row's pieces in order, joined once, the very last piece replaced by `last`: per
    row only C-level work (list slicing, a fancy index of texts), ~3x faster than an f-string per row."""
    merged = [_column(p, n) for p in cols]
    m = len(merged)
    pieces: list = [None] * (n * m)
    for k, col in enumerate(merged):
        pieces[k::m] = [col] * n if isinstance(col, str) else col
    pieces[-1] = last
    return "".join(pieces)


def _q(text: str) -> str:
    """A DOT double-quoted string's inside. Control characters are written as visible escapes (printable):
    Graphviz reads a NUL as the end of its input and the others make an SVG that is not XML."""
    return printable(text, keep_newlines=True).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_NUMBER_TEXT_LIMIT = 1 << 20
_NUMBER_TEXT_PREFIXES = 16
_NUMBER_TEXT: dict[str, np.ndarray] = {}
"""Per prefix, prefix + str(i) for small ints, kept between pictures: turning 100k ints into text is a large
part of a picture. Object arrays, so that a fancy index picks the texts in C, with no Python int made per value."""


def _number_texts(values: np.ndarray, prefix: str = "", top: int | None = None,
                  nonnegative: bool = False) -> np.ndarray:
    """prefix + the decimal text of each value, as an object array (negative values come out wrong: callers
    overwrite them). `top`: a bound on the values, `nonnegative`: none is negative, when the caller knows."""
    values = np.asarray(values)
    if top is None:
        top = int(values.max()) if len(values) else -1
    # seq_nrs of a long-running program, or a model with many constants before numbers: not worth keeping
    if top >= _NUMBER_TEXT_LIMIT or (prefix not in _NUMBER_TEXT and len(_NUMBER_TEXT) >= _NUMBER_TEXT_PREFIXES):
        return np.asarray([prefix + str(v) for v in values.tolist()] or [], dtype=object)
    known = _NUMBER_TEXT.get(prefix, np.zeros(0, dtype=object))
    if top >= len(known):
        size = min(max(top + 1, 2 * len(known)), _NUMBER_TEXT_LIMIT)
        grown = np.empty(size, dtype=object)
        grown[:len(known)] = known
        grown[len(known):] = [prefix + str(i) for i in range(len(known), size)]
        _NUMBER_TEXT[prefix] = known = grown  # one assignment: a picture drawn in a worker thread sees either
    return known[values if nonnegative else np.maximum(values, 0)]


def _texts(values: np.ndarray) -> list[str]:
    """The decimal text of each value (negative values come out wrong: callers overwrite them)."""
    return _number_texts(values).tolist()
