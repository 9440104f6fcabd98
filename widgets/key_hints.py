"""KeyHints: the bottom line of key hints (`← Back  → Next  / Search … ? Help  q Quit`), as keys are typed."""
from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.keys import format_key
from textual.strip import Strip
from textual.widget import Widget


def key_display(binding: Binding) -> str:
    """The key a hint shows: the binding's key_display, or its first key as typed (`/`, not `slash`)."""
    return binding.key_display or format_key(binding.key.split(",")[0].strip())


class KeyHints(Widget):
    """One line naming the main keys, like a footer.

    A line-API widget drawn once per width: Textual's Footer is a widget per key, which added ~0.4 s of
    styling and recomposing to the first paint of a large trace (bench/tui.py), and recomposes on each focus
    change. These hints never change while the screen is up.
    """

    COMPONENT_CLASSES = {"key-hints--key"}
    DEFAULT_CSS = """
    KeyHints { height: 1; background: $panel; color: $text-muted; }
    KeyHints > .key-hints--key { color: $accent; text-style: bold; }
    """

    def __init__(self, bindings: Iterable[Binding], **kwargs) -> None:
        super().__init__(**kwargs)
        self.hints = [(key_display(b), b.description) for b in bindings]
        self._strip: tuple[int, Strip] | None = None

    @property
    def text(self) -> str:
        """The hints as plain text."""
        return " " + "  ".join(f"{key} {what}" for key, what in self.hints)

    def fitting(self, width: int) -> list[tuple[str, str]]:
        """The hints that fit in `width` columns whole: the last one (the palette, the way to every other key) and
        Help always, then the others from the left; a hint cut in half (`z Zoo…`) helps nobody."""
        pinned = {len(self.hints) - 1} | {i for i, (_, what) in enumerate(self.hints) if what == "Help"}
        kept = list(range(len(self.hints)))
        droppable = [i for i in kept if i not in pinned]
        while droppable and 1 + sum(len(f"{k} {w}") + 2 for k, w in (self.hints[i] for i in kept)) - 2 > width:
            kept.remove(droppable.pop())
        return [self.hints[i] for i in kept]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y:
            return Strip.blank(width, self.rich_style)
        if self._strip is None or self._strip[0] != width:
            key_style = self.get_component_rich_style("key-hints--key")
            line = Text(" ", no_wrap=True, end="")
            for i, (key, what) in enumerate(self.fitting(width)):
                line.append(("  " if i else "") + key, key_style)
                line.append(f" {what}")
            line.truncate(width, overflow="ellipsis", pad=True)
            self._strip = (width, Strip(line.render(self.app.console), width).apply_style(self.rich_style))
        return self._strip[1]

    def notify_style_update(self) -> None:
        self._strip = None
        super().notify_style_update()
