"""Timeline: the footer line with the step, the event at hand and its graph task."""
from __future__ import annotations

from textual.widgets import Static

from tracer.replay import EngineState

from .event_log import describe


class Timeline(Static):
    """`step 12/340 · TaskPopped ... · graph task 1`."""

    DEFAULT_CSS = """
    Timeline { height: 1; background: $panel; }
    """

    def show(self, state: EngineState, queue_label=None) -> None:
        """Describe the step of `state`."""
        task = getattr(state.event, "graph_task", 0)
        where = f" · graph task {task}" if task else ""
        # One line whatever it says: no layout pass needed (it would cost the whole screen a relayout).
        self.update(f"step {state.step}/{state.num_steps - 1} · {describe(state.event, queue_label)}{where}",
                    layout=False)
