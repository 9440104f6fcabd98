"""The user's line: the innermost frame outside the engine and the tracer, and its text as a stack trace shows it.

Imports the standard library only (the engine's path, on first use).
"""
from __future__ import annotations

import linecache
import os
import sys

_SKIP_DIRS: tuple[str, ...] = ()


def _skip_dirs() -> tuple[str, ...]:
    """Directories whose frames are not the user's: the engine and the tracer."""
    global _SKIP_DIRS
    if not _SKIP_DIRS:
        from agdb import engine

        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        _SKIP_DIRS = (os.path.dirname(os.path.abspath(engine.__file__)) + os.sep, here + os.sep)
    return _SKIP_DIRS


def user_frame() -> tuple[str, int, str]:
    """(file, line, function) of the innermost frame outside the engine and the tracer, or ("", 0, "")."""
    skip = _SKIP_DIRS or _skip_dirs()
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(skip) and not name.startswith("<dispatch"):
            return name, f.f_lineno, f.f_code.co_name
        f = f.f_back
    return "", 0, ""


_stack_texts: dict[tuple[str, int, str], str] = {}


def stack_text(frame: tuple[str, int, str]) -> str:
    """A frame as a stack trace shows it: `File "f.py", line 3, in fn` and the source line."""
    text = _stack_texts.get(frame)
    if text is None:
        text = _stack_texts[frame] = _stack_text(frame)
    return text


def _stack_text(frame: tuple[str, int, str]) -> str:
    name, line, fn = frame
    if not name:
        return ""
    src = linecache.getline(name, line).strip()
    return f'  File "{name}", line {line}, in {fn}\n    {src}' if src else f'  File "{name}", line {line}, in {fn}'
