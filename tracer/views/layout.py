"""Laying out a graph model for a terminal: boxes in layers, edges routed in box-drawing cells.

`layout(model)` is a pure function of a `GraphModel` (tracer/views/model.py), the same model DOT and JSON render:
it returns a `Layout`, plain data that says where each box sits (line, column, width, text) and which cells the
edges cross. `drawn_model(trace)` is the model the TUI draws: the backward graph, folded above FOLD_ABOVE nodes,
built once (its boxes do not change from step to step). The TUI's graph panel (widgets/graph_canvas.py) only
paints the lines on screen from the layout, and styles each box by its nodes' state at the step (the model's
states are the end of the trace's); `text_lines` draws the whole picture as plain text (for tests and small
graphs). A box shows the model's brief text (views/labels.py's box width: `MulBackward0 s8`); the model's
clusters (the set-apart nodes, the ready queue, the legend) are not drawn as boxes: the panel marks the queued
and running nodes' boxes, and a node's state is its box's style.

The rule:

1. **Boxes.** One per graph box of the model (GRAPH_KINDS): a node, a folded linear chain, or a folded repeated
   block (`× N`). The TUI folds graphs of more than FOLD_ABOVE nodes as `agdb export --collapse` folds them
   (docs/folding.md).
2. **Layers.** Unfolded, a node's layer is its topological_nr (the longest path to a leaf; distinct values
   ranked densely, so layers with no node take no room). Folded, a box's layer is the longest path to a sink
   in the folded graph. The highest layer (the roots, where backward starts) is the top row; leaves (layer
   0, the AccumulateGrads) are the bottom row. An edge that skips layers passes through a one-cell *dummy* on
   every row between, drawn `│`.
3. **Components** (graphs that share no edge, e.g. two backward calls) are laid out side by side, in the
   order of their first node, each on the same rows as the others, so a row is one layer everywhere.
   Long edges into the same box share its dummies: they join one vertical line (a bus) down to it.
4. **Order and columns.** Row by row from the top: a box or dummy wants its centre under the mean centre of
   its parents (on the row above), a dummy under the dummy above it (a bus runs straight); items are ordered
   by that (boxes first on a tie, then by node), and packed left to right at the wanted column or the first
   free one, GAP cells apart, a box stepping right off a column where an edge comes down that is not its
   own. Items with no parent come first, by node.
5. **Edges.** Between two rows, the edges that leave one item form one fan (from the item's centre to each
   child's centre); fans whose spans overlap go on different tracks (one line each); a last line carries
   the arrowheads `▼` into real boxes. Cells keep a mask of the directions crossing them, drawn as the
   matching box-drawing character.

Imports numpy and the tracer only; no UI. Nothing recurses on the graph's depth.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agdb.tracer.store.trace import Trace
from agdb.tracer.views.folding import Folding, fold, no_folding
from agdb.tracer.views.graph_model import graph_model
from agdb.tracer.views.model import GRAPH_KINDS, GraphModel

FOLD_ABOVE = 200
"""Graphs with more nodes than this are folded (chains and repeated blocks, as `agdb export --collapse`)."""
GAP = 2
"""Cells before a box in a row: room for its mark (running, queue position) and a blank; before a dummy, 1."""
COMPONENT_GAP = 4
"""Cells between two components."""

MAX_BOXES = 20_000
"""A picture with more boxes than this (after folding) is not laid out: LayoutTooLarge."""
MAX_DUMMIES = 50_000
"""… nor one whose long edges pass more rows than this (dummies, counted with buses shared)."""
MAX_CELLS = 300_000
"""… nor one whose edges cross more cells than this: a graph that folds badly (an irregular, tangled one)
would take seconds to route and draw as a wall of lines; the list and `agdb export --focus` serve it better."""

UP, DOWN, LEFT, RIGHT, ARROW = 1, 2, 4, 8, 16
"""Direction bits of a cell: an edge leaves it upward, downward, leftward, rightward, or ends in it (`▼`)."""
CHARS = {
    UP | DOWN: "│", LEFT | RIGHT: "─", UP | RIGHT: "└", UP | LEFT: "┘", DOWN | RIGHT: "┌", DOWN | LEFT: "┐",
    UP | DOWN | RIGHT: "├", UP | DOWN | LEFT: "┤", UP | LEFT | RIGHT: "┴", DOWN | LEFT | RIGHT: "┬",
    UP | DOWN | LEFT | RIGHT: "┼", UP: "╵", DOWN: "╷", LEFT: "╴", RIGHT: "╶",
}
"""The box-drawing character of each direction mask (a mask with ARROW draws `▼`)."""


class LayoutTooLarge(ValueError):
    """The graph would be too large or too tangled to draw in a terminal; the message says how large."""


def cell_char(mask: int) -> str:
    """The character a cell with direction `mask` shows."""
    return "▼" if mask & ARROW else CHARS.get(mask, " ")


@dataclass(frozen=True, eq=False)
class Layout:
    """Where every box of a picture sits, and the cells its edges cross; a box is a folding group."""

    folding: Folding  # node -> box (group_of); a box's nodes (members, starts)
    labels: tuple[str, ...]  # per box, the text inside its brackets (the model's brief)
    box_layer: np.ndarray  # per box: its layer (0: the leaves)
    box_x: np.ndarray  # per box: the column of its `[`
    box_y: np.ndarray  # per box: its line
    box_w: np.ndarray  # per box: its width, brackets included
    box_node: np.ndarray  # per box: the node it stands for (a folded box: its first node)
    reading: np.ndarray  # the boxes in reading order: by line, then column
    rows: dict[int, tuple[int, ...]]  # line -> the boxes on it, by column
    cells: dict[int, dict[int, int]]  # line -> column -> direction mask of the edges crossing the cell
    paths: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...]  # (parent box, child box, (column, line) corners)
    width: int
    height: int
    is_folded: bool

    @property
    def num_boxes(self) -> int:
        """How many boxes the picture draws."""
        return len(self.labels)

    def box_of(self, node: int) -> int:
        """The box that shows `node`, or -1."""
        return int(self.folding.group_of[node]) if 0 <= node < len(self.folding.group_of) else -1

    def center(self, box: int) -> int:
        """The column of a box's centre, where its edges leave and arrive."""
        return int(self.box_x[box] + self.box_w[box] // 2)


def drawn_model(trace: Trace, folding: Folding | None = None) -> GraphModel:
    """The backward graph the TUI draws: every node, folded as `agdb export --collapse` folds (without the states
    at a step, so the boxes stay put) when there are more than FOLD_ABOVE, else one box per node.

    Args:
        folding: the boxes to draw instead (e.g. `no_folding` of every node).
    """
    n = trace.num_nodes
    if folding is None:
        nodes = np.arange(n, dtype=np.int64)
        folding = fold(trace, nodes) if n > FOLD_ABOVE else no_folding(nodes, n)
    return graph_model(trace, view="backward", folding=folding)


def layout(model: GraphModel) -> Layout:
    """Lay out the graph boxes and next arrows of `model` (drawn_model's, usually).

    Raises:
        LayoutTooLarge: more than MAX_BOXES boxes, MAX_DUMMIES rows passed by long edges, or MAX_CELLS cells of
            edges; checked before each costly step, so giving up is quick.
    """
    return _Layouter(_Boxes.of(model)).run()


def text_lines(lay: Layout) -> list[str]:
    """The whole picture as plain text, one string per line (boxes as `[label]`, no state marks)."""
    return [line_text(lay, y) for y in range(lay.height)]


def line_text(lay: Layout, y: int, x0: int = 0, width: int | None = None) -> str:
    """Line `y` of the picture, columns x0 .. x0+width-1 (all of it by default), as plain text."""
    width = lay.width - x0 if width is None else width
    chars = [" "] * max(width, 0)
    for x, mask in lay.cells.get(y, {}).items():
        if x0 <= x < x0 + width:
            chars[x - x0] = cell_char(mask)
    for b in lay.rows.get(y, ()):
        text = f"[{lay.labels[b]}]"
        bx = int(lay.box_x[b])
        for i, ch in enumerate(text):
            if x0 <= bx + i < x0 + width:
                chars[bx + i - x0] = ch
    return "".join(chars).rstrip() if width == lay.width - x0 else "".join(chars)


# -- the model's boxes ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Boxes:
    """What the layout reads from a model: its graph boxes (box b is model row `rows[b]`), their texts, nodes and
    topological_nrs, which nodes each shows, and the arrows between them."""

    folding: Folding
    labels: list[str]
    box_node: np.ndarray
    topo: np.ndarray | None  # None: some box has no topological_nr of its own (a folded one)
    box_edges: list[list[int]]  # (upper box, lower box), once per pair, sorted
    is_folded: bool

    @classmethod
    def of(cls, model: GraphModel) -> _Boxes:
        """What `model` says about its graph boxes (its blocks of GRAPH_KINDS, in model order)."""
        blocks = [(b, model.nodes[b]) for b in range(len(model.nodes)) if model.nodes[b].kind in GRAPH_KINDS]
        rows = np.concatenate([np.arange(int(model.starts[b]), int(model.starts[b + 1])) for b, _ in blocks]
                              or [np.zeros(0, dtype=np.int64)])
        box_of_row = np.full(model.num_rows, -1, dtype=np.int64)
        box_of_row[rows] = np.arange(len(rows))
        labels = [text for _, block in blocks for text in block.brief_texts()]
        box_node = np.concatenate([block.node for _, block in blocks] or [np.zeros(0, dtype=np.int64)])
        topos = [block.topo for _, block in blocks]
        topo = np.concatenate(topos) if topos and all(t is not None for t in topos) else None
        tails = np.concatenate([box_of_row[e.tail] for e in model.edges if e.kind == "next"] or [np.zeros(0, int)])
        heads = np.concatenate([box_of_row[e.head] for e in model.edges if e.kind == "next"] or [np.zeros(0, int)])
        keep = (tails >= 0) & (heads >= 0) & (tails != heads)
        pairs = np.unique(np.stack([tails[keep], heads[keep]], axis=1), axis=0) if keep.any() else \
            np.zeros((0, 2), dtype=np.int64)
        return cls(_folding(model, box_of_row, len(rows)), labels, box_node.astype(np.int64), topo, pairs.tolist(),
                   any(block.kind != "node" for _, block in blocks))


def _folding(model: GraphModel, box_of_row: np.ndarray, num_boxes: int) -> Folding:
    """The model's node -> box map as a Folding whose group g is box g (its nodes in node order)."""
    node_rows = model.node_rows
    if node_rows is None:  # a model that does not say: each box shows the node it stands for
        node_rows = np.full(max([int(b.node.max(initial=-1)) for b in model.nodes] + [-1]) + 1, -1, dtype=np.int64)
        for b, block in enumerate(model.nodes):
            shown = block.node >= 0
            node_rows[block.node[shown]] = int(model.starts[b]) + np.flatnonzero(shown)
    group_of = np.where(node_rows >= 0, box_of_row[np.maximum(node_rows, 0)], -1)
    members = np.flatnonzero(group_of >= 0)
    members = members[np.argsort(group_of[members], kind="stable")]
    starts = np.zeros(num_boxes + 1, dtype=np.int64)
    starts[1:] = np.cumsum(np.bincount(group_of[members], minlength=num_boxes))
    return Folding(group_of, members, starts)


# -- the layouter -------------------------------------------------------------------------------------------
class _Layouter:
    """One layout's steps, as methods so each stays short. Items are boxes (item i < num boxes is box i) and
    dummies (one per row an edge skips)."""

    def __init__(self, boxes: _Boxes) -> None:
        self.boxes, self.f = boxes, boxes.folding
        self.box_edges = boxes.box_edges  # (parent box, child box), once per pair, sorted
        self.num_boxes = len(boxes.labels)
        self.box_node = boxes.box_node
        self.is_folded = boxes.is_folded

    def run(self) -> Layout:
        labels = self.boxes.labels
        widths = np.asarray([len(t) + 2 for t in labels], dtype=np.int64)
        if self.num_boxes > MAX_BOXES:
            raise LayoutTooLarge(f"{self.num_boxes:,} boxes after folding (at most {MAX_BOXES:,} are drawn)")
        layer = self._layers()
        top = int(layer.max(initial=0))
        row = top - layer  # row 0: the highest layer
        self._check_dummies(row)
        items = self._items(row)
        width = self._place(items, widths)
        return self._route(items, widths, labels, layer, width)

    # layers -------------------------------------------------------------------------------------------------
    def _layers(self) -> np.ndarray:
        """Per box its layer: topological_nr ranked densely (unfolded), else the longest path to a sink."""
        topo = self.boxes.topo
        if not self.is_folded and topo is not None:
            consistent = all(topo[p] > topo[c] for p, c in self.box_edges)
            if consistent:
                return np.unique(topo, return_inverse=True)[1].astype(np.int64)
        return self._longest_paths()

    def _longest_paths(self) -> np.ndarray:
        """Longest path to a sink per box, by peeling sinks (Kahn's order on reversed edges); boxes on a cycle
        (none in a backward graph) stay where their children put them."""
        n = self.num_boxes
        out_degree = np.zeros(n, dtype=np.int64)
        parents: list[list[int]] = [[] for _ in range(n)]
        for p, c in self.box_edges:
            out_degree[p] += 1
            parents[c].append(p)
        layer = np.zeros(n, dtype=np.int64)
        todo = np.flatnonzero(out_degree == 0).tolist()
        degree = out_degree.tolist()
        while todo:
            c = todo.pop()
            for p in parents[c]:
                if layer[c] + 1 > layer[p]:
                    layer[p] = layer[c] + 1
                degree[p] -= 1
                if degree[p] == 0:
                    todo.append(p)
        return layer

    def _check_dummies(self, row: np.ndarray) -> None:
        """Count the dummies before making them: per child, the rows from under its highest parent to it."""
        if not self.box_edges:
            return
        pairs = np.asarray(self.box_edges, dtype=np.int64)
        highest = np.full(self.num_boxes, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(highest, pairs[:, 1], row[pairs[:, 0]])
        has = highest < np.iinfo(np.int64).max
        dummies = int(np.maximum(row[has] - highest[has] - 1, 0).sum())
        if dummies > MAX_DUMMIES:
            raise LayoutTooLarge(f"{self.num_boxes:,} boxes whose long edges pass {dummies:,} rows "
                                 f"(at most {MAX_DUMMIES:,})")

    # items ----------------------------------------------------------------------------------------------------
    def _items(self, row: np.ndarray) -> _Items:
        """Boxes and dummies, the links between adjacent rows, and each item's component."""
        it = _Items(row.tolist(), self.box_node.tolist())
        # Long edges into one box share its dummies (a bus down to it): a weight used by every layer is one
        # line with branches joining it, not one line per user side by side.
        bus: dict[tuple[int, int], int] = {}
        for p, c in self.box_edges:
            at = p
            for r in range(int(row[p]) + 1, int(row[c])):
                d = bus.get((c, r))
                if d is None:
                    d = bus[(c, r)] = it.add_dummy(r, int(self.box_node[c]))
                it.link(at, d, (p, c))
                at = d
            it.link(at, c, (p, c))
        it.components(self.num_boxes)
        return it

    def _place(self, it: _Items, widths: np.ndarray) -> int:
        """Set every item's column (it.x) and width; returns the picture's width."""
        it.w = [int(widths[i]) if i < self.num_boxes else 1 for i in range(len(it.row))]
        it.x = [0] * len(it.row)
        left = 1  # column 0 is room for a mark
        num_rows = max(it.row, default=-1) + 1
        for comp in it.component_order():
            members = it.by_component[comp]
            by_row: list[list[int]] = [[] for _ in range(num_rows)]
            for i in members:
                by_row[it.row[i]].append(i)
            for items in by_row:
                self._place_row(it, items, left)
            # A box centred under a parent near the left edge may start left of it: move the whole component
            # right instead of pushing that box off its parent's column.
            shift = max(0, left - min(it.x[i] for i in members))
            for i in members:
                it.x[i] += shift
            left = max(it.x[i] + it.w[i] for i in members) + COMPONENT_GAP
        return max(left - COMPONENT_GAP, 1)

    def _place_row(self, it: _Items, items: list[int], left: int) -> None:
        """Order one row's items of one component by their parents' mean centre and pack them (a box with no
        parent from `left` on; the others may start left of it, and the caller moves the component)."""
        boxes = self.num_boxes

        def wanted(i: int) -> float:
            ups = it.ups[i]
            if i >= boxes:  # a dummy continues the bus above it straight down, if there is one
                for u in ups:
                    if u >= boxes:
                        return float(it.x[u])
            return sum(it.x[u] + it.w[u] // 2 for u in ups) / len(ups) if ups else -1.0

        # Ties: boxes before dummies, so a chain of boxes runs straight and the lines beside it step aside.
        keys = {i: (wanted(i), i >= boxes, it.node[i], i) for i in items}
        # Columns where an edge leaves the row above: a box centred on one that is not its parent would have
        # that edge's line run into its own arrow, so it moves right.
        leaving = {it.x[u] + it.w[u] // 2 for i in items for u in it.ups[i]}
        end: int | None = None  # where the last item placed ends; None: the row is empty so far
        for i in sorted(items, key=keys.__getitem__):
            want = keys[i][0]
            at = None if end is None else end + (GAP if i < boxes else 1)  # a dummy needs no room for a mark
            if want < 0:
                x = left if at is None else max(at, left)
            else:
                x = int(round(want)) - it.w[i] // 2
                x = x if at is None else max(at, x)
            mine = {it.x[u] + it.w[u] // 2 for u in it.ups[i]}
            while x + it.w[i] // 2 in leaving and x + it.w[i] // 2 not in mine:
                x += 1
            it.x[i] = x
            end = x + it.w[i]

    # edges ----------------------------------------------------------------------------------------------------
    def _route(self, it: _Items, widths: np.ndarray, labels: list[str], layer: np.ndarray, width: int) -> Layout:
        """Assign tracks between rows, set each row's line, and draw the edges' cells."""
        num_rows = max(it.row, default=-1) + 1
        fans: list[dict[int, list[int]]] = [{} for _ in range(num_rows)]  # per row: upper item -> lower items
        for u, downs in enumerate(it.downs):
            if downs:
                fans[it.row[u]][u] = downs
        center = [it.x[i] + it.w[i] // 2 for i in range(len(it.row))]
        tracks: list[dict[int, int]] = []
        line_of_row = []
        y = 0
        for r in range(num_rows):
            line_of_row.append(y)
            assigned, count = _tracks(fans[r], center)
            tracks.append(assigned)
            y += 1 + (count + 1 if fans[r] else 0)
        height = y
        cells: dict[int, dict[int, int]] = {}
        budget = [MAX_CELLS]

        def mark(x: int, line: int, bits: int) -> None:
            row_cells = cells.setdefault(line, {})
            row_cells[x] = row_cells.get(x, 0) | bits
            budget[0] -= 1
            if budget[0] < 0:
                raise LayoutTooLarge(f"{self.num_boxes:,} boxes whose edges cross more than {MAX_CELLS:,} cells")

        corners: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for r in range(num_rows):
            top = line_of_row[r]
            bottom = line_of_row[r + 1] if r + 1 < num_rows else height  # the lower row's line
            for u, downs in sorted(fans[r].items()):
                px = center[u]
                for d in downs:
                    cx = center[d]
                    k = tracks[r].get(u, 0)
                    t = top + 1 + k
                    is_box = d < self.num_boxes
                    if px == cx:
                        for line in range(top + 1, bottom):
                            mark(px, line, UP | DOWN)
                        turn = [(px, top + 1)]
                    else:
                        for line in range(top + 1, t):
                            mark(px, line, UP | DOWN)
                        toward = RIGHT if cx > px else LEFT
                        back = LEFT if cx > px else RIGHT
                        mark(px, t, UP | toward)
                        for x in range(min(px, cx) + 1, max(px, cx)):
                            mark(x, t, LEFT | RIGHT)
                        mark(cx, t, DOWN | back)
                        for line in range(t + 1, bottom):
                            mark(cx, line, UP | DOWN)
                        turn = [(px, top + 1), (px, t), (cx, t)]
                    if is_box:
                        cells[bottom - 1][cx] = (cells[bottom - 1][cx] & ~(UP | DOWN)) | ARROW | UP
                    for edge in it.link_edges[(u, d)]:
                        corners.setdefault(edge, []).extend(turn)
                    if not is_box:
                        mark(cx, bottom, UP | DOWN)  # the dummy's own cell, on the lower row
        box_y = np.asarray([line_of_row[it.row[b]] for b in range(self.num_boxes)], dtype=np.int64)
        box_x = np.asarray(it.x[:self.num_boxes], dtype=np.int64)
        reading = np.lexsort((box_x, box_y)) if self.num_boxes else np.zeros(0, dtype=np.int64)
        rows: dict[int, list[int]] = {}
        for b in reading.tolist():
            rows.setdefault(int(box_y[b]), []).append(b)
        paths = tuple((p, c, _simplify(corners.get((p, c), []) + [(center[c], int(box_y[c]))]))
                      for p, c in self.box_edges)
        return Layout(self.f, tuple(labels), layer, box_x, box_y, widths, self.box_node, reading,
                      {k: tuple(v) for k, v in rows.items()}, cells, paths, width, height, self.is_folded)


def _tracks(fans: dict[int, list[int]], center: list[int]) -> tuple[dict[int, int], int]:
    """A track per fan whose children are not all straight below it, overlapping fans on different tracks
    (greedy by left end); returns (fan -> track, number of tracks)."""
    spans = []
    for u, downs in fans.items():
        xs = [center[d] for d in downs] + [center[u]]
        if any(x != center[u] for x in xs):
            spans.append((min(xs), max(xs), u))
    spans.sort()
    ends: list[int] = []  # per track, the last column used
    out = {}
    for lo, hi, u in spans:
        for k, end in enumerate(ends):
            if lo > end + 1:
                ends[k] = hi
                out[u] = k
                break
        else:
            out[u] = len(ends)
            ends.append(hi)
    return out, len(ends)


def _simplify(points: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Corners only: drop repeated points and points in the middle of a straight run."""
    out: list[tuple[int, int]] = []
    for p in points:
        if out and out[-1] == p:
            continue
        if len(out) >= 2:
            (ax, ay), (bx, by) = out[-2], out[-1]
            if (ax == bx == p[0]) or (ay == by == p[1]):
                out[-1] = p
                continue
        out.append(p)
    return tuple(out)


class _Items:
    """The layered graph: per item its row, node (for ordering), links up and down, and component."""

    def __init__(self, rows: list[int], nodes: list[int]) -> None:
        self.row, self.node = list(rows), list(nodes)
        self.ups: list[list[int]] = [[] for _ in rows]
        self.downs: list[list[int]] = [[] for _ in rows]
        self.link_edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self.x: list[int] = []
        self.w: list[int] = []

    def add_dummy(self, row: int, node: int) -> int:
        self.row.append(row)
        self.node.append(node)
        self.ups.append([])
        self.downs.append([])
        return len(self.row) - 1

    def link(self, upper: int, lower: int, edge: tuple[int, int]) -> None:
        if (upper, lower) not in self.link_edges:
            self.ups[lower].append(upper)
            self.downs[upper].append(lower)
            self.link_edges[(upper, lower)] = []
        self.link_edges[(upper, lower)].append(edge)

    def components(self, num_boxes: int) -> None:
        """Union-find over the links: `by_component` lists each component's items."""
        root = list(range(len(self.row)))

        def find(i: int) -> int:
            while root[i] != i:
                root[i] = root[root[i]]
                i = root[i]
            return i

        for (a, b) in self.link_edges:
            ra, rb = find(a), find(b)
            if ra != rb:
                root[max(ra, rb)] = min(ra, rb)
        self.by_component: dict[int, list[int]] = {}
        for i in range(len(self.row)):
            self.by_component.setdefault(find(i), []).append(i)
        self.first_node = {c: min(self.node[i] for i in items) for c, items in self.by_component.items()}

    def component_order(self) -> list[int]:
        """Components by their first node (the order the forward made them)."""
        return sorted(self.by_component, key=lambda c: (self.first_node[c], c))
