"""Finding the user's Python line: the innermost frame outside agdb's engine and tracer.

Never imports the engine, textual or rich.
"""
from __future__ import annotations

import linecache
import os
import sys
from typing import Any

# Frames in these packages are skipped when looking for the user's line. The app is not among them:
# it calls the user's script from above, so the walk outward from the engine meets the user first.
_AGDB_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), pkg) + os.sep
    for pkg in ("engine", "tracer"))

_inside: dict[Any, bool] = {}  # code object -> whether it belongs to engine/ or tracer/


def user_frame() -> Any:
    """The innermost frame outside engine/ and tracer/: the user's line that caused what is happening."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        inside = _inside.get(code)
        if inside is None:
            if len(_inside) > 100_000:  # code made by exec() keeps coming: do not keep all of it alive
                _inside.clear()
            inside = _inside[code] = code.co_filename.startswith(_AGDB_DIRS)
        if not inside:
            return f
        f = f.f_back
    return None


def source_line(filename: str, lineno: int) -> str:
    """The stripped source text of a line, or '' when it cannot be read."""
    return linecache.getline(filename, lineno).strip()
