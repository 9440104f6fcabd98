"""Show a few lines of source around one line, highlighted, in a Static.

The lines come from the trace (it stores them when recording). A path a trace names is never opened: a
crafted trace could name /etc/shadow, /dev/zero or a FIFO. Only for a trace that stores no source (recorded
before format version 3) is a file read, and only a regular file the user named on the command line.
"""
from __future__ import annotations

import os
from typing import Iterable

from rich.syntax import Syntax
from rich.text import Text
from textual.widgets import Static

from agdb.tracer.recording.expression import anchor
from agdb.tracer.recording.frames import read_source
from agdb.tracer.store.printable import printable
from agdb.tracer.store.schema import SOURCE_CONTEXT
from agdb.tracer.store.trace import Trace

CONTEXT = SOURCE_CONTEXT
"""Lines shown above and below the line of interest (as many as a trace stores)."""


def show_source(target: Static, trace: Trace, filename: str, lineno: int, named_files: Iterable[str] = (),
                columns: tuple[int, int] = (-1, -1)) -> None:
    """Put the lines of `filename` around `lineno` into `target`, or say why there are none.

    `columns`: the range of the line's stripped text that ran (tracer.recording.frames.columns), underlined, with the
    op's own part of it (tracer.recording.expression.anchor) in reverse video: `.sum()` rather than the whole line.
    """
    first, last = max(1, lineno - CONTEXT), lineno + CONTEXT
    where = f"{printable(filename)}:{lineno}"
    if trace.has_source:
        lines = trace.source_lines(filename, first, last)
        missing = f"{where} (the trace holds no source for this line)"
    else:
        lines = _named_file_lines(filename, first, last, named_files)
        missing = (f"{where} (this trace was recorded before agdb stored source lines; name the file with "
                   f"`agdb open TRACE --source FILE` to show it)")
    if lineno not in lines:
        target.update(Text(missing))
        return
    # Lines first..last only (a crafted trace may put a line at 10**12), numbered from `first`.
    code = "\n".join(printable(lines.get(i, "")) for i in range(first, min(last, max(lines)) + 1))
    syntax = Syntax(code, "python", line_numbers=True, start_line=first, highlight_lines={lineno})
    _mark_columns(syntax, printable(lines[lineno]), lineno - first + 1, *columns)
    target.update(syntax)


def _mark_columns(syntax: Syntax, line: str, row: int, col: int, end_col: int) -> None:
    """Underline `col:end_col` of the stripped text of `line` (row `row` of `syntax`), the op's part reversed."""
    stripped = line.strip()
    if not 0 <= col < end_col <= len(stripped):
        return
    indent = len(line) - len(line.lstrip())
    start, end = anchor(stripped, col, end_col)
    syntax.stylize_range("underline", (row, indent + col), (row, indent + end_col))
    syntax.stylize_range("bold reverse", (row, indent + start), (row, indent + end))


def _named_file_lines(filename: str, first: int, last: int, named_files: Iterable[str]) -> dict[int, str]:
    """Lines of `filename` if it is one of the files the user named (compared as real paths), else none."""
    def real(path: str) -> str:
        return os.path.realpath(os.path.abspath(path))

    try:
        if not filename or real(filename) not in {real(f) for f in named_files}:
            return {}
    except (OSError, ValueError):
        return {}
    lines = read_source(filename) or []  # regular files only
    return {i: lines[i - 1] for i in range(first, min(last, len(lines)) + 1)}
