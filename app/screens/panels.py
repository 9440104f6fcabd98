"""The step screen's panels, each declared once in PANELS, and their layout: a grid when wide, tabs when small.

Every panel is always mounted, so its widget keeps its cursor and scroll position across a resize; the
layout only decides which panels are displayed and which tabs the tab bar offers.
NOTE [panel layout]: in the wide layout the graph, queues and dependencies panels are always on screen and
the tab bar picks one of the lower panels below them; in the narrow layout (below 110x30, e.g. 80x24) the
tab bar picks the one panel that fills the screen.
"""
from __future__ import annotations

from dataclasses import dataclass

from textual.containers import Vertical
from textual.widgets import Tabs

from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace
from agdb.widgets.culprits import CulpritsView
from agdb.widgets.dependencies import DependenciesView
from agdb.widgets.event_log import EventLog
from agdb.widgets.forward_backward import ForwardBackwardView
from agdb.widgets.graph_canvas import GraphCanvas
from agdb.widgets.joint_graph import JointGraphView
from agdb.widgets.lazy_list import LazyList
from agdb.widgets.node_inspector import NodeInspector
from agdb.widgets.pruning import PruningView
from agdb.widgets.ready_queue import ReadyQueueView

WIDE_MIN = (110, 30)
"""The smallest terminal (columns, rows) that gets the wide layout."""


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel, declared once: the screen composes, keys, feeds and lays out every panel from this."""

    id: str  # also its widget's id; its container is `panel-{id}`, its tab `tab-{id}`
    tab: str
    title: str
    key: str  # the key that shows and focuses it
    widget: type[LazyList]  # made with (trace, id=...); fed each step through show_state
    lower: bool  # in the wide layout: below the graph (chosen by the tab bar) rather than always shown
    kinds: tuple[Kind, ...]  # the event kinds it shows; a source that cannot record them makes it say so
    follows_selection: bool = False  # also fed when the selected node changes
    compares_steps: bool = False  # also fed the state a step before (its rows mark what changed at the step)
    beside: tuple[str, ...] = ()  # ids of Statics composed under the widget (the culprits' source)

    def notice(self, trace: Trace) -> str:
        """What the panel says before its rows about the trace's source: nothing, a missing kind, or that its
        events were reconstructed by agdb's model."""
        missing = [k for k in self.kinds if trace.provenance(k) == "missing"]
        if missing:
            what = ", ".join(dict.fromkeys(KIND_TEXT[k] for k in missing))
            return f"this trace's source ({trace.source}) does not record {what} events"
        if any(trace.provenance(k) == "reconstructed" for k in self.kinds):
            return "reconstructed by agdb's model"
        return ""


KIND_TEXT = {
    Kind.SEQ_NR_BUMPED: "seq_nr", Kind.NODE_CREATED: "node-creation", Kind.GRAPH_TASK_STARTED: "graph-task",
    Kind.DEPENDENCIES_COMPUTED: "dependency-count", Kind.EXEC_INFO_COMPUTED: "exec_info",
    Kind.TASK_PUSHED: "ready-queue", Kind.TASK_POPPED: "ready-queue", Kind.BUFFER_WRITTEN: "input-buffer",
    Kind.HOOK_RAN: "hook", Kind.NODE_STARTED: "node-run", Kind.NODE_FINISHED: "node-run",
    Kind.GRAD_CAPTURED: "grad-capture", Kind.GRAD_ACCUMULATED: "grad-accumulation", Kind.ERROR_RAISED: "error",
    Kind.GRAPH_TASK_FINISHED: "graph-task",
}
"""How a panel's notice names the events of each kind."""

