"""The .agdb trace file: versioned, self-describing, columnar, never pickle, written atomically.

Never imports the engine, textual or rich. The columns and what they mean are in `tracer.schema` and
docs/trace-format.md; loading checks a file against that schema.

Layout: the magic line `AGDB-TRACE\\n`, an 8-byte little-endian header length, the header's CRC-32 (4
bytes), a JSON header, then each
column's raw bytes padded to 8 bytes. The header names every column with its dtype, shape, offset and a
checksum (the wrapping uint64 sum of its padded bytes), so a bit flip anywhere is caught and the error
names the column. Loading checks the magic, the version, the header, every size against the file, the
checksums and the structure (lengths agree, indices in range) before handing out a Trace.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from .schema import COLUMNS, DERIVED_COLUMNS, EVENT_COLUMNS, HOOK_KINDS, NODE_KINDS, RAGGED, SUMMARY_KINDS, Kind
from .trace import Trace

MAGIC = b"AGDB-TRACE\n"
FORMAT_VERSION = 2
"""Bumped whenever the layout or a column's meaning changes; older readers refuse newer files. Version 2
dropped the thread idents (a trace must not depend on them) and added the source and provenance to `meta`;
version 1 files still load."""
_READABLE = (1, 2)

_ALLOWED_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "float32", "float64", "bool"}
_MAX_HEADER = 64 * 1024 * 1024


class TraceFormatError(ValueError):
    """A file that is not a readable agdb trace; the message says what is wrong."""


def _checksum(buf: bytes | memoryview) -> int:
    words = np.frombuffer(buf, dtype="<u8")
    return int(words.sum(dtype=np.uint64))


def _padded(arr: np.ndarray) -> bytes:
    raw = np.ascontiguousarray(arr).tobytes()
    return raw + b"\0" * (-len(raw) % 8)


def save(trace: Trace, path: str | os.PathLike, progress: Callable[[int, int], None] | None = None,
         durable: bool = True) -> None:
    """Write `trace` to `path` atomically: a crash mid-save leaves any older file intact.

    With `durable` (the default) the data reaches the disk (fsync) before the file takes its name, so
    even a power loss cannot leave a half-written trace under that name.
    """
    path = Path(path)
    strings = [s.encode("utf-8") for s in trace.strings]
    string_offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in strings], out=string_offsets[1:])
    columns = {k: v for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}
    columns["string_offsets"] = string_offsets
    columns["string_bytes"] = np.frombuffer(b"".join(strings), dtype=np.uint8)
    blobs, directory, offset = [], [], 0
    for name, arr in columns.items():
        blob = _padded(arr)
        directory.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape), "offset": offset,
                          "nbytes": arr.nbytes, "checksum": _checksum(blob)})
        blobs.append(blob)
        offset += len(blob)
    header = json.dumps({"format_version": FORMAT_VERSION, "meta": trace.meta, "columns": directory,
                         "num_events": len(trace)}).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC)
            f.write(len(header).to_bytes(8, "little"))
            f.write(zlib.crc32(header).to_bytes(4, "little"))
            f.write(header)
            for i, blob in enumerate(blobs):
                f.write(blob)
                if progress:
                    progress(i + 1, len(blobs))
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path: str | os.PathLike) -> Trace:
    """Read and check a trace file. Raises TraceFormatError naming what is wrong, OSError if unreadable."""
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read()
    return loads(data, str(path))


def loads(data: bytes, name: str = "<bytes>") -> Trace:
    """Check and decode the bytes of a trace file (see `load`)."""
    if not data.startswith(MAGIC):
        hint = " (it looks like a Python pickle, which agdb never loads)" if data[:1] == b"\x80" else ""
        raise TraceFormatError(f"{name}: not an agdb trace: it does not start with {MAGIC!r}{hint}")
    pos = len(MAGIC)
    if len(data) < pos + 8:
        raise TraceFormatError(f"{name}: truncated: the header length is missing")
    header_len = int.from_bytes(data[pos:pos + 8], "little")
    header_crc = int.from_bytes(data[pos + 8:pos + 12], "little")
    pos += 12
    if header_len > _MAX_HEADER or pos + header_len > len(data):
        raise TraceFormatError(f"{name}: the header claims {header_len} bytes but the file has "
                               f"{len(data) - pos} after the magic: truncated or corrupt")
    if zlib.crc32(data[pos:pos + header_len]) != header_crc:
        raise TraceFormatError(f"{name}: the header fails its checksum: the file is corrupt")
    try:
        header = json.loads(data[pos:pos + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceFormatError(f"{name}: the header is not valid JSON ({e}): corrupt file") from None
    body = memoryview(data)[pos + header_len:]
    version = header.get("format_version") if isinstance(header, dict) else None
    if version not in _READABLE:
        raise TraceFormatError(f"{name}: trace format version {version!r} is not supported (this agdb reads "
                               f"version {FORMAT_VERSION}); record the trace again with this version")
    columns = _read_columns(header, body, name)
    strings = _read_strings(columns.pop("string_offsets"), columns.pop("string_bytes"), name)
    _check_structure(columns, len(strings), header, name)
    if "thread_ident" in columns:
        upgrade_v1_queues(columns, strings)
    meta = header.get("meta") if isinstance(header.get("meta"), dict) else {}
    try:
        return Trace(columns, strings, meta)
    except (KeyError, IndexError, ValueError) as e:
        raise TraceFormatError(f"{name}: inconsistent trace tables ({e})") from None


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


def _read_columns(header: dict, body: memoryview, name: str) -> dict[str, np.ndarray]:
    directory = header.get("columns")
    if not isinstance(directory, list):
        raise TraceFormatError(f"{name}: the header has no column directory")
    columns: dict[str, np.ndarray] = {}
    for entry in directory:
        try:
            col, dtype, shape = str(entry["name"]), str(entry["dtype"]), tuple(int(s) for s in entry["shape"])
            offset, nbytes, checksum = int(entry["offset"]), int(entry["nbytes"]), int(entry["checksum"])
        except (KeyError, TypeError, ValueError):
            raise TraceFormatError(f"{name}: a column entry of the header is malformed: {entry!r:.200}") from None
        if dtype not in _ALLOWED_DTYPES:
            raise TraceFormatError(f"{name}: column {col} has dtype {dtype!r}, which agdb never writes")
        count = math.prod(shape)  # Python ints: a corrupt shape must not overflow
        if min(shape, default=0) < 0 or nbytes != count * np.dtype(dtype).itemsize:
            raise TraceFormatError(f"{name}: column {col} declares {nbytes} bytes for shape {list(shape)}")
        padded = nbytes + (-nbytes % 8)
        if offset < 0 or offset + padded > len(body):
            raise TraceFormatError(f"{name}: column {col} needs bytes {offset}..{offset + padded} but the file "
                                   f"body has {len(body)}: truncated or corrupt")
        if _checksum(body[offset:offset + padded]) != checksum:
            raise TraceFormatError(f"{name}: column {col} fails its checksum: the file is corrupt")
        arr = np.frombuffer(body[offset:offset + nbytes], dtype=dtype).reshape(shape)
        columns[col] = arr
    missing = [c for c in (*EVENT_COLUMNS, "string_offsets", "string_bytes", "node_name", "node_nedges")
               if c not in columns]
    derived = [c for c in columns if c in DERIVED_COLUMNS]
    if derived:
        raise TraceFormatError(f"{name}: the file stores {', '.join(derived)}, which agdb computes itself")
    if missing:
        raise TraceFormatError(f"{name}: the trace lacks columns {', '.join(missing)}")
    return columns


def _read_strings(offsets: np.ndarray, blob: np.ndarray, name: str) -> list[str]:
    if offsets.ndim != 1 or not len(offsets) or offsets[0] != 0 or offsets[-1] != len(blob) or \
            (len(offsets) > 1 and (np.diff(offsets) < 0).any()):
        raise TraceFormatError(f"{name}: the string table is corrupt")
    raw = blob.tobytes()
    try:
        return [raw[s:e].decode("utf-8") for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    except UnicodeDecodeError:
        raise TraceFormatError(f"{name}: the string table is not valid UTF-8") from None


def _check_structure(c: dict, num_strings: int, header: dict, name: str) -> None:
    """Check the columns against the schema: each present, 1-D, as long as its table, every index in range."""
    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"{name}: {what}")

    for col in COLUMNS:
        arr = c.get(col.name)
        if arr is None:
            if col.optional:
                continue
            raise bad(f"the trace lacks column {col.name}")
        want_dims = 2 if col.name == "s_preview" else 1
        if arr.ndim != want_dims or (want_dims == 2 and arr.shape[1] != 3):
            raise bad(f"column {col.name} has shape {list(arr.shape)}")
        if (col.name == "s_preview") != (arr.dtype.kind == "f"):
            raise bad(f"column {col.name} has dtype {arr.dtype.name}")
        if col.lowest is not None and arr.size and int(arr.min()) < col.lowest:
            raise bad(f"column {col.name} holds values below {col.lowest}")
    kinds = c["ev_kind"]
    n = len(kinds)
    if header.get("num_events") != n:
        raise bad("the header and the event columns disagree on the number of events")
    if n and int(kinds.max()) >= len(Kind):
        raise bad(f"an event has an unknown kind (step {int(np.flatnonzero(kinds >= len(Kind))[0])})")
    counts = np.bincount(kinds, minlength=len(Kind))
    sizes = {"events": n, "pushes": counts[Kind.TASK_PUSHED], "pops": counts[Kind.TASK_POPPED],
             "node": len(c["node_name"]), "frame": len(c["frame_file"]), "thread": len(c["thread_name"]),
             "queue": len(c["queue_name"]), "task": counts[Kind.GRAPH_TASK_STARTED],
             "summary_group": int(sum(counts[k] for k in SUMMARY_KINDS)), "string": num_strings,
             "edge": int(c["node_nedges"].sum(dtype=np.int64)), "summary": int(c["s_count"].sum(dtype=np.int64)),
             "dim": int(c["s_ndim"].sum(dtype=np.int64))}
    for table, kind in RAGGED.items():
        start = c.get(f"{table}_start")
        if start is None or start.ndim != 1 or len(start) != counts[kind] + 1 or start[0] != 0 or \
                (len(start) > 1 and (np.diff(start) < 0).any()):
            raise bad(f"the ragged table {table} is corrupt")
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
    pops = c["pop_push"]
    if len(pops):
        origin = np.where(pops < -1, -pops - 2, pops)
        pushes = np.flatnonzero(kinds == Kind.TASK_PUSHED)
        if int(origin.max()) >= n or int(origin.min()) < -1 or not np.isin(origin[origin >= 0], pushes).all():
            raise bad("a TaskPopped points at no TaskPushed")


def _check_event_fields(c: dict, kinds: np.ndarray, sizes: dict, name: str) -> None:
    """Per-kind ranges of ev_node, ev_a and ev_b (schema.SPECS), so a consistent-looking file cannot crash a
    replay."""
    node, a, b = c["ev_node"], c["ev_a"], c["ev_b"]
    strings, queues = sizes["string"], sizes["queue"]
    checks = [
        (np.isin(kinds, NODE_KINDS) & (node < 0), "an event that needs a node has none"),
        (np.isin(kinds, [Kind.TASK_PUSHED, Kind.TASK_POPPED]) & ((a < 0) | (a >= queues)),
         "a queue index is out of range"),
        ((kinds == Kind.HOOK_RAN) & ((a < 0) | (a >= len(HOOK_KINDS)) | (b < 0) | (b >= strings)),
         "a hook event is out of range"),
        ((kinds == Kind.ERROR_RAISED) & ((a < 0) | (a >= strings) | (b < 0) | (b >= strings)),
         "an error event names no string"),
        (np.isin(kinds, [Kind.BUFFER_WRITTEN, Kind.GRAD_CAPTURED]) & (a < 0), "a slot index is negative"),
    ]
    for wrong, what in checks:
        if wrong.any():
            raise TraceFormatError(f"{name}: {what} (step {int(np.flatnonzero(wrong)[0])})")
