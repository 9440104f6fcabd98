"""The .agdb trace file: versioned, self-describing, columnar, never pickle, written atomically.

Never imports the engine, textual or rich. The columns and what they mean are in `tracer.store.schema` and
docs/trace-format.md; loading checks a file against that schema.

Layout: the magic line `AGDB-TRACE\\n`, an 8-byte little-endian header length, the header's CRC-32 (4
bytes), a JSON header, then each column's raw bytes padded to 8 bytes, one after another, the last one ending
the file. The header names every column with its dtype, shape, offset and checksum (the XXH3-64 of its padded
bytes; versions 3 to 5: their CRC-32; versions 1 and 2: their wrapping uint64 sum), so a bit flip anywhere is
caught and the error names the column. Loading checks the magic, the version, the header, every size and place
against the file, the checksums and the structure (lengths agree, indices in range) before handing out a Trace;
whatever is wrong, the error is a TraceFormatError that names the file.
"""
from __future__ import annotations

import errno
import json
import math
import os
import stat
import zlib
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import xxhash

from agdb.tracer.store.atomic import write_atomically
from agdb.tracer.store.meta import problem as meta_problem
from agdb.tracer.store.printable import printable
from agdb.tracer.store.schema import (
    COLUMNS,
    DERIVED_COLUMNS,
    EVENT_COLUMNS,
    HOOK_KINDS,
    NODE_KINDS,
    RAGGED,
    SUMMARY_KINDS,
    Kind,
)
from agdb.tracer.store.trace import Trace

MAGIC = b"AGDB-TRACE\n"
FORMAT_VERSION = 6
"""Bumped whenever the layout or a column's meaning changes; older readers refuse newer files. Version 2
dropped the thread idents (a trace must not depend on them) and added the source and provenance to `meta`;
version 3 checksums columns with CRC-32 (versions 1 and 2 used a wrapping sum, which two flips of one bit in
two words, or two swapped words, passed) and stores the source lines around each frame (the `source` table);
version 4 adds each frame's column range (`frame_col`, `frame_end_col`: which expression of the line ran);
version 5 the names of AccumulateGrads' leaves (`node_leaf_name`, optional); version 6 checksums columns with
XXH3-64 (`column_checksum`). Versions 1 to 5 still load (their frames before 4 have no columns; their leaves before
5 have no names)."""
_READABLE = (1, 2, 3, 4, 5, 6)

_ALLOWED_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "float32"}
"""The dtypes agdb writes (uint8: ev_kind and the string bytes; float32: s_preview)."""
_MAX_HEADER = 64 * 1024 * 1024
_ENTRY_KEYS = {"name", "dtype", "shape", "offset", "nbytes", "checksum"}
_UNEXPECTED = (OverflowError, RecursionError, ValueError, TypeError, UnicodeDecodeError, KeyError, IndexError,
               AttributeError, ZeroDivisionError)
"""What a check that missed a case could raise on a corrupt file: turned into a TraceFormatError at `loads`."""


class TraceFormatError(ValueError):
    """A file that is not a readable agdb trace; the message says what is wrong."""


def column_checksum(buf: bytes | memoryview, version: int = FORMAT_VERSION) -> int:
    """The checksum of a column's padded bytes in a file of `version`.

    From version 6, XXH3-64: under a millisecond for the 20 MB of a 1M-event trace, where zlib's CRC-32 takes
    about five, and no change of the bytes passes it but for a 2**-64 chance, where the CRC's linearity lets
    through every change whose own CRC is that of zeros (a 33-bit burst equal to its polynomial, say). Versions
    3 to 5: CRC-32. Versions 1 and 2: the wrapping uint64 sum of the 8-byte words, which two swapped words pass.
    """
    if version >= 6:
        return xxhash.xxh3_64_intdigest(buf)
    if version >= 3:
        return zlib.crc32(buf)
    return int(np.frombuffer(buf, dtype="<u8").sum(dtype=np.uint64))


