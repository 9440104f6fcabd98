"""StepScreen: the main screen. It owns `step` and the selected node, and routes messages between panels."""
from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.events import Resize
from textual.reactive import reactive, var
from textual.screen import Screen
from textual.widgets import Input, Static, Tab, Tabs
from textual.worker import get_current_worker

from agdb.tracer.replay import breakpoints as bp_mod
from agdb.tracer.replay.node_states import STATES
from agdb.tracer.replay.replay import EngineState, Replay
from agdb.tracer.replay.rows import state_before
from agdb.tracer.replay.search import find_nodes
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels
from agdb.widgets.culprits import CulpritsView
from agdb.widgets.event_log import EventLog
from agdb.widgets.forward_backward import ForwardBackwardView
from agdb.widgets.graph_canvas import GraphCanvas
from agdb.widgets.graph_view import GraphView
from agdb.widgets.joint_graph import JointGraphView
from agdb.widgets.key_hints import KeyHints
from agdb.widgets.lazy_list import LazyList
from agdb.widgets.node_inspector import NodeInspector
from agdb.widgets.timeline import Timeline

from ..messages import BreakpointHit, ExportFailed, GraphExported, NodeFollowed, StepChanged
from ..tracebacks import user_frames
from .help import HelpScreen
from .panels import BY_ID, PANELS, WIDE_MIN, PanelLayout
from .source import show_source

if TYPE_CHECKING:
    from ..export import ExportRule

_WARM_QUIET_S = 0.3
"""The replay's warm-up works only while the step has stayed put this long (StepScreen._warm_replay)."""

ERROR_TIMEOUT = 24 * 3600.0
"""Seconds the script's error stays on screen: until the user clicks it away, in practice."""
_PROMPTS = {"goto": "go to step…",
            "search": "search nodes: a name (mul, AccumulateGrad), a leaf (fc1.weight) or a seq_nr (12)",
            "break": "break on: node NAME | seq N | push [NAME] | nan | error",
            "export": "export the graph at this step to FILE.svg, .png, .pdf, .dot or .json"}


