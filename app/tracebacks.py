"""A script's traceback as agdb shows it (command line and TUI): the user's frames, agdb's own left out."""
from __future__ import annotations

import re
from pathlib import Path

AGDB_ROOT = Path(__file__).resolve().parents[1]
"""The directory holding agdb's packages (engine/, tracer/, app/, widgets/): frames there are agdb's."""
_FRAME = re.compile(r'^  File "(?P<path>[^"]*)", line \d+')


_PACKAGES = tuple(AGDB_ROOT / p for p in ("engine", "tracer", "app", "widgets"))
"""agdb's own code: in a checkout, AGDB_ROOT also holds docs/examples/, bench/ and tests/, which are scripts'."""


def _is_agdb(path: str) -> bool:
    try:
        resolved = Path(path).resolve()
    except (OSError, ValueError):
        return False
    # installed, agdb's own __init__, __main__ and _entry sit in AGDB_ROOT itself (in a checkout, in app/_agdb)
    return resolved.parent == AGDB_ROOT or any(resolved.is_relative_to(p) for p in _PACKAGES)


def user_frames(text: str) -> str:
    """A formatted traceback without agdb's frames (its engine's, or the torch bridge's): the user's lines and the
    error itself.

    A frame is its `  File "...", line N` line and the indented lines under it (source, carets). Text that
    holds no traceback comes back unchanged.
    """
    out: list[str] = []
    run = 0  # agdb frames dropped since the last line kept
    skipping = False
    for line in text.splitlines():
        frame = _FRAME.match(line)
        if frame:
            skipping = _is_agdb(frame.group("path"))
        elif not (skipping and line.startswith("    ")):
            skipping = False
        if skipping:
            run += bool(frame)
            continue
        if run:
            out.append(f"  … {run} frame(s) of agdb left out")  # the engine's, or the torch bridge's
            run = 0
        out.append(line)
    return "\n".join(out)
