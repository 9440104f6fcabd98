"""StepScreen: the main screen. It owns `step`, derives `state` and routes messages between panels."""
from __future__ import annotations

import numpy as np
from rich.syntax import Syntax
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive, var
from textual.screen import Screen
from textual.widgets import Input, Static, TabbedContent, TabPane

from tracer import culprits as culprits_mod
from tracer.recorder import K_NSTART
from tracer.replay import EngineState, Replay
from tracer.trace import Trace
from widgets.culprits import CulpritsView
from widgets.dependencies import DependenciesView
from widgets.event_log import EventLog
from widgets.graph_view import GraphView
from widgets.pruning import PruningView
from widgets.ready_queue import ReadyQueueView
from widgets.timeline import Timeline

from .help import HelpScreen


class StepChanged(Message):
    """The screen moved to `step`."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class StepScreen(Screen[None]):
    """Step through a trace: graph, ready queues, dependencies, pruning, culprits, events."""

    BINDINGS = [
        Binding("right,l", "step(1)", "Next event"),
        Binding("left,h", "step(-1)", "Previous event"),
        Binding("n", "node(1)", "Next node run"),
        Binding("N,p", "node(-1)", "Previous node run"),
        Binding("home,g", "jump(0)", "Start"),
        Binding("end,G", "jump(-1)", "End"),
        Binding("colon", "ask_step", "Go to step"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "app.quit", "Quit"),
    ]

    step: reactive[int] = reactive(0, init=False)
    """The event the screen shows (0-based)."""
    state: var[EngineState | None] = var(None)
    """The engine's state after `step`."""

    def __init__(self, trace: Trace, title: str = "", script_error: str = "") -> None:
        super().__init__()
        self.trace = trace
        self.replay = Replay(trace)
        self.title_text = title
        self.script_error = script_error
        self.node_steps = trace.steps_of(K_NSTART)
        self.culprit_list = culprits_mod.of_trace(trace)

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="title")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield GraphView(self.trace, id="graph")
            with TabbedContent(id="right"):
                with TabPane("Queues", id="tab-queues"):
                    yield ReadyQueueView(self.trace.queue_label, id="queues")
                with TabPane("Deps", id="tab-deps"):
                    yield DependenciesView(self.trace, id="deps")
                with TabPane("Pruning", id="tab-pruning"):
                    yield PruningView(self.trace, id="pruning")
                with TabPane("Culprits", id="tab-culprits"):
                    yield CulpritsView(self.culprit_list, id="culprits")
                    yield Static(id="source")
                with TabPane("Events", id="tab-events"):
                    yield EventLog(self.trace, id="events")
        yield Input(placeholder="go to step…", id="goto", classes="-hidden")
        yield Timeline(id="timeline")

    def on_mount(self) -> None:
        if self.script_error:
            self.notify(self.script_error, title="the script raised", severity="error", timeout=10)
        self.step = 0
        self.watch_step(0)

    def watch_step(self, step: int) -> None:
        self.state = self.replay.state_at(step)
        self.post_message(StepChanged(step))

    def watch_state(self, state: EngineState | None) -> None:
        if state is None:
            return
        self.query_one(GraphView).show(state)
        self.query_one(ReadyQueueView).show(state)
        self.query_one(DependenciesView).show(state)
        self.query_one(PruningView).show(state)
        self.query_one(CulpritsView).show_upto(state.culprits)
        self.query_one(EventLog).follow(state.step)
        self.query_one(Timeline).show(state)

    # -- actions -------------------------------------------------------------------------------------------
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

    def action_ask_step(self) -> None:
        """Show the go-to-step box."""
        box = self.query_one("#goto", Input)
        box.remove_class("-hidden")
        box.value = ""
        box.focus()

    def action_help(self) -> None:
        """Show every key."""
        self.app.push_screen(HelpScreen(list(self.BINDINGS)))

    # -- routing -------------------------------------------------------------------------------------------
    @on(Input.Submitted, "#goto")
    def _go_to(self, event: Input.Submitted) -> None:
        box = self.query_one("#goto", Input)
        box.add_class("-hidden")
        try:
            wanted = int(event.value)
        except ValueError:
            self.notify(f"not a step number: {event.value!r}", severity="warning")
            return
        if not 0 <= wanted < len(self.trace):
            self.notify(f"step {wanted} is outside 0..{len(self.trace) - 1}", severity="warning")
            return
        self.step = wanted
        self.query_one(GraphView).focus()

    @on(EventLog.StepChosen)
    def _event_chosen(self, event: EventLog.StepChosen) -> None:
        self.step = event.step

    @on(CulpritsView.CulpritSelected)
    def _show_source(self, event: CulpritsView.CulpritSelected) -> None:
        c = event.culprit
        source = self.query_one("#source", Static)
        try:
            with open(c.filename, encoding="utf-8") as f:
                code = f.read()
        except OSError:
            source.update(f"{c.filename}:{c.lineno} (source not readable)")
            return
        first = max(1, c.lineno - 3)
        source.update(Syntax(code, "python", line_numbers=True, line_range=(first, c.lineno + 3),
                             highlight_lines={c.lineno}))

    @on(GraphView.NodeSelected)
    def _node_selected(self, event: GraphView.NodeSelected) -> None:
        info = self.trace.node(event.node)
        self.notify(f"{info.name} seq {info.seq_nr} topo {info.topological_nr}, made at "
                    f"{info.filename}:{info.lineno}: {info.source}", title="node")