class StepScreen(Screen[None]):
    """Step through a trace: graph, ready queues, dependencies, pruning, forward↔backward, culprits, events."""

    BINDINGS = [
        # Shown in the key hints at the bottom (short words there; the help screen gives the tooltip).
        Binding("left,h", "step(-1)", "Back", tooltip="Previous event", key_display="←"),
        Binding("right,l", "step(1)", "Next", tooltip="Next event", key_display="→"),
        Binding("n", "node(1)", "Next node", tooltip="Next node run"),
        Binding("slash", "ask('search')", "Search", tooltip="Search nodes by name or seq_nr"),
        Binding("colon", "ask('goto')", "Go to", tooltip="Go to step"),
        Binding("question_mark", "help", "Help", tooltip="Help: every key, and a legend of states and marks"),
        Binding("q", "app.quit", "Quit"),
        Binding("b", "ask('break')", "Break", tooltip="Add a breakpoint"),
        Binding("z", "zoom", "Zoom", tooltip="Zoom the focused panel (again to restore)"),
        # In the help screen and the command palette only.
        Binding("N,p", "node(-1)", "Previous node run", show=False),
        Binding("g", "jump(0)", "Start (first event)", show=False),
        Binding("G", "jump(-1)", "End (last event)", show=False),
        Binding("right_square_bracket", "search_next(1)", "Next search match", show=False),
        Binding("left_square_bracket", "search_next(-1)", "Previous search match", show=False),
        Binding("c", "run_to_breakpoint(1)", "Run to the next breakpoint", show=False),
        Binding("C", "run_to_breakpoint(-1)", "Run back to the previous breakpoint", show=False),
        Binding("B", "clear_breakpoints", "Clear breakpoints", show=False),
        Binding("i", "inspect_running", "Select the running node", show=False),
        Binding("e", "ask('export')", "Export the graph at this step (Graphviz)", show=False),
        Binding("escape", "escape", "Close the source view, or clear the selection", show=False),
        *[Binding(p.key, f"show_panel('{p.id}')", f"Show the {p.title} panel", show=False) for p in PANELS],
        Binding("x", "hide_panel", "Hide the focused panel", show=False),
        Binding("X", "show_all_panels", "Show every panel", show=False),
    ]

    ALLOW_IN_MAXIMIZED_VIEW = "#title, #prompt, Timeline, KeyHints"
    """A zoomed panel keeps the step and the keys on screen."""

    step: reactive[int] = reactive(0, init=False, repaint=False)
    """The event the screen shows (0-based). No repaint of its own: each panel repaints what changed."""
    state: var[EngineState | None] = var(None)
    """The engine's state after `step`."""
    selected_node: var[int | None] = var(None)
    """The node the user chose in some panel; every panel marks it and the inspector shows it."""

    def __init__(self, trace: Trace, title: str = "", script_error: str = "",
                 source_files: tuple[str, ...] = (), export_rule: ExportRule | None = None) -> None:
        super().__init__()
        self.trace = trace
        self.export_rule = export_rule  # where `e` may write (None: anywhere); `agdb serve` confines or stops it
        self.source_files = source_files  # files the user named: the source view may read them (old traces only)
        self.replay = Replay(trace)
        self.title_text = title
        self.script_error = script_error
        self.node_steps = trace.steps_of(Kind.NODE_STARTED)
        self.panel_widgets: dict[str, LazyList] = {}  # by panel id; a panel whose events are missing has none
        self.layout_state = PanelLayout()
        self.breakpoints: list[bp_mod.Breakpoint] = []
        self.matches = np.zeros(0, dtype=np.int64)  # nodes found by the last search, in graph row order
        self.prompt_mode = "goto"
        self.labels = NodeLabels(trace)

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text), id="title")  # Text: a path is not markup
        with Vertical(id="panels"):
            for panel in PANELS:
                if panel is next(p for p in PANELS if p.lower):
                    # The tab bar sits between the upper and lower panels (NOTE [panel layout]).
                    yield Tabs(*[Tab(p.tab, id=f"tab-{p.id}") for p in PANELS], id="tabs")
                with Vertical(id=f"panel-{panel.id}", classes="panel -lower" if panel.lower else "panel") as box:
                    box.border_title = panel.title
                    notice = panel.notice(self.trace)
                    if notice.startswith("this trace's source"):  # nothing to show: say why, not an empty list
                        yield Static(Text(notice), id=panel.id, classes="panel--missing")
                        continue
                    if notice:
                        box.border_title = f"{panel.title} · {notice}"
                    widget = self.panel_widgets[panel.id] = panel.widget(self.trace, id=panel.id)
                    if widget.header():  # past the rows' gutter, aligned with their columns
                        yield Static(Text(" " * widget.GUTTER + widget.header()), classes="panel--header")
                    yield widget
                    yield from (Static(id=extra) for extra in panel.beside)
        yield Input(id="prompt", classes="-hidden")
        yield Timeline(self.trace, id="timeline")
        # ctrl+p is the App's (the command palette): named here too, it is the way to every other action.
        yield KeyHints([*(b for b in self.BINDINGS if b.show), Binding("ctrl+p", "", "Palette")], id="key-hints")

    def _raised_node(self) -> int | None:
        """The node whose backward raised first in the trace, if one did."""
        for step in self.trace.steps_of(Kind.ERROR_RAISED).tolist():
            node = self.trace.event_node(step)
            if node >= 0:
                return node
        return None

    def _panel(self, panel_id: str) -> LazyList | None:
        """The widget of a panel, or None when the trace's source cannot provide its events."""
        return self.panel_widgets.get(panel_id)

    def on_mount(self) -> None:
        if self.script_error:
            # Kept until clicked: an error read halfway through is no use.
            self.notify(user_frames(self.script_error), title="the script did not finish (click to dismiss)",
                        severity="error", timeout=ERROR_TIMEOUT, markup=False)
        self._relayout(self.size.width, self.size.height)
        self.step = 0
        self.watch_step(0)
        self.query_one(f"#{PANELS[0].id}").focus()
        raised = self._raised_node()
        if raised is not None:  # the first question about a failed backward: which node, and with what
            self.selected_node = raised
        # NOTE [collector and repaint]: the trace's indexes live as long as the screen, so the collector
        # need not rescan them (a full collection over a 1M-event trace's objects costs ~200 ms, a stall in
        # the middle of a step); and young collections every 700 allocations put a 100 ms p99 on a step.
        # Both are undone when the screen goes.
        gc.freeze()
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(20_000, 50, 50)
        # After the first paint: the worker thread would hold the GIL for part of the first layout.
        self.call_after_refresh(self._warm_replay)

    def on_unmount(self) -> None:
        gc.set_threshold(*self._gc_threshold)
        gc.unfreeze()

    @work(thread=True, exclusive=True, group="warm", exit_on_error=False)
    def _warm_replay(self) -> None:
        """Build the replay's queue checkpoints ahead of the user's jumps (NOTE [lazy checkpoints])."""
        worker = get_current_worker()
        moved = [self.step, time.monotonic()]  # the step last seen, and when it was first seen

        def wait_for_quiet() -> None:
            # The worker shares the GIL with the UI: a step key that waits for a chunk misses its frame. So each
            # chunk waits until the step has stayed put for _WARM_QUIET_S (the first one too: the first key).
            time.sleep(0.0005)  # hand the GIL over at once if the UI thread is waiting for it
            while not worker.is_cancelled:
                now = time.monotonic()
                if self.step != moved[0]:
                    moved[:] = [self.step, now]
                elif now - moved[1] >= _WARM_QUIET_S:
                    return
                time.sleep(0.02)

        self.replay.warm(should_stop=lambda: worker.is_cancelled, between=wait_for_quiet)
        graph = self._panel("graph")
        if isinstance(graph, GraphView) and not worker.is_cancelled:
            wait_for_quiet()  # the node states' history takes ~0.1 s for 1M nodes: not in the middle of keys
            graph.warm()
        gc.freeze()  # the checkpoints just built live as long as the screen: NOTE [collector and repaint]

    def on_resize(self, event: Resize) -> None:
        self._relayout(event.size.width, event.size.height)

    def _relayout(self, width: int, height: int) -> None:
        self.layout_state.wide = width >= WIDE_MIN[0] and height >= WIDE_MIN[1]
        self.layout_state.apply(self.query_one("#panels", Vertical), self.query_one(Tabs))

    # -- state flowing down ---------------------------------------------------------------------------------
    def watch_step(self, step: int) -> None:
        self.state = self.replay.state_at(step)
        self.post_message(StepChanged(step))

    def watch_state(self, state: EngineState | None) -> None:
        if state is None:
            return
        selected = self.selected_node
        for panel_id, widget in self.panel_widgets.items():
            if BY_ID[panel_id].compares_steps:
                widget.show_state(state, selected, before=state_before(self.replay, state))
            else:
                widget.show_state(state, selected)
        self.query_one(Timeline).show(state, self.labels)

    def watch_selected_node(self, node: int | None) -> None:
        for view in self.query(LazyList):
            view.selected_node = node
        graph, fwd = self._panel("graph"), self._panel("fwd")
        if node is not None and isinstance(graph, GraphView):
            graph.cursor = graph.row_of(node)
        if node is not None and isinstance(fwd, ForwardBackwardView):
            fwd.cursor = fwd.row_of_node(node)
        if self.state is not None:
            for panel in PANELS:
                widget = self._panel(panel.id)
                if panel.follows_selection and widget is not None:
                    widget.show_state(self.state, node)
        self.post_message(NodeFollowed(node))

    # -- actions: moving in time ----------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        """Move `delta` events forward or back."""
        self.step = max(0, min(len(self.trace) - 1, self.step + delta))

    def action_jump(self, step: int) -> None:
        """Go to `step` (negative counts from the end)."""
        self.step = step if step >= 0 else len(self.trace) + step

    def action_node(self, direction: int) -> None:
        """Go to the next (or previous) step at which a node starts running."""
        steps = self.node_steps
        if direction > 0:
            i = int(np.searchsorted(steps, self.step, side="right"))
            if i < len(steps):
                self.step = int(steps[i])
        else:
            i = int(np.searchsorted(steps, self.step, side="left")) - 1
            if i >= 0:
                self.step = int(steps[i])

    def action_run_to_breakpoint(self, direction: int) -> None:
        """Run forward (or back) to the nearest step where a breakpoint stops."""
        if not self.breakpoints:
            self.notify("no breakpoint is set: press b to add one", severity="warning", markup=False)
            return
        hit = bp_mod.next_hit(self.trace, self.breakpoints, self.step, direction)
        if hit is None:
            where = "after" if direction > 0 else "before"
            self.notify(f"no breakpoint stops {where} step {self.step}", severity="warning", markup=False)
            return
        self.step = hit[0]
        self.post_message(BreakpointHit(hit[0], hit[1]))

    def action_clear_breakpoints(self) -> None:
        """Remove every breakpoint."""
        count = len(self.breakpoints)
        self.breakpoints = []
        self.notify(f"cleared {count} breakpoint(s)", markup=False)

    # -- actions: finding and selecting nodes ---------------------------------------------------------------
    def action_ask(self, mode: str) -> None:
        """Open the prompt for a step number, a search or a breakpoint."""
        if mode == "export" and self.export_rule is not None and self.export_rule.is_off:
            from ..export import EXPORT_OFF

            self.notify(EXPORT_OFF, title="export", severity="warning", markup=False)
            return
        self.prompt_mode = mode
        box = self.query_one("#prompt", Input)
        box.placeholder = _PROMPTS[mode]
        box.value = self._default_export_name() if mode == "export" else ""
        box.remove_class("-hidden")
        box.focus()

    def action_search_next(self, direction: int) -> None:
        """Select the next (or previous) node the last search found, in graph order."""
        if not len(self.matches):
            self.notify("no search matches: press / to search", severity="warning", markup=False)
            return
        graph = self._panel("graph")
        if not isinstance(graph, GraphView):
            return
        rows = graph.trace.num_nodes - 1 - self.matches  # graph rows of the matches, ascending
        current = graph.cursor
        if direction > 0:
            i = int(np.searchsorted(rows, current, side="right"))
            row = int(rows[i % len(rows)])
        else:
            i = int(np.searchsorted(rows, current, side="left")) - 1
            row = int(rows[i % len(rows)])
        self.selected_node = graph.node_at(row)

    def action_inspect_running(self) -> None:
        """Select the node running at this step (the innermost one)."""
        if self.state is not None and self.state.running:
            self.selected_node = self.state.running[-1][1]
        else:
            self.notify("no node is running at this step", severity="warning", markup=False)

    def action_escape(self) -> None:
        """Close the culprits' source view if it is open, else clear the selection."""
        source = self.query("#source")
        if source and source.first().has_class("-open"):
            source.first().remove_class("-open")
            culprits = self._panel("culprits")
            if culprits is not None:
                culprits.focus()
            return
        self.action_clear_selection()

    def action_clear_selection(self) -> None:
        """Forget the selected node (and close the prompt if it is open)."""
        self.query_one("#prompt", Input).add_class("-hidden")
        self.selected_node = None

    # -- actions: panels and help ---------------------------------------------------------------------------
    def action_show_panel(self, panel_id: str) -> None:
        """Bring a panel on screen (showing it again if hidden) and focus it."""
        self.layout_state.choose(panel_id)
        self._relayout(self.size.width, self.size.height)
        self.query_one(f"#{panel_id}").focus()

    def action_hide_panel(self) -> None:
        """Hide the panel that has the focus; its digit key shows it again."""
        panel_id = self._focused_panel()
        if panel_id is None:
            return
        self.layout_state.hide(panel_id)
        self._relayout(self.size.width, self.size.height)
        self.notify(f"hid the {BY_ID[panel_id].title} panel; X shows every panel", markup=False)

    def action_show_all_panels(self) -> None:
        """Show every hidden panel again."""
        self.layout_state.hidden.clear()
        self._relayout(self.size.width, self.size.height)

    def action_zoom(self) -> None:
        """Let the focused panel fill the screen, or restore the layout."""
        if self.maximized is not None:
            self.minimize()
            return
        panel_id = self._focused_panel()
        if panel_id is not None and not self.layout_state.is_displayed(panel_id):
            # A panel key typed just before: the focus moves to its panel after this key is handled.
            panel_id = self.layout_state.active
        if panel_id is not None:
            # The panel's box, not its list: the border title and the column headers above the rows stay.
            self.maximized = self.query_one(f"#panel-{panel_id}")

    def action_help(self) -> None:
        """Show every key, and the legend of states in the graph panel's colours."""
        graph = self._panel("graph")
        styles = ({s: graph.component_style(f"graph-view--{s}") for s in STATES}
                  if isinstance(graph, GraphView) else {})
        more = [("Graph panel", GraphCanvas.BINDINGS), ("Every list panel", LazyList.BINDINGS),
                ("Anywhere (o: agdb tui only; Escape also cancels a recording)", self.app.BINDINGS)]
        self.app.push_screen(HelpScreen(self.BINDINGS, styles, more))

    def _focused_panel(self) -> str | None:
        widget = self.focused
        while widget is not None and not (widget.id or "").startswith("panel-"):
            widget = widget.parent  # type: ignore[assignment]
        return widget.id.removeprefix("panel-") if widget is not None and widget.id else None

    # -- routing --------------------------------------------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#prompt", Input).add_class("-hidden")
        handler = {"goto": self._go_to, "search": self._search, "break": self._add_breakpoint,
                   "export": self._export}[self.prompt_mode]
        handler(event.value.strip())
        self.query_one(f"#{PANELS[0].id}").focus()

    def _go_to(self, text: str) -> None:
        try:
            wanted = int(text)
        except ValueError:
            self.notify(f"not a step number: {text!r}", severity="warning", markup=False)
            return
        if not 0 <= wanted < len(self.trace):
            self.notify(f"step {wanted} is outside 0..{len(self.trace) - 1}", severity="warning", markup=False)
            return
        self.step = wanted

    def _search(self, text: str) -> None:
        found = find_nodes(self.trace, text)
        self.matches = found[::-1].copy()  # newest first, as the graph lists them
        if not len(found):
            self.notify(f"no node matches {text!r}", severity="warning", markup=False)
            return
        self.notify(f"{len(found)} node(s) match {text!r}; ] and [ go to the next and previous", markup=False)
        self.selected_node = int(self.matches[0])

    def _add_breakpoint(self, text: str) -> None:
        try:
            bp = bp_mod.parse(text)
        except ValueError as e:
            self.notify(str(e), severity="error", timeout=8, markup=False)
            return
        if bp not in self.breakpoints:
            self.breakpoints = [*self.breakpoints, bp]
        count = len(bp_mod.hits(self.trace, bp))
        self.notify(f"breakpoint `{bp}` stops at {count} step(s); c runs to the next", title="breakpoint", markup=False)

    def _default_export_name(self) -> str:
        import shutil

        return f"agdb-step{self.step}.{'svg' if shutil.which('dot') else 'dot'}"

    def _export(self, path: str) -> None:
        from ..export import ExportError

        if not path:
            return
        try:
            path = path if self.export_rule is None else self.export_rule.target(path)
        except ExportError as e:
            self.post_message(ExportFailed(str(e)))
            return
        # Around the selected node if there is one, else the whole graph, folded when it is large.
        focus = self.selected_node
        self.notify(f"exporting {path}…", timeout=2, markup=False)
        self._run_export(path, self.step, focus, self.state)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False)
    def _run_export(self, path: str, step: int, focus: int | None, state: EngineState | None) -> None:
        from ..export import MAX_BOXES, ExportError, export

        collapse = focus is None and self.trace.num_nodes > MAX_BOXES
        try:
            done = export(self.trace, path, step=step, focus=focus, collapse=collapse, state=state)
        except (ExportError, OSError) as e:
            self.post_message(ExportFailed(str(e)))
            return
        what = f"around node {focus}" if focus is not None else ("folded" if collapse else "whole graph")
        self.post_message(GraphExported(done.path, step, f"{done.num_boxes} boxes ({what})"))

    @on(GraphExported)
    def _exported(self, message: GraphExported) -> None:
        self.notify(f"wrote {message.path}: {message.summary}", title="export", markup=False)

    @on(ExportFailed)
    def _export_failed(self, message: ExportFailed) -> None:
        self.notify(message.error, title="export failed", severity="error", timeout=10, markup=False)

    @on(BreakpointHit)
    def _breakpoint_hit(self, message: BreakpointHit) -> None:
        node = self.trace.event_node(message.step)  # the node the stopping event is about, or -1
        if node >= 0:
            self.selected_node = node
        self.notify(f"stopped at step {message.step} on breakpoint `{message.breakpoint}`", title="breakpoint",
                    markup=False)

    @on(Tabs.TabActivated, "#tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        panel_id = (event.tab.id or "").removeprefix("tab-")
        if panel_id in BY_ID and self.layout_state.has_tab(panel_id):
            wanted = self.layout_state.active_lower if self.layout_state.wide else self.layout_state.active
            if panel_id != wanted:
                self.layout_state.choose(panel_id)
                self._relayout(self.size.width, self.size.height)

    @on(LazyList.NodeSelected)
    def _node_selected(self, event: LazyList.NodeSelected) -> None:
        self.selected_node = event.node
        source = self._focused_panel()
        if self.layout_state.wide and source != "fwd":
            self.layout_state.choose("inspector")
            self._relayout(self.size.width, self.size.height)

    @on(NodeInspector.JointRequested)
    def _joint_requested(self, event: NodeInspector.JointRequested) -> None:
        """A CompiledFunctionBackward's compile was chosen in the inspector: its joint graph in the Joint panel."""
        joint = self._panel("joint")
        if not isinstance(joint, JointGraphView):
            return
        joint.show_compile(event.index)
        self.layout_state.choose("joint")
        self._relayout(self.size.width, self.size.height)
        joint.focus()

    @on(EventLog.StepChosen)
    def _event_chosen(self, event: EventLog.StepChosen) -> None:
        self.step = event.step

    @on(CulpritsView.CulpritSelected)
    def _show_source(self, event: CulpritsView.CulpritSelected) -> None:
        culprit = event.culprit
        show_source(self.query_one("#source", Static), self.trace, culprit.filename, culprit.lineno,
                    self.source_files, (culprit.col, culprit.end_col))
        self.query_one("#source", Static).add_class("-open")