PANELS = (
    Panel("graph", "Graph", "backward graph", "1", GraphCanvas, False,
          (Kind.NODE_CREATED, Kind.DEPENDENCIES_COMPUTED, Kind.NODE_STARTED, Kind.NODE_FINISHED)),
    Panel("queues", "Queues", "ready queues", "2", ReadyQueueView, False, (Kind.TASK_PUSHED, Kind.TASK_POPPED)),
    Panel("deps", "Deps", "dependencies and input buffers", "3", DependenciesView, False,
          (Kind.DEPENDENCIES_COMPUTED, Kind.BUFFER_WRITTEN), compares_steps=True),
    Panel("fwd", "F↔B", "forward ↔ backward", "4", ForwardBackwardView, True,
          (Kind.SEQ_NR_BUMPED, Kind.NODE_CREATED)),
    Panel("inspector", "Node", "node inspector", "5", NodeInspector, True, (Kind.NODE_CREATED,),
          follows_selection=True),
    Panel("pruning", "Prune", "pruning", "6", PruningView, True,
          (Kind.DEPENDENCIES_COMPUTED, Kind.EXEC_INFO_COMPUTED)),
    Panel("culprits", "Culprits", "seq_nr culprits", "7", CulpritsView, True, (Kind.SEQ_NR_BUMPED,),
          beside=("source",)),
    Panel("events", "Events", "event log", "8", EventLog, True, ()),
    Panel("joint", "Joint", "joint FX graph", "9", JointGraphView, True, ()),
)
"""The panels in tab order."""
BY_ID = {p.id: p for p in PANELS}


class PanelLayout:
    """Which panels show, which is active and which are hidden; applies that to the mounted widgets."""

    def __init__(self) -> None:
        self.wide = True
        self.active = "graph"  # the panel the tab bar shows in the narrow layout
        self.active_lower = "fwd"  # the lower panel the tab bar shows in the wide layout
        self.hidden: set[str] = set()

    def choose(self, panel_id: str) -> None:
        """Make `panel_id` the one the tab bar shows (unhiding it)."""
        self.hidden.discard(panel_id)
        self.active = panel_id
        if BY_ID[panel_id].lower:
            self.active_lower = panel_id

    def hide(self, panel_id: str) -> None:
        """Hide `panel_id`; the tab bar moves to the next panel still shown."""
        shown = [p.id for p in PANELS if p.id not in self.hidden]
        if len(shown) <= 1:
            return  # keep one panel: an empty screen helps nobody
        self.hidden.add(panel_id)
        rest = [p for p in shown if p != panel_id]
        if self.active == panel_id:
            self.active = rest[0]
        if self.active_lower == panel_id:
            lower = [p for p in rest if BY_ID[p].lower]
            self.active_lower = lower[0] if lower else ""

    def is_displayed(self, panel_id: str) -> bool:
        """Whether the panel is on screen in the current layout."""
        if panel_id in self.hidden:
            return False
        if not self.wide:
            return panel_id == self.active
        return not BY_ID[panel_id].lower or panel_id == self.active_lower

    def has_tab(self, panel_id: str) -> bool:
        """Whether the tab bar offers the panel."""
        return panel_id not in self.hidden and (not self.wide or BY_ID[panel_id].lower)

    def apply(self, container: Vertical, tabs: Tabs) -> None:
        """Set each panel's display, the tab bar's tabs and its active tab, and the container's class."""
        container.set_class(self.wide, "-wide")
        container.set_class(not self.wide, "-narrow")
        for p in PANELS:
            container.query_one(f"#panel-{p.id}").display = self.is_displayed(p.id)
            if self.has_tab(p.id):
                tabs.show(f"tab-{p.id}")
        # Activate before hiding: hiding the active tab would make the tab bar pick one of its own.
        wanted = self.active_lower if self.wide else self.active
        tabs.display = bool(wanted)
        if wanted and tabs.active != f"tab-{wanted}":
            tabs.active = f"tab-{wanted}"
        for p in PANELS:
            if not self.has_tab(p.id):
                tabs.hide(f"tab-{p.id}")
        if self.wide:
            self._fill_grid(container, bool(wanted))

    def _fill_grid(self, container: Vertical, has_lower: bool) -> None:
        """Let the shown panels take the cells of hidden ones: the wide grid has no empty box.

        The graph sits left over two rows, queues and deps right, one row each; a hidden one's neighbour in
        its row or column spans its cell. The rows for the tab bar and the lower panel go when nothing is shown
        there.
        """
        left = "graph" not in self.hidden
        right = [p for p in ("queues", "deps") if p not in self.hidden]
        for p in right:
            box = container.query_one(f"#panel-{p}")
            box.styles.row_span = 2 if len(right) == 1 else 1
            box.styles.column_span = 1 if left else 2
        graph = container.query_one("#panel-graph")
        graph.styles.column_span = 1 if right else 2
        graph.styles.row_span = 2
        upper = "1fr 1fr " if left or right else ""
        container.styles.grid_size_rows = (2 if upper else 0) + (2 if has_lower else 0)
        container.styles.grid_rows = (upper + ("2 1fr" if has_lower else "")).strip() or "1fr"
