"""Text from a trace made safe to show on a terminal.

Never imports the engine, textual or rich. A trace holds whatever strings its writer gave it: node names (a
custom Function can be called anything), file names (`compile(text, name, "exec")` takes any name), source
lines, thread names, error messages. A crafted or merely odd trace could hold terminal escape sequences
that repaint the screen or retitle the window, or Unicode direction overrides that make a line read other
than it is. Everything agdb shows from a trace goes through `printable`, which turns such characters into
visible escapes (`\\x1b`, `\\u202e`); rich markup is a separate matter (use Text, or rich.markup.escape).
"""
from __future__ import annotations

import re

_CONTROL = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in (*_CONTROL, *_BIDI)}
_MULTILINE = {c: e for c, e in _ESCAPES.items() if c not in (0x09, 0x0A)}  # tabs and line breaks stay
_NEEDS = re.compile("[" + "".join(re.escape(chr(c)) for c in _ESCAPES) + "]")


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with control characters and direction overrides written as escapes; with `keep_newlines`, line
    breaks and tabs stay (for text of several lines: an error message, a traceback)."""
    if not _NEEDS.search(text):
        return text
    return text.translate(_MULTILINE if keep_newlines else _ESCAPES)
