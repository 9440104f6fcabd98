"""Show a few lines of a source file around one line, highlighted, in a Static."""
from __future__ import annotations

from rich.syntax import Syntax
from textual.widgets import Static

CONTEXT = 3
"""Lines shown above and below the line of interest."""


def show_source(target: Static, filename: str, lineno: int) -> None:
    """Put `filename` around `lineno` into `target`, or say why it cannot be read."""
    try:
        with open(filename, encoding="utf-8") as f:
            code = f.read()
    except (OSError, UnicodeDecodeError):
        target.update(f"{filename}:{lineno} (source not readable)")
        return
    first = max(1, lineno - CONTEXT)
    target.update(Syntax(code, "python", line_numbers=True, line_range=(first, lineno + CONTEXT),
                         highlight_lines={lineno}))
