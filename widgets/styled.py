"""How a panel's line (tracer.views.panel_text.Line) looks: its tag picks its style."""
from __future__ import annotations

from rich.text import Text

from agdb.tracer.views.panel_text import Line

TAG_STYLE = {"": "", "title": "bold", "note": "italic", "error": "bold red", "nan": "bold yellow"}
"""The style of each kind of line."""


def styled(line: Line) -> Text:
    """The line as rich Text in its tag's style."""
    return Text(line.text, style=TAG_STYLE[line.tag])