def _padded_checksum(data: np.ndarray, padding: bytes, version: int) -> int:
    """column_checksum of `data` followed by `padding`, without joining them (a copy of the column)."""
    if version >= 6:
        state = xxhash.xxh3_64(data)
        state.update(padding)
        return state.intdigest()
    if version >= 3:
        return zlib.crc32(padding, zlib.crc32(data))
    return column_checksum(data.tobytes() + padding, version)


def save(trace: Trace, path: str | os.PathLike, progress: Callable[[int, int], None] | None = None,
         durable: bool = True) -> None:
    """Write `trace` to `path` atomically: a crash mid-save leaves any older file intact (tracer.store.atomic).

    With `durable` (the default) the data reaches the disk (fsync) before the file takes its name, so
    even a power loss cannot leave a half-written trace under that name. The file gets the user's umask; a
    symlink at `path` is written through.
    """
    strings = [s.encode("utf-8") for s in trace.strings]
    string_offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in strings], out=string_offsets[1:])
    columns = {k: v for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}
    columns["string_offsets"] = string_offsets
    columns["string_bytes"] = np.frombuffer(b"".join(strings), dtype=np.uint8)
    blobs, directory, offset = [], [], 0
    for name, arr in columns.items():
        data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)  # the column's own memory: written, not copied
        padding = b"\0" * (-len(data) % 8)
        directory.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape), "offset": offset,
                          "nbytes": arr.nbytes, "checksum": _padded_checksum(data, padding, FORMAT_VERSION)})
        blobs.append((data, padding))
        offset += len(data) + len(padding)
    header = json.dumps({"format_version": FORMAT_VERSION, "meta": trace.meta, "columns": directory,
                         "num_events": len(trace)}, allow_nan=False).encode("utf-8")

    def chunks() -> Iterator[bytes | memoryview]:
        yield MAGIC + len(header).to_bytes(8, "little") + zlib.crc32(header).to_bytes(4, "little") + header
        for i, (data, padding) in enumerate(blobs):
            yield data.data
            if padding:
                yield padding
            if progress:
                progress(i + 1, len(blobs))

    write_atomically(path, chunks(), durable=durable)


def load(path: str | os.PathLike) -> Trace:
    """Read and check a trace file. Raises TraceFormatError naming what is wrong, OSError if unreadable.

    Only a regular file is read: a device (/dev/zero) or a pipe would never end. The magic, the header and the
    place of every column are checked against the file's size before its body is read, so a file that is not a
    trace is refused after reading a few bytes, however large it is.
    """
    path = Path(path)
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below like any other non-file.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        raise TraceFormatError(f"{path}: not a regular file (a device, pipe or socket), so not an agdb trace")
    with os.fdopen(fd, "rb", buffering=0) as f:
        return _guarded(lambda: _read_file(f, info.st_size, str(path)), str(path))


def loads(data: bytes, name: str = "<bytes>") -> Trace:
    """Check and decode the bytes of a trace file (see `load`). Every failure is a TraceFormatError."""
    return _guarded(lambda: _decode(data, name), name)


def _guarded(read: Callable[[], Trace], name: str) -> Trace:
    try:
        return read()
    except TraceFormatError:
        raise
    except _UNEXPECTED as e:  # a corruption no check names: still one line that says which file
        detail = printable(" ".join(str(e).split())[:200])
        raise TraceFormatError(f"{name}: the trace is inconsistent ({type(e).__name__}: {detail})") from None


_START = len(MAGIC) + 12
"""The magic, the header's length and its CRC: the bytes before the header."""


