"""Timeline: the status line with the step and what happened at it, as a sentence."""
from __future__ import annotations

from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.views.labels import NodeLabels
from agdb.tracer.views.sentences import sentence


class Timeline(Widget):
    """`step 12/340 · MulBackward0 seq 2 popped from ready queue cpu`.

    A line-API widget: a Static re-parses its text as markup and lays it out as a visual on every render,
    about 1 ms for this one line, paid on every step. Here the line is rendered once per step and width.
    """

    DEFAULT_CSS = """
    Timeline { height: 1; background: $panel; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = ""
        self._strip: tuple[str, int, Strip] | None = None

    def show(self, state: EngineState, labels: NodeLabels) -> None:
        """Say what happened at the step of `state` (`labels`: the trace's, which name its nodes)."""
        text = f"step {state.step}/{state.num_steps - 1} · {sentence(state.event, labels)}"
        if text != self.text:
            self.text = text
            self.refresh()  # one line whatever it says: no layout

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y:
            return Strip.blank(width, self.rich_style)
        cached = self._strip
        if cached is None or cached[:2] != (self.text, width):
            line = Text(self.text, no_wrap=True, end="")
            line.truncate(width, overflow="ellipsis", pad=True)
            strip = Strip(line.render(self.app.console), width).apply_style(self.rich_style)
            self._strip = cached = (self.text, width, strip)
        return cached[2]

    def notify_style_update(self) -> None:
        self._strip = None
        super().notify_style_update()
