"""GraphCanvas: the graph panel, the backward graph drawn in the terminal, or (`v`) listed as GraphView lists it.

The drawing comes from tracer/views/layout.py (a pure layout of the backward graph's model, the one DOT and JSON
render: boxes in layers by topological_nr, edges in box-drawing cells, large graphs folded as docs/folding.md says);
this widget only paints the lines on screen from it, and styles each box by its nodes' state at the step. The cursor
stays a GraphView row (a node) in both views, so the screen selects and searches the same way whichever view is
shown.
"""
from __future__ import annotations

import os
import threading

import numpy as np
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.strip import Strip
from textual.timer import Timer

from agdb.tracer.replay.node_states import STATES, BoxStates
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.layout import Layout, LayoutTooLarge, drawn_model, layout, line_text

from .graph_view import GraphView

SYNC_NODES = 20_000
"""Traces up to this many nodes are laid out at once; larger ones in a worker thread, after the first paint."""
IDLE_BEFORE_LAYOUT = 0.4
"""Seconds without a step before the worker starts (NOTE [layout when idle])."""
HEADER_LINES = 1
"""Lines above the picture: what the marks mean."""


class GraphCanvas(GraphView):
    """The backward graph, drawn (boxes and edges, the running node and the ready queue marked) or listed."""

    COMPONENT_CLASSES = GraphView.COMPONENT_CLASSES | {"graph-canvas--edge", "graph-canvas--mark",
                                                       "graph-canvas--header"}
    DEFAULT_CSS = """
    GraphCanvas > .graph-canvas--edge { color: $text-muted; }
    GraphCanvas > .graph-canvas--mark { color: $accent; text-style: bold; }
    GraphCanvas > .graph-canvas--header { color: $text-muted; text-style: italic; }
    """
    BINDINGS = [
        Binding("v", "toggle_drawn", "Draw the graph / list its nodes"),
        Binding("less_than_sign,shift+left", "pan(-16)", "Scroll the drawn graph left"),
        Binding("greater_than_sign,shift+right", "pan(16)", "Scroll the drawn graph right"),
    ]

    drawn: var[bool] = var(True, init=False)
    """Whether the graph is drawn (True) or listed one node a row (False)."""

    class LaidOut(Message, bubble=False):
        """A worker finished laying out the graph."""

        def __init__(self, layout: Layout | None, why_not: str = "") -> None:
            super().__init__()
            self.picture = layout
            self.why_not = why_not  # when there is no layout: why (LayoutTooLarge's message)

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(trace, **kwargs)
        self.picture: Layout | None = None
        self._laying_out = False  # a worker is laying out the graph
        self.cannot_draw = ""  # why the graph is not drawn (LayoutTooLarge), once a layout gave up
        self._layout_timer: Timer | None = None  # starts that worker when the user pauses
        self._state: EngineState | None = None
        self.box_codes = np.zeros(0, dtype=np.int8)  # per box, its state code at the step
        self._boxes: BoxStates | None = None  # a folded picture's box states, kept up to date step by step
        self.marks: dict[int, str] = {}  # box -> its mark: ▶ running, 1..9 (or ●) its place in a ready queue
        self._drawn_strips: dict[object, Strip] = {}
        self._width = 0  # the panel's width and (cursor box, selected box), as of the last _refresh_drawn
        self._marked = (-1, -1)
        self._drawn_painted: dict[int, object] = {}
        self._click_scroll_hold = False  # the cursor moves to a clicked box: keep the scroll position

    def on_mount(self) -> None:
        self.set_class(self.drawn, "-drawn")
        self._show_header()

    def _show_header(self) -> None:
        """The list's column headers (a Static the screen puts above the panel) only while listing."""
        if self.parent is not None:
            for header in self.parent.query(".panel--header"):
                header.display = not self.drawn

    def on_show(self) -> None:
        self._marked = self._marked_boxes()
        super().on_show()

    def on_resize(self) -> None:
        super().on_resize()
        self._width = self.size.width
        if self.drawn:
            # Textual may paint the new size before this handler runs, with the old width kept above: a zoom or
            # a resized terminal would show the picture clipped at the old width until the next key.
            self._drawn_painted.clear()
            self.refresh()

    def on_click(self, event: Click) -> None:
        """In the drawing, a click puts the cursor on the box under the mouse (a click between boxes does nothing);
        a double-click also selects it, like Enter. In the list, a row, as in every panel (LazyList.on_click)."""
        if not self.drawn:
            return
        event.prevent_default()  # not LazyList's handler: its row under the mouse is no box
        offset = event.get_content_offset(self)
        box = self.box_at(self.scroll_offset.x + offset.x, self.scroll_offset.y + offset.y) if offset else -1
        if box < 0 or self.picture is None:
            return
        self.focus()
        # The drawing stays put: scrolling a half-shown box into view would move another box under the second
        # click of a double-click.
        self._click_scroll_hold = True
        try:
            self.cursor = self.row_of(int(self.picture.box_node[box]))
        finally:
            self._click_scroll_hold = False
        if event.chain == 2:
            self.action_select()

    def box_at(self, x: int, line: int) -> int:
        """The box drawn at column `x` of drawn line `line` (the header is line 0), or -1."""
        lay = self.picture
        if lay is None:
            return -1
        for b in lay.rows.get(line - HEADER_LINES, ()):
            if lay.box_x[b] <= x < lay.box_x[b] + lay.box_w[b]:
                return b
        return -1

    # -- state --------------------------------------------------------------------------------------------------
    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Take the state at a new step; keep the running node in view (drawn or listed)."""
        self._state = state
        super().show_state(state, selected)

    def rows_changed(self) -> None:
        if self.drawn:
            self._ensure_layout()  # may give up, and switch to the list
        if not self.drawn:
            super().rows_changed()
            return
        self._box_states()
        if self._postpone_if_hidden():
            return
        self._update_size(0)
        self._refresh_drawn()

    def _ensure_layout(self) -> None:
        if self.picture is not None:
            return
        if self.trace.num_nodes <= SYNC_NODES:
            try:
                self._take_picture(layout(drawn_model(self.trace)))
            except LayoutTooLarge as e:
                self._give_up(str(e))
        elif self._layout_timer is None:
            self._layout_timer = self.set_timer(IDLE_BEFORE_LAYOUT, self._lay_out)
        elif not self._laying_out:
            # NOTE [layout when idle]: the worker shares the GIL with the event loop, so a key pressed while it
            # runs takes up to twice as long; it starts once the user has paused (each step restarts the wait).
            self._layout_timer.reset()

    @work(thread=True, exclusive=True, group="graph-layout", exit_on_error=False)
    def _lay_out(self) -> None:
        """Lay out a large graph off the event loop (folding 1M nodes takes about half a second)."""
        self._laying_out = True
        _yield_cpu()
        try:
            self.post_message(self.LaidOut(layout(drawn_model(self.trace))))
        except LayoutTooLarge as e:
            self.post_message(self.LaidOut(None, str(e)))

    def _take_picture(self, picture: Layout) -> None:
        """Keep the layout; a cursor nobody moved yet goes to the top left box, where the drawing starts (in the
        list, row 0 is the newest node, which the drawing may put far to the right)."""
        self.picture = picture
        if self.cursor == 0 and picture.num_boxes:
            self.set_reactive(GraphCanvas.cursor, self.row_of(int(picture.box_node[picture.reading[0]])))

    def on_graph_canvas_laid_out(self, message: LaidOut) -> None:
        self._laying_out = False
        if message.picture is None:
            self._give_up(message.why_not)
            return
        self._take_picture(message.picture)
        if self.drawn:
            self._box_states()
            self._drawn_painted.clear()
            self._update_size(0)
            self.scroll_to_row(self.cursor)
            self._marked = self._marked_boxes()
            self.refresh()

    def _give_up(self, why: str) -> None:
        """The graph cannot be drawn: say why, and show the list."""
        self.cannot_draw = why
        self.notify(f"the graph panel lists the nodes: the graph is too large to draw ({why}); "
                    "e exports a picture (around the selected node, or folded)", severity="warning", timeout=10,
                    markup=False)
        self.drawn = False

    def _box_states(self) -> None:
        """Each box's state (a folded box: the state its nodes share, else running, ready or waiting if one of
        them is, else counted) and its mark."""
        lay = self.picture
        if lay is None:
            return
        if not lay.is_folded:
            self.box_codes = self.codes  # a box is a node
        else:
            if self._boxes is None or self._boxes.folding is not lay.folding:
                self._boxes = BoxStates(lay.folding)
            self.box_codes = self._boxes.update(self.filled)
        marks: dict[int, str] = {}
        state = self._state
        if state is not None:
            for q in state.ready_queues:
                for i, task in enumerate(q.tasks):
                    b = lay.box_of(task.node) if task.node is not None else -1
                    if b >= 0:
                        mark = str(i + 1) if i < 9 else "●"
                        if b not in marks or marks[b] > mark:
                            marks[b] = mark
            for _, node in state.running:
                b = lay.box_of(node)
                if b >= 0:
                    marks[b] = "▶"
        self.marks = marks

    # -- toggling and moving --------------------------------------------------------------------------------------
    def watch_drawn(self, drawn: bool) -> None:
        self.set_class(drawn, "-drawn")
        self._show_header()
        self._drawn_painted.clear()
        self.__dict__["_painted"] = {}
        if drawn:
            self.rows_changed()
        else:
            self._update_size(self.row_count())  # the list's size: as wide as the panel
            self.scroll_to(x=0, animate=False, force=True)
        self.scroll_to_row(self.cursor)
        self._marked = self._marked_boxes()
        self.refresh()

    def action_toggle_drawn(self) -> None:
        """Switch between the drawn graph and the list."""
        if not self.drawn and self.cannot_draw:
            self.notify(f"this graph is too large to draw: {self.cannot_draw}", severity="warning", markup=False)
            return
        self.drawn = not self.drawn

    def action_pan(self, delta: int) -> None:
        """Scroll the drawn graph sideways."""
        if self.drawn:
            self.scroll_to(x=max(0, self.scroll_offset.x + delta), animate=False, force=True)
            self._refresh_drawn()

    def action_cursor(self, delta: int) -> None:
        lay = self.picture
        if not self.drawn or lay is None or not lay.num_boxes:
            super().action_cursor(delta)
            return
        position = np.empty(lay.num_boxes, dtype=np.int64)
        position[lay.reading] = np.arange(lay.num_boxes)
        box = lay.box_of(self.node_at(self.cursor))
        at = int(position[box]) if box >= 0 else 0
        to = max(0, min(lay.num_boxes - 1, at + delta))
        if to != at or box < 0:
            self.cursor = self.row_of(int(lay.box_node[lay.reading[to]]))

    def watch_cursor(self, old: int, new: int) -> None:
        if not self.drawn:
            super().watch_cursor(old, new)
        elif not self._postpone_if_hidden():
            if not self._click_scroll_hold:
                self.scroll_to_row(new)
            self._refresh_drawn()

    def scroll_to_row(self, index: int) -> None:
        """Scroll so that row `index`'s node is visible: its row in the list, its box in the drawing."""
        lay = self.picture
        if not self.drawn:
            super().scroll_to_row(index)
            return
        if lay is None or not 0 <= index < self.row_count():
            return
        box = lay.box_of(self.node_at(index))
        if box < 0:
            return
        line = int(lay.box_y[box]) + HEADER_LINES
        left, right = int(lay.box_x[box]) - 1, int(lay.box_x[box] + lay.box_w[box])
        top, height = self.scroll_offset.y, max(self.scrollable_content_region.height, 1)
        x0, width = self.scroll_offset.x, max(self.scrollable_content_region.width, 1)
        y = top if top <= line < top + height else max(0, line - height // 2)
        x = x0 if x0 <= left and right <= x0 + width else max(0, (left + right) // 2 - width // 2)
        if (x, y) != (x0, top):
            self.scroll_to(x=x, y=y, animate=False, force=True)  # force: overflow-x is hidden

    def refresh_rows(self) -> None:
        if self.drawn:
            self._refresh_drawn()
        else:
            super().refresh_rows()

    # -- painting -----------------------------------------------------------------------------------------------
    def _update_size(self, count: int) -> None:
        if not self.drawn:
            super()._update_size(count)
            return
        lay = self.picture
        region = self.scrollable_content_region
        width = (lay.width + 1) if lay is not None else 0
        height = (lay.height + HEADER_LINES) if lay is not None else HEADER_LINES
        size = Size(max(width, region.width), max(height, region.height))
        if size != self.virtual_size:
            self.set_reactive(GraphView.virtual_size, size)
            self._scroll_update(size)

    def _line_key(self, index: int, width: int) -> object:
        if not self.drawn:
            return super()._line_key(index, width)
        return self._drawn_key(index, width, self.scroll_offset.x, self._marked_boxes())

    def _marked_boxes(self) -> tuple[int, int]:
        """(the cursor's box, the selected node's box), -1 for none."""
        lay = self.picture
        if lay is None:
            return -1, -1
        cursor_box = lay.box_of(self.node_at(self.cursor)) if 0 <= self.cursor < self.row_count() else -1
        selected = self.selected_node
        return cursor_box, (lay.box_of(selected) if selected is not None else -1)

    def _drawn_key(self, line: int, width: int, x0: int, marked: tuple[int, int]) -> object:
        """Everything drawn line `line` shows at the scroll position: equal keys mean equal strips."""
        lay = self.picture
        if lay is None or line < HEADER_LINES:
            return line, x0, width, lay is None, lay is not None and lay.is_folded
        cursor_box, selected_box = marked
        codes, marks = self.box_codes, self.marks
        boxes = tuple((b, int(codes[b]), marks.get(b, ""), b == cursor_box, b == selected_box)
                      for b in lay.rows.get(line - HEADER_LINES, ()))
        return line, x0, width, boxes

    def _refresh_drawn(self) -> None:
        """Repaint the drawn lines on screen whose key changed (NOTE [row repaint] in lazy_list.py)."""
        offset = self.scroll_offset
        height = max(self.scrollable_content_region.height, 1)
        width = self._width = self.size.width
        marked = self._marked = self._marked_boxes()
        painted = self._drawn_painted
        for line in range(offset.y, offset.y + height):
            if painted.get(line) != self._drawn_key(line, width, offset.x, marked):
                self.refresh_line(line)

    def render_line(self, y: int) -> Strip:
        if not self.drawn:
            return super().render_line(y)
        offset = self.scroll_offset
        line = offset.y + y
        # Asked once per line on every repaint: the width and the marked boxes are kept, not recomputed
        # (reading `size` alone costs ~40 us).
        width = self._width or self.size.width
        key = self._drawn_key(line, width, offset.x, self._marked)
        if len(self._drawn_painted) > 4096:
            self._drawn_painted.clear()
        self._drawn_painted[line] = key
        strip = self._drawn_strips.get(key)
        if strip is None:
            if len(self._drawn_strips) > 4096:
                self._drawn_strips.clear()
            strip = self._drawn_strips[key] = self._paint(line, width)
        return strip

    def notify_style_update(self) -> None:
        self._drawn_strips = {}
        self._drawn_painted = {}
        super().notify_style_update()

    def _paint(self, line: int, width: int) -> Strip:
        """One drawn line: edges, then boxes styled by state, their marks, the cursor and the selection."""
        base, cursor_style, selected_style = self.line_styles()
        lay = self.picture
        if line < HEADER_LINES:
            text = Text(self._header(), style=self.component_style("graph-canvas--header"))
        elif lay is None:
            text = Text()
        else:
            text = self._paint_picture(lay, line - HEADER_LINES, width, cursor_style, selected_style)
        text.end = ""
        text.no_wrap = True
        text.truncate(width, pad=True)
        return Strip(list(text.render(self.app.console)), width).crop(0, width).apply_style(base)

    def _header(self) -> str:
        lay = self.picture
        if lay is None:
            return f"laying out {self.trace.num_nodes:,} nodes…"
        folded = f"{self.trace.num_nodes:,} nodes in {lay.num_boxes:,} boxes · " if lay.is_folded else ""
        return f"{folded}running ▶ · ready 1-9, in pop order · sN seq_nr · v: list"

    def _paint_picture(self, lay: Layout, y: int, width: int, cursor_style, selected_style) -> Text:
        x0 = self.scroll_offset.x
        chars = list(line_text(lay, y, x0, width))
        boxes = lay.rows.get(y, ())
        for b in boxes:
            mark = self.marks.get(b)
            at = int(lay.box_x[b]) - 1 - x0
            if mark and 0 <= at < width:
                chars[at] = mark
        text = Text("".join(chars), style=self.component_style("graph-canvas--edge"))
        cursor_box = lay.box_of(self.node_at(self.cursor)) if 0 <= self.cursor < self.row_count() else -1
        selected_box = lay.box_of(self.selected_node) if self.selected_node is not None else -1
        for b in boxes:
            lo, hi = int(lay.box_x[b]) - x0, int(lay.box_x[b] + lay.box_w[b]) - x0
            if hi <= 0 or lo >= width:
                continue
            lo, hi = max(lo, 0), min(hi, width)
            text.stylize(self.component_style(f"graph-view--{STATES[int(self.box_codes[b])]}"), lo, hi)
            if b == selected_box:
                text.stylize(selected_style, lo, hi)
            if b == cursor_box:
                text.stylize(cursor_style, lo, hi)
            if b in self.marks and lo >= 1:
                text.stylize(self.component_style("graph-canvas--mark"), lo - 1, lo)
        return text


def _yield_cpu() -> None:
    """Lower this thread's CPU priority (Linux: a thread is a task with its own nice value), so that the keys
    pressed while a large graph is laid out keep their speed on a busy machine; elsewhere, nothing."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass
