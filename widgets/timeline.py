"""Timeline: the status line with the step and what happened at it, as a sentence; where the line has room, small
plots of the ready queues' length and the seq_nrs taken over the whole trace, the current step's place marked."""
from __future__ import annotations

from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels
from agdb.tracer.views.sentences import sentence
from agdb.tracer.views.sparkline import bucket_of, queue_lengths, seq_nr_taken, sparkline

PLOT_WIDTH = 16
"""Characters per plot."""
SENTENCE_ROOM = 100
"""The plots show only where the sentence still has this many characters (most sentences are shorter)."""
PLOTS = (("queue", queue_lengths), ("seq_nr", seq_nr_taken))
"""Each plot's title and the pure function of the trace that gives its value per step."""


class Timeline(Widget):
    """`step 12/340 · MulBackward0 seq 2 popped from ready queue cpu`.

    A line-API widget: a Static re-parses its text as markup and lays it out as a visual on every render,
    about 1 ms for this one line, paid on every step. Here the line is rendered once per step and width.
    """

    COMPONENT_CLASSES = {"timeline--plot", "timeline--here"}
    DEFAULT_CSS = """
    Timeline { height: 1; background: $panel; }
    Timeline > .timeline--plot { color: $text-muted; }
    Timeline > .timeline--here { color: $accent; text-style: bold reverse; }
    """

    def __init__(self, trace: Trace | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = ""
        self.step, self.num_steps = 0, 0
        self.trace = trace  # plotted when the line has room (None: no plots)
        self._plots: list[tuple[str, str]] | None = None  # (title, sparkline), made on first use
        self._strip: tuple[object, Strip] | None = None

    def show(self, state: EngineState, labels: NodeLabels) -> None:
        """Say what happened at the step of `state` (`labels`: the trace's, which name its nodes)."""
        text = f"step {state.step}/{state.num_steps - 1} · {sentence(state.event, labels)}"
        if (text, state.step) != (self.text, self.step):
            self.text, self.step, self.num_steps = text, state.step, state.num_steps
            self.refresh()  # one line whatever it says: no layout

    def plots(self) -> list[tuple[str, str]]:
        """Each plot's title and sparkline over the whole trace (computed once: a pass over the event kinds)."""
        if self._plots is None:
            self._plots = ([] if self.trace is None or not len(self.trace)
                           else [(title, sparkline(values(self.trace), PLOT_WIDTH)) for title, values in PLOTS])
        return self._plots

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y:
            return Strip.blank(width, self.rich_style)
        wanted = sum(len(f"  {title} ") + PLOT_WIDTH for title, _ in PLOTS)
        # By the width alone, not the sentence's length: plots that come and go from step to step distract.
        with_plots = self.trace is not None and width - wanted >= SENTENCE_ROOM
        here = bucket_of(self.step, self.num_steps, PLOT_WIDTH) if with_plots and self.num_steps else -1
        key = (self.text, width, here)
        cached = self._strip
        if cached is None or cached[0] != key:
            line = Text(self.text, no_wrap=True, end="")
            if with_plots:
                line.truncate(width - wanted, overflow="ellipsis", pad=True)
                plot_style = self.get_component_rich_style("timeline--plot")
                here_style = self.get_component_rich_style("timeline--here")
                for title, spark in self.plots():
                    line.append(f"  {title} ", plot_style)
                    line.append(spark[:here], plot_style)
                    line.append(spark[here:here + 1] or " ", here_style)
                    line.append(spark[here + 1:], plot_style)
            line.truncate(width, overflow="ellipsis", pad=True)
            strip = Strip(line.render(self.app.console), width).apply_style(self.rich_style)
            self._strip = cached = (key, strip)
        return cached[1]

    def notify_style_update(self) -> None:
        self._strip = None
        super().notify_style_update()