def _header_length(start: bytes, size: int, name: str) -> tuple[int, int]:
    """(length, CRC) of the header, from the file's first _START bytes (or fewer) and its size."""
    if start[:len(MAGIC)] != MAGIC:
        hint = " (it looks like a Python pickle, which agdb never loads)" if start[:1] == b"\x80" else ""
        raise TraceFormatError(f"{name}: not an agdb trace: it does not start with {MAGIC!r}{hint}")
    if len(start) < _START:
        raise TraceFormatError(f"{name}: truncated: the header length is missing")
    header_len = int.from_bytes(start[len(MAGIC):len(MAGIC) + 8], "little")
    if header_len > _MAX_HEADER or _START + header_len > size:
        raise TraceFormatError(f"{name}: the header claims {header_len} bytes but the file has "
                               f"{size - len(MAGIC) - 12} after the magic: truncated or corrupt")
    return header_len, int.from_bytes(start[len(MAGIC) + 8:_START], "little")


def _header(raw: bytes, crc: int, name: str) -> dict:
    if zlib.crc32(raw) != crc:
        raise TraceFormatError(f"{name}: the header fails its checksum: the file is corrupt")
    return _parse_header(raw, name)


def _read_file(f, size: int, name: str) -> Trace:
    """A trace from an open file of `size` bytes: the start, the header and the layout checked before the body
    is read, straight into the memory its columns will use."""
    header_len, crc = _header_length(f.read(_START), size, name)
    header = _header(_read_exactly(f, header_len, name), crc, name)
    layout = _layout(header, size - _START - header_len, name)
    body = np.empty(size - _START - header_len, dtype=np.uint8)
    view = memoryview(body)
    got = 0
    while got < len(body):  # readinto reads at most about 2 GB a call
        n = f.readinto(view[got:])
        if not n:
            raise TraceFormatError(f"{name}: the file ended at byte {_START + header_len + got} while it was read "
                                   f"(it changed while agdb read it?)")
        got += n
    if f.read(1):
        raise TraceFormatError(f"{name}: the file grew while agdb read it")
    return _checked_trace(header, layout, view, name)


def _read_exactly(f, count: int, name: str) -> bytes:
    data = f.read(count)
    if len(data) != count:
        raise TraceFormatError(f"{name}: the file ended while agdb read its header (it changed while agdb read it?)")
    return data


def _decode(data: bytes, name: str) -> Trace:
    header_len, crc = _header_length(data[:_START], len(data), name)
    header = _header(data[_START:_START + header_len], crc, name)
    body = memoryview(data)[_START + header_len:]
    layout = _layout(header, len(body), name)
    return _checked_trace(header, layout, body, name)


def _trace(header: dict, columns: dict[str, np.ndarray], name: str) -> Trace:
    """The Trace of checked columns, once their strings, structure and meta are checked too."""
    strings = _read_strings(columns.pop("string_offsets"), columns.pop("string_bytes"), name)
    _check_structure(columns, len(strings), header, name)
    if "thread_ident" in columns:
        upgrade_v1_queues(columns, strings)
    return Trace(columns, strings, _read_meta(header.get("meta", {}), len(columns["node_name"]), name))


def _parse_header(raw: bytes, name: str) -> dict:
    """The header as a dict, or a TraceFormatError: agdb writes only finite numbers and shallow JSON."""
    def not_finite(token: str) -> float:
        raise TraceFormatError(f"{name}: the header holds {token}, which agdb never writes: corrupt file")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            not_finite(text)
        return value

    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=not_finite, parse_float=finite)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceFormatError(f"{name}: the header is not valid JSON ({e}): corrupt file") from None
    except RecursionError:
        raise TraceFormatError(f"{name}: the header nests too deeply, which agdb never writes: corrupt file") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise TraceFormatError(f"{name}: the header holds an unreadable value ({e}): corrupt file") from None
    if not isinstance(header, dict):
        raise TraceFormatError(f"{name}: the header is not a JSON object: corrupt file")
    version = header.get("format_version")
    if not _is_int(version) or version not in _READABLE:
        raise TraceFormatError(f"{name}: trace format version {version!r} is not supported (this agdb reads "
                               f"versions {', '.join(map(str, _READABLE))}); record the trace again with this "
                               f"version")
    if not _is_int(header.get("num_events")) or header["num_events"] < 0:
        raise TraceFormatError(f"{name}: the header's num_events is {header.get('num_events')!r:.80}, not a count")
    return header


