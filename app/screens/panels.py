"""The step screen's panels and how they are laid out: a grid when the terminal is large, tabs when small.

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

WIDE_MIN = (110, 30)
"""The smallest terminal (columns, rows) that gets the wide layout."""


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel: its id (also its widget's id), its tab label, its title and where it sits when wide."""

    id: str
    tab: str
    title: str
    lower: bool  # in the wide layout: below the graph (chosen by the tab bar) rather than always shown


PANELS = (
    Panel("graph", "Graph", "backward graph", False),
    Panel("queues", "Queues", "ready queues", False),
    Panel("deps", "Deps", "dependencies and input buffers", False),
    Panel("fwd", "F↔B", "forward ↔ backward", True),
    Panel("inspector", "Node", "node inspector", True),
    Panel("pruning", "Prune", "pruning", True),
    Panel("culprits", "Culprits", "seq_nr culprits", True),
    Panel("events", "Events", "event log", True),
)
"""The panels in tab order; the digit keys 1..8 go to them."""
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
