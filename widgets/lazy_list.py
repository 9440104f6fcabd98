"""LazyList: a line-API list that renders only the rows on screen, for panels of any length."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from agdb.tracer.replay.replay import EngineState

_BLANK = ("blank",)
"""The painted key of a line below the last row."""


class LazyList(ScrollView, can_focus=True):
    """Rows made on demand by `row_text(i)`; a cursor row; Enter posts `NodeSelected` or `Selected`.

    A panel whose rows show nodes says which in `node_at_row`; the row of `selected_node` (the node the
    user chose in any panel) is marked, so a selection can be followed from panel to panel: with a colour,
    and with SELECTED_MARK in the gutter (the colour alone looked like an unfocused panel's cursor).
    """

    GUTTER = 1
    """Columns before every row (and header), for SELECTED_MARK."""
    SELECTED_MARK = "▶"

    COMPONENT_CLASSES = {"lazy-list--cursor", "lazy-list--selected"}
    DEFAULT_CSS = """
    LazyList { height: 1fr; overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 1; }
    LazyList > .lazy-list--cursor { background: $accent 30%; }
    LazyList:focus > .lazy-list--cursor { background: $accent 60%; }
    LazyList > .lazy-list--selected { text-style: underline; background: $secondary 25%; }
    """
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-10)", "Page up", show=False),
        Binding("pagedown", "cursor(10)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First row", show=False),
        Binding("end", "cursor_to(-1)", "Last row", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    cursor: reactive[int] = reactive(0, repaint=False)
    """Index of the highlighted row. Its watcher repaints the rows that changed, not the whole panel."""
    selected_node: reactive[int | None] = reactive(None, repaint=False)
    """The node chosen in some panel; rows showing it are marked (repainted by the watcher, too)."""

    class Selected(Message):
        """The user chose row `index` of `view`."""

        def __init__(self, view: LazyList, index: int) -> None:
            super().__init__()
            self.view = view
            self.index = index

    class NodeSelected(Message):
        """The user chose a row that shows node `node` (an index into the trace's node table)."""

        def __init__(self, node: int) -> None:
            super().__init__()
            self.node = node

    def show_state(self, state: EngineState, selected: int | None) -> None:
        """Take the engine's state at a new step (and the selected node); every panel's one way in."""

    def header(self) -> str:
        """Column headers the screen shows above the rows, aligned with them ("" for none)."""
        return ""

    def fit_columns(self, width: int) -> bool:
        """Fit the columns to rows `width` characters wide (past the gutter); whether the layout changed.

        Panels whose columns are sized for the trace's longest names shrink them here, so that a narrow terminal
        still shows the columns to their right (a source line, a seq_nr). By default the columns are fixed.
        """
        return False

    def row_count(self) -> int:
        """How many rows there are now."""
        return 0

    def row_text(self, index: int) -> Text:
        """The text of row `index` (0 <= index < row_count())."""
        return Text()

    def node_at_row(self, index: int) -> int | None:
        """The node row `index` shows, if it shows one."""
        return None

    def rows_changed(self) -> None:
        """Call after the data behind the rows changed."""
        count = self.row_count()
        if self._postpone_if_hidden():
            if count and self.cursor >= count:
                self.cursor = count - 1
            return
        self._update_size(count)
        if count and self.cursor >= count:
            self.cursor = count - 1
        self.refresh_rows()

    def _update_size(self, count: int) -> None:
        # NOTE [steady scrollbar]: a scrollbar that appears or disappears relayouts the whole screen (~10 ms),
        # as a queue's rows cross the panel's height while stepping. So the bar is always there
        # (overflow-y: scroll), and the scroll range is at least the panel's height: with nothing to
        # scroll, Textual draws the bar as an empty track.
        size = Size(self.size.width, max(count, self.scrollable_content_region.height))
        if size != self.virtual_size:
            # Assigning virtual_size would relayout the whole screen (it is a layout reactive), yet a panel's
            # box does not depend on how many rows it holds: update the scroll range and scrollbars only.
            self.set_reactive(LazyList.virtual_size, size)
            self._scroll_update(size)

    def on_resize(self) -> None:
        if self.fit_columns(max(self.scrollable_content_region.width - self.GUTTER, 1)):
            self.__dict__["_painted"] = {}
            self.__dict__["_strips"] = {}
            if self.parent is not None:  # the column headers the screen put above the rows
                for header in self.parent.query(".panel--header"):
                    header.update(Text(" " * self.GUTTER + self.header()))
            self.refresh()
        self._update_size(self.row_count())
        self.scroll_to_row(self.cursor)  # a zoom, an unzoom or a smaller terminal keeps the cursor's row in view

    def _postpone_if_hidden(self) -> bool:
        """Whether the panel is off screen (in a tab not chosen, or hidden); if so it repaints when shown.

        NOTE [hidden panels]: a refresh of a widget that is not on screen makes Textual's compositor rebuild
        its whole map of the screen (~1 ms) at the next repaint, on every step, for a panel nobody sees. So a
        hidden panel keeps its data up to date but asks for no repaint until Textual sends it Show.
        """
        if self.is_on_screen:
            return False
        self.__dict__["_stale"] = True
        return True

    def on_show(self) -> None:
        if self.__dict__.pop("_stale", False):
            self._update_size(self.row_count())
            self.scroll_to_row(self.cursor)
            self.refresh()

    def refresh_rows(self) -> None:
        """Repaint the rows on screen whose content changed (all of them for a panel without row_key).

        NOTE [row repaint]: a step changes a handful of rows; repainting only those keeps Textual's
        compositor from re-rendering every line of every panel on each key press.
        """
        top = self.scroll_offset.y
        height = max(self.scrollable_content_region.height, 1)
        width = self.size.width
        painted = self.__dict__.setdefault("_painted", {})
        count = self.row_count()
        # Every line on screen, past the last row too: a row that vanished at this step must be painted blank.
        for index in range(top, top + height):
            key = self._line_key(index, width) if index < count else _BLANK
            if key is None:
                painted.clear()  # what the whole repaint draws is recorded again as it is drawn
                self.refresh()
                return
            if painted.get(index) != key:
                self.refresh_line(index)

    def row_key(self, index: int) -> object:
        """A hashable summary of everything row `index` shows, or None; equal keys mean equal rows.

        A panel that defines it has its rendered rows cached: a step repaints only rows whose key changed.
        """
        return None

    def component_style(self, name: str) -> Style:
        """get_component_rich_style(name), looked up once per style change: rows ask for it per line."""
        cache = self.__dict__.setdefault("_rich_component_styles", {})
        style = cache.get(name)
        if style is None:
            style = cache[name] = self.get_component_rich_style(name)
        return style

    def notify_style_update(self) -> None:
        self._styles = None
        self._rich_component_styles: dict = {}
        self._strips: dict = {}
        self._painted: dict = {}  # a style change repaints everything
        super().notify_style_update()

    def line_styles(self) -> tuple:
        """(base, cursor, selected) rich styles, looked up once per style change, not once per line."""
        styles = getattr(self, "_styles", None)
        if styles is None:
            styles = self._styles = (self.rich_style, self.component_style("lazy-list--cursor"),
                                     self.component_style("lazy-list--selected"))
        return styles

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.size.width
        base, cursor, selected = self.line_styles()
        if index >= self.row_count():
            self.__dict__.setdefault("_painted", {})[index] = _BLANK
            return Strip.blank(width, base)
        is_selected = self.selected_node is not None and self.node_at_row(index) == self.selected_node
        key = self._line_key(index, width)
        if key is not None:
            painted = self.__dict__.setdefault("_painted", {})
            if len(painted) > 4096:
                painted.clear()
            painted[index] = key
            strips = self.__dict__.setdefault("_strips", {})
            strip = strips.get(key)
            if strip is None:
                if len(strips) > 8192:
                    strips.clear()
                strip = strips[key] = self._render_row(index, width, is_selected)
            return strip
        self.__dict__.setdefault("_painted", {}).pop(index, None)  # drawn without a key: no record of it
        return self._render_row(index, width, is_selected)

    def _line_key(self, index: int, width: int) -> object:
        """Everything a painted line depends on, or None when the panel has no row_key."""
        key = self.row_key(index)
        if key is None:
            return None
        is_selected = self.selected_node is not None and self.node_at_row(index) == self.selected_node
        return key, width, is_selected, index == self.cursor

    def _render_row(self, index: int, width: int, is_selected: bool) -> Strip:
        base, cursor, selected = self.line_styles()
        text = Text(self.SELECTED_MARK if is_selected else " ", end="")
        text.append_text(self.row_text(index))
        text.end = ""
        text.no_wrap = True
        text.truncate(width, overflow="ellipsis", pad=True)
        if is_selected:
            text.stylize(selected)
        if index == self.cursor:
            text.stylize(cursor)
        segments = list(text.render(self.app.console))
        return Strip(segments, width).crop(0, width).apply_style(base)

    def watch_cursor(self, old: int, new: int) -> None:
        if not self._postpone_if_hidden():
            self.scroll_to_row(new)
            self.refresh_rows()

    def watch_selected_node(self) -> None:
        if not self._postpone_if_hidden():
            self.refresh_rows()

    def scroll_to_row(self, index: int) -> None:
        """Scroll so that row `index` is visible."""
        top, height = self.scroll_offset.y, max(self.scrollable_content_region.height, 1)
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        count = self.row_count()
        if count:
            self.cursor = max(0, min(count - 1, self.cursor + delta))

    def action_cursor_to(self, index: int) -> None:
        """Put the cursor on row `index` (negative counts from the end)."""
        count = self.row_count()
        if count:
            self.cursor = max(0, min(count - 1, index if index >= 0 else count + index))

    def on_click(self, event: Click) -> None:
        """A click puts the cursor on the row under the mouse; a double-click also selects it, like Enter."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = self.scroll_offset.y + offset.y
        if not 0 <= index < self.row_count():
            return
        self.focus()
        self.cursor = index
        if event.chain == 2:
            self.action_select()

    def action_select(self) -> None:
        if not self.row_count():
            return
        node = self.node_at_row(self.cursor)
        self.post_message(self.Selected(self, self.cursor) if node is None else self.NodeSelected(node))