def _is_int(value: object) -> bool:
    return type(value) is int  # not bool, not float: JSON that agdb writes has plain integers only


def _read_meta(meta: object, num_nodes: int, name: str) -> dict:
    """`meta` checked: every key a view reads has the form the views expect (tracer.store.meta)."""
    found = meta_problem(meta, num_nodes)
    if found:
        raise TraceFormatError(f"{name}: the header's {found}")
    return meta  # type: ignore[return-value]  # a dict: meta_problem says so otherwise


def upgrade_v1_queues(columns: dict[str, np.ndarray], strings: list[str]) -> None:
    """Version 1 named a thread's CPU queue `cpu:<thread ident>` and kept the idents in `thread_ident`: rename
    such queues `cpu:<thread row>` (the latest thread that had the ident), as version 2 does, and drop the
    idents. Adds strings to `strings` as needed."""
    idents = columns.pop("thread_ident")
    if idents.ndim != 1 or len(idents) != len(columns["thread_name"]):
        return
    row_of = {int(ident): row for row, ident in enumerate(idents.tolist())}
    names = []
    for sid in columns["queue_name"].tolist():
        kind, _, ident = strings[sid].partition(":")
        row = row_of.get(int(ident)) if kind == "cpu" and ident.isdigit() else None
        if row is None:
            names.append(sid)
        else:
            strings.append(f"cpu:{row}")
            names.append(len(strings) - 1)
    columns["queue_name"] = np.asarray(names, dtype=np.int64)


def _known_columns(version: int) -> set[str]:
    """The columns a file of `version` may hold."""
    names = {c.name for c in COLUMNS if c.since <= version} | {f"{t}_start" for t in RAGGED}
    names |= {"string_offsets", "string_bytes"}
    if version == 1:
        names.add("thread_ident")
    return names


_Entry = tuple[str, str, tuple[int, ...], int, int, int]
"""A column of the directory: (name, dtype, shape, offset, nbytes, checksum)."""


def _layout(header: dict, body_size: int, name: str) -> list[_Entry]:
    """The column directory, each column checked against its size and its place in a body of `body_size` bytes.

    Columns lie one after another in directory order, each padded to 8 bytes, and the last one ends the file:
    a gap, an overlap or a byte after the last column is refused.
    """
    version = header["format_version"]
    directory = header.get("columns")
    if not isinstance(directory, list):
        raise TraceFormatError(f"{name}: the header has no column directory")
    known = _known_columns(version)
    layout: list[_Entry] = []
    seen: set[str] = set()
    end = 0
    for entry in directory:
        col, dtype, shape, offset, nbytes, checksum = _entry(entry, known, version, name)
        if col in seen:
            raise TraceFormatError(f"{name}: column {col} appears twice in the header")
        seen.add(col)
        count = math.prod(shape)  # Python ints: a corrupt shape must not overflow
        if nbytes != count * np.dtype(dtype).itemsize:
            raise TraceFormatError(f"{name}: column {col} declares {nbytes} bytes for shape {list(shape)}")
        padded = nbytes + (-nbytes % 8)
        if offset + padded > body_size:
            raise TraceFormatError(f"{name}: column {col} needs bytes {offset}..{offset + padded} but the file "
                                   f"body has {body_size}: truncated or corrupt")
        if offset != end:
            raise TraceFormatError(f"{name}: column {col} starts at byte {offset} of the body, not {end} where the "
                                   f"column before it ends: corrupt file")
        end = offset + padded
        layout.append((col, dtype, shape, offset, nbytes, checksum))
    if end != body_size:
        raise TraceFormatError(f"{name}: {body_size - end} bytes follow the last column: the file is corrupt")
    missing = [c for c in (*EVENT_COLUMNS, "string_offsets", "string_bytes", "node_name", "node_nedges")
               if c not in seen]
    if missing:
        raise TraceFormatError(f"{name}: the trace lacks columns {', '.join(missing)}")
    return layout


