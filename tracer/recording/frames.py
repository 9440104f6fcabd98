"""Finding the user's Python line, and reading the source a trace stores about it.

Never imports the engine, textual or rich.
"""
from __future__ import annotations

import io
import itertools
import linecache
import os
import stat
import sys
import tokenize
from typing import Any

# Frames in these packages are skipped when looking for the user's line. The app is not among them:
# it calls the user's script from above, so the walk outward from the engine meets the user first.
_AGDB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this is tracer/recording/
_AGDB_DIRS = tuple(os.path.join(_AGDB_DIR, pkg) + os.sep for pkg in ("engine", "tracer"))

# id(code object) -> (the code object, whether it belongs to engine/ or tracer/). Keyed by id, not by the code:
# hashing a code object hashes its contents (~0.3 us, not cached), and the walk asks for every frame of every op.
# The entry holds the code, so its id is not reused while it is a key.
_inside: dict[int, tuple[Any, bool]] = {}
_inside_flags: dict[int, bool] = {}  # the same, without the code: what the walk reads (no tuple to index)

MAX_SOURCE_BYTES = 16 * 1024 * 1024
"""Larger files are not read for source lines: no Python file a user steps through is that big."""


def user_frame() -> Any:
    """The innermost frame outside engine/ and tracer/: the user's line that caused what is happening."""
    return user_frame_from(sys._getframe(1))


def user_frame_from(f: Any) -> Any:
    """The innermost frame outside engine/ and tracer/, from frame `f` outward (`f` included); None for none."""
    inside = _inside_flags
    while f is not None:
        known = inside.get(id(f.f_code))
        if known is None:
            known = is_agdb_code(f.f_code)
        if not known:
            return f
        f = f.f_back
    return None


def is_agdb_code(code: Any) -> bool:
    """Whether a code object belongs to engine/ or tracer/ (not the user's)."""
    known = _inside.get(id(code))
    if known is not None:
        return known[1]
    if len(_inside) > 100_000:  # code made by exec() keeps coming: do not keep all of it alive
        _inside_flags.clear()  # first: a flag never outlives the entry that keeps its code (and id) alive
        _inside.clear()
    inside = code.co_filename.startswith(_AGDB_DIRS)
    _inside[id(code)] = (code, inside)
    _inside_flags[id(code)] = inside
    return inside


_read: dict[str, tuple[tuple[int, int], list[str] | None]] = {}  # file -> ((mtime, size), its lines)


def read_source(filename: str) -> list[str] | None:
    """The lines of `filename` without their endings, or None when it cannot be read as source.

    Only a regular file is opened: a code object's file name can be anything (`compile(text, "/dev/zero",
    "exec")`), and reading a device or a pipe would never end. Code with no file (`<stdin>`, `<string>`) is
    looked up in what Python's linecache already holds, never read from disk. A file is read again only when
    its modification time or size changed (the culprit logger asks once per seq_nr bump).
    """
    if filename.startswith("<") and filename.endswith(">"):
        entry = linecache.cache.get(filename)
        return [line.rstrip("\r\n") for line in entry[2]] if entry is not None and len(entry) == 4 else None
    try:
        info = os.stat(filename)
    except (OSError, ValueError):
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    known = _read.get(filename)
    if known is not None and known[0] == stamp:
        return known[1]
    if len(_read) > 1000:
        _read.clear()
    lines = _read_file(filename)
    _read[filename] = (stamp, lines)
    return lines


def _read_file(filename: str) -> list[str] | None:
    try:
        fd = os.open(filename, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > MAX_SOURCE_BYTES:
        return None
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
        text = raw.decode(encoding, errors="replace")
    except (SyntaxError, LookupError):
        text = raw.decode("utf-8", errors="replace")
    # Python's own line breaks only (str.splitlines would also break at form feeds and other separators).
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def source_line(filename: str, lineno: int) -> str:
    """The stripped source text of a line, or '' when it cannot be read (see read_source)."""
    lines = read_source(filename) or ()
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""


def columns(frame: Any) -> tuple[int, int]:
    """Which part of its line `frame` is running: the column range (start, end; end excluded), in characters of
    the line's stripped text (`source_line`), of the bytecode at `frame.f_lasti`; (-1, -1) when unknown.

    Python 3.11+ keeps a position per bytecode (`co_positions`, in UTF-8 bytes of the unstripped line): the
    call `y.sin()`, the `y.sin() * w` of a multiplication, the whole `(y.sin() * w).sum()` of the call after
    it. An expression that runs past its line is cut at the line's end.
    """
    return columns_at(frame.f_code, frame.f_lasti, frame.f_lineno)


def columns_at(code: Any, lasti: int, lineno: int) -> tuple[int, int]:
    """`columns` of the bytecode at offset `lasti` of `code` (on line `lineno`), for a frame that has moved on: the
    torch bridge's line tracer knows the instruction that ran only after it ran."""
    positions = getattr(code, "co_positions", None)
    if positions is None or lasti < 0:
        return (-1, -1)
    position = next(itertools.islice(positions(), lasti // 2, None), None)
    lines = read_source(code.co_filename) or ()
    if position is None or None in position or position[0] != lineno or not 0 < lineno <= len(lines):
        return (-1, -1)
    line = lines[lineno - 1]
    raw = line.encode("utf-8")
    start = len(raw[:position[2]].decode("utf-8", errors="replace"))
    end = len(raw[:position[3]].decode("utf-8", errors="replace")) if position[1] == lineno else len(line)
    indent = len(line) - len(line.lstrip())
    width = len(line.strip())
    start, end = max(0, start - indent), min(width, end - indent)
    return (start, end) if start < end else (-1, -1)


def absolute_file(filename: str, cwd: str | None) -> str:
    """A code object's file name made absolute against `cwd` (the directory the recording started in), so a
    trace does not depend on where it is opened; names like `<stdin>` stay as they are."""
    if not filename or (filename.startswith("<") and filename.endswith(">")) or os.path.isabs(filename) or not cwd:
        return filename
    return os.path.normpath(os.path.join(cwd, filename))