def _columns(layout: list[_Entry], body: memoryview) -> dict[str, np.ndarray]:
    """Every column of `layout` as an array over the body's bytes (not yet checked against its checksum)."""
    return {col: np.frombuffer(body[offset:offset + nbytes], dtype=dtype).reshape(shape)
            for col, dtype, shape, offset, nbytes, _ in layout}


def _first_bad_checksum(layout: list[_Entry], body: memoryview, version: int) -> str | None:
    """The first column of `layout` whose padded bytes fail their checksum, or None."""
    for col, _, _, offset, nbytes, checksum in layout:
        if column_checksum(body[offset:offset + nbytes + (-nbytes % 8)], version) != checksum:
            return col
    return None


def _checked_trace(header: dict, layout: list[_Entry], body: memoryview, name: str) -> Trace:
    """The Trace of a body whose layout is checked: its checksums first (a column that fails its checksum is the
    error, whatever else is wrong), then its strings, structure and meta. In one thread: XXH3-64 takes under a
    millisecond of a 1M-event load, less than a second thread cost to start and join on a busy machine."""
    bad = _first_bad_checksum(layout, body, header["format_version"])
    if bad is not None:
        raise TraceFormatError(f"{name}: column {bad} fails its checksum: the file is corrupt")
    return _trace(header, _columns(layout, body), name)


def _entry(entry: object, known: set[str], version: int, name: str) -> tuple[str, str, tuple[int, ...], int, int, int]:
    """(name, dtype, shape, offset, nbytes, checksum) of a directory entry: a column a file of `version` has,
    each field of the right type and sign."""
    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"{name}: a column entry of the header is malformed ({what}): {entry!r:.200}")

    if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
        raise bad(f"it needs exactly the keys {', '.join(sorted(_ENTRY_KEYS))}")
    col, dtype, shape = entry["name"], entry["dtype"], entry["shape"]
    if not isinstance(col, str) or not isinstance(dtype, str):
        raise bad("name and dtype are strings")
    if col in DERIVED_COLUMNS:
        raise TraceFormatError(f"{name}: the file stores {col}, which agdb computes itself")
    if col not in known:  # repr: a name that is not a column may hold anything
        raise TraceFormatError(f"{name}: the file holds a column {col!r:.80}, which a version {version} trace does "
                               f"not have")
    if dtype not in _ALLOWED_DTYPES:
        raise TraceFormatError(f"{name}: column {col} has dtype {dtype!r:.40}, which agdb never writes")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 2 or not all(_is_int(d) and d >= 0 for d in shape):
        raise TraceFormatError(f"{name}: column {col} has shape {shape!r:.80}, which agdb never writes")
    numbers = [entry[k] for k in ("offset", "nbytes", "checksum")]
    if not all(_is_int(v) and v >= 0 for v in numbers):
        raise bad("offset, nbytes and checksum are integers >= 0")
    return (col, dtype, tuple(shape), *numbers)


def _read_strings(offsets: np.ndarray, blob: np.ndarray, name: str) -> list[str]:
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or blob.ndim != 1 or blob.dtype != np.uint8 or \
            not len(offsets) or offsets[0] != 0 or offsets[-1] != len(blob) or \
            (len(offsets) > 1 and (np.diff(offsets.astype(np.int64)) < 0).any()):
        raise TraceFormatError(f"{name}: the string table is corrupt")
    raw = blob.tobytes()
    try:
        return [raw[s:e].decode("utf-8") for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    except UnicodeDecodeError:
        raise TraceFormatError(f"{name}: the string table is not valid UTF-8") from None


def _check_structure(c: dict, num_strings: int, header: dict, name: str) -> None:
    """Check the columns against the schema: each present (or optional, or newer than the file), one-dimensional,
    of an integer dtype, as long as its table, every index within the table it names; then every ragged table
    and every event's payload."""
    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"{name}: {what}")

    version = header["format_version"]
    for col in COLUMNS:
        arr = c.get(col.name)
        if arr is None:
            if col.optional or col.since > version:
                continue
            raise bad(f"the trace lacks column {col.name}")
        _check_column_form(col.name, arr, name)
        if col.lowest is not None and arr.size and int(arr.min()) < col.lowest:
            raise bad(f"column {col.name} holds values below {col.lowest}")
    kinds = c["ev_kind"]
    n = len(kinds)
    if header["num_events"] != n:
        raise bad("the header and the event columns disagree on the number of events")
    if n and int(kinds.max()) >= len(Kind):
        raise bad(f"an event has an unknown kind (step {int(np.flatnonzero(kinds >= len(Kind))[0])})")
    counts = _Counts(kinds)
    sizes = {"events": n, "pushes": counts[Kind.TASK_PUSHED], "pops": counts[Kind.TASK_POPPED],
             "node": len(c["node_name"]), "frame": len(c["frame_file"]), "thread": len(c["thread_name"]),
             "queue": len(c["queue_name"]), "task": counts[Kind.GRAPH_TASK_STARTED],
             "summary_group": counts.summary_groups(), "string": num_strings,
             "edge": int(c["node_nedges"].sum(dtype=np.int64)), "summary": int(c["s_count"].sum(dtype=np.int64)),
             "dim": int(c["s_ndim"].sum(dtype=np.int64)), "source": len(c.get("source_file", ()))}
    for table, kind in RAGGED.items():
        start = c.get(f"{table}_start")
        if start is None:
            raise bad(f"the trace lacks column {table}_start")
        _check_column_form(f"{table}_start", start, name)
        if len(start) != counts[kind] + 1 or start[0] != 0 or (np.diff(start.astype(np.int64)) < 0).any():
            raise bad(f"the ragged table {table} is corrupt: its offsets are not one per event plus one, rising "
                      f"from 0")
        sizes[table] = int(start[-1])
    for col in COLUMNS:
        arr = c.get(col.name)
        if arr is None:
            continue
        if len(arr) != sizes[col.table]:
            raise bad(f"column {col.name} has {len(arr)} rows but its table ({col.table}) has {sizes[col.table]}")
        if col.refers and arr.size and int(arr.max()) >= sizes[col.refers]:
            raise bad(f"column {col.name} names a {col.refers} that does not exist")
    _check_event_fields(c, kinds, sizes, name)
    _check_sizes(c, kinds, counts, sizes, name)
    pops = c["pop_push"]
    if len(pops):
        pops = pops.astype(np.int64)
        origin = np.where(pops < -1, -pops - 2, pops)
        if int(origin.max()) >= n or int(origin.min()) < -1 or \
                (kinds[origin[origin >= 0]] != int(Kind.TASK_PUSHED)).any():
            raise bad("a TaskPopped points at no TaskPushed")


class _Counts:
    """The number of events of each kind, each counted when first asked: a comparison and a count over ev_kind
    take a tenth of a millisecond for 1M events, where np.bincount (which widens every code to 64 bits first) takes
    1.5 ms to count all fifteen kinds."""

    def __init__(self, kinds: np.ndarray) -> None:
        self.kinds = kinds
        self._counts: dict[int, int] = {}

    def __getitem__(self, kind: Kind) -> int:
        if kind not in self._counts:
            self._counts[kind] = int(np.count_nonzero(self.kinds == int(kind)))
        return self._counts[kind]

    def summary_groups(self) -> int:
        """The events of the SUMMARY_KINDS, one range of codes."""
        low, high = _SUMMARY_CODES
        return int(np.count_nonzero((self.kinds >= low) & (self.kinds <= high)))


def _check_column_form(col: str, arr: np.ndarray, name: str) -> None:
    """One dimension (s_preview: n x 3), and integers (s_preview: floats); a bool is not an index."""
    want_dims = 2 if col == "s_preview" else 1
    if arr.ndim != want_dims or (want_dims == 2 and arr.shape[1] != 3):
        raise TraceFormatError(f"{name}: column {col} has shape {list(arr.shape)}")
    if arr.dtype.kind not in ("f" if col == "s_preview" else "iu"):
        raise TraceFormatError(f"{name}: column {col} has dtype {arr.dtype.name}")


def _check_event_fields(c: dict, kinds: np.ndarray, sizes: dict, name: str) -> None:
    """Per-kind ranges of ev_node, ev_a and ev_b (schema.SPECS), so a consistent-looking file cannot crash a
    replay (NOTE [event fields in bulk])."""
    node, a, b, task = c["ev_node"], c["ev_a"], c["ev_b"], c["ev_task"]
    strings, queues = sizes["string"], sizes["queue"]
    if len(node) and int(node.min()) < 0:  # the events that name no node are few
        no_node = np.flatnonzero(node < 0)
        wrong = _NEEDS_NODE[kinds[no_node]]
        if wrong.any():
            raise TraceFormatError(f"{name}: an event that needs a node has none (step "
                                   f"{int(no_node[np.argmax(wrong)])})")
    extent = {"a": (int(a.min()), int(a.max())) if len(a) else (0, 0),
              "b": (int(b.min()), int(b.max())) if len(b) else (0, 0)}
    columns = {"a": a, "b": b}
    for wanted, ranges, what in (
            ((Kind.TASK_PUSHED, Kind.TASK_POPPED), (("a", queues),), "a queue index is out of range"),
            ((Kind.HOOK_RAN,), (("a", len(HOOK_KINDS)), ("b", strings)), "a hook event is out of range"),
            ((Kind.ERROR_RAISED,), (("a", strings), ("b", strings)), "an error event names no string"),
            ((Kind.BUFFER_WRITTEN, Kind.GRAD_CAPTURED), (("a", None),), "a slot index is negative")):
        ranges = [(col, stop) for col, stop in ranges
                  if extent[col][0] < 0 or (stop is not None and extent[col][1] >= stop)]
        if not ranges:
            continue
        wrong = np.zeros(len(kinds), dtype=bool)
        for col, stop in ranges:
            wrong |= columns[col] < 0
            if stop is not None:
                wrong |= columns[col] >= stop
        mine = kinds == int(wanted[0])
        for kind in wanted[1:]:
            mine |= kinds == int(kind)
        wrong &= mine
        if wrong.any():
            raise TraceFormatError(f"{name}: {what} (step {int(np.argmax(wrong))})")
    if len(task) and int(task.max()) > len(task):
        raise TraceFormatError(f"{name}: a graph task number is larger than the number of events (step "
                               f"{int(np.argmax(task > len(task)))})")


_NEEDS_NODE = np.zeros(len(Kind), dtype=bool)
_NEEDS_NODE[list(NODE_KINDS)] = True

# NOTE [event fields in bulk]
# Each check of an event's fields is a mask over all events, built only when the column's own minimum and maximum
# (a few microseconds) do not already show every value in range: `kinds == k` and a comparison of a column cost
# about 40 microseconds for 1M events, where listing a kind's steps (np.flatnonzero) and gathering their fields
# cost 0.6 ms or more for each kind. A failure then names the first step that is wrong, as a list would.


SLOT_ALLOWANCE = 1 << 16
"""Input slots the node table may hold beyond SLOTS_PER_ROW for each row of the file (NOTE [sizes the file
backs])."""
SLOTS_PER_ROW = 4

# NOTE [sizes the file backs]
# A count that only says how many of something there are, with no rows behind it, would let a small file make a
# view allocate without bound: `node_inputs` of 10**9 (or a grad written to slot 10**9) becomes a list of 10**9
# input slots each time the dependencies panel or `agdb show` draws the node's buffer. Counts with rows behind
# them (node_nedges, s_count, s_ndim, the ragged offsets) are checked against their tables; input slots have
# none, so all nodes together may hold SLOT_ALLOWANCE slots plus SLOTS_PER_ROW per event, edge and summary of the
# file. A recorded node has one slot per output of its forward op and usually receives a grad (a BufferWritten)
# or a summary per slot, so a real trace stays far below the bound, however large. An edge may feed a slot past
# its child's `node_inputs` (TraceBuilder does not stop a writer that describes a node with fewer): a view reads
# the edge's input_nr as a number only, so the file opens.
_SUMMARY_CODES = (int(min(SUMMARY_KINDS)), int(max(SUMMARY_KINDS)))
"""The summary kinds' codes are one range (9 to 12): two comparisons find their events, where a table lookup per
event cost 3 ms of a 1M-event load. Plain ints, as every code compared with a column here: numpy compares an
array with an IntEnum member ten times as slowly as with an int (0.3 ms against 0.03 for 1M events)."""
assert set(SUMMARY_KINDS) == set(range(_SUMMARY_CODES[0], _SUMMARY_CODES[1] + 1))


def _check_sizes(c: dict, kinds: np.ndarray, counts: _Counts, sizes: dict, name: str) -> None:
    """One summary in each GradCaptured and GradAccumulated group, and input slots the file backs (NOTE [sizes
    the file backs])."""
    group_counts = c["s_count"]
    wrong = group_counts != 1
    if wrong.any() and (counts[Kind.GRAD_CAPTURED] or counts[Kind.GRAD_ACCUMULATED]):  # find each group's kind
        is_summary = (kinds >= _SUMMARY_CODES[0]) & (kinds <= _SUMMARY_CODES[1])
        group_kinds = np.compress(is_summary, kinds)
        wrong &= (group_kinds == int(Kind.GRAD_CAPTURED)) | (group_kinds == int(Kind.GRAD_ACCUMULATED))
        if wrong.any():
            group = int(np.argmax(wrong))
            step = int(np.flatnonzero(is_summary)[group])
            kind = Kind(int(kinds[step])).name.title().replace("_", "")
            raise TraceFormatError(f"{name}: a {kind} event holds {int(group_counts[group])} tensor summaries, not "
                                   f"one (step {step})")
    # The replay gives a node max(node_inputs, 1) slots, and more when a grad reaches a slot past them (a writer
    # may describe a node with fewer slots than its edges feed): each such BufferWritten adds up to its slot + 1.
    # Each count is clipped to one past the bound first, so that no sum can overflow int64 and pass.
    allowed = SLOT_ALLOWANCE + SLOTS_PER_ROW * (sizes["events"] + sizes["edge"] + sizes["summary"])
    limits = np.clip(c["node_inputs"].astype(np.int64), 1, allowed + 1)
    described = int(limits.sum())
    a = c["ev_a"]
    writes = counts[Kind.BUFFER_WRITTEN]
    if writes and described + writes * (min(int(a.max()), allowed) + 1) > allowed:  # the bound is not plain
        steps = np.flatnonzero(kinds == int(Kind.BUFFER_WRITTEN))
        reached = np.minimum(a[steps].astype(np.int64), allowed) + 1
        described += int(np.maximum(reached - limits[c["ev_node"][steps]], 0).sum())
    if described > allowed:
        raise TraceFormatError(f"{name}: the nodes' input slots (as described, or as far as a grad reaches) number "
                               f"{described:,} or more, more than a trace of {sizes['events']:,} events holds "
                               f"({allowed:,}): corrupt file")
