"""The .agdb trace file: versioned, self-describing, columnar, never pickle, written atomically.

Imports numpy and the standard library only.

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

from .trace import DERIVED_COLUMNS, EVENT_COLUMNS, SUMMARY_KINDS, Trace

MAGIC = b"AGDB-TRACE\n"
FORMAT_VERSION = 1
"""Bumped whenever the layout or a column's meaning changes; older readers refuse newer files."""

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
    if version != FORMAT_VERSION:
        raise TraceFormatError(f"{name}: trace format version {version!r} is not supported (this agdb reads "
                               f"version {FORMAT_VERSION}); record the trace again with this version")
    columns = _read_columns(header, body, name)
    strings = _read_strings(columns.pop("string_offsets"), columns.pop("string_bytes"), name)
    _check_structure(columns, len(strings), header, name)
    meta = header.get("meta") if isinstance(header.get("meta"), dict) else {}
    try:
        return Trace(columns, strings, meta)
    except (KeyError, IndexError, ValueError) as e:
        raise TraceFormatError(f"{name}: inconsistent trace tables ({e})") from None


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


def _bounded(columns: dict, col: str, low: int, high: int, name: str) -> None:
    arr = columns.get(col)
    if arr is None:
        raise TraceFormatError(f"{name}: the trace lacks column {col}")
    if arr.size and (int(arr.min()) < low or int(arr.max()) >= high):
        raise TraceFormatError(f"{name}: column {col} holds values outside [{low}, {high})")


def _check_structure(c: dict, num_strings: int, header: dict, name: str) -> None:
    from .events import (
        KIND_CODES,
        KINDS,
        DependenciesComputed,
        ExecInfoComputed,
        GraphTaskStarted,
        TaskPopped,
        TaskPushed,
    )

    n = len(c["ev_kind"])
    if header.get("num_events") != n or any(len(c[col]) != n for col in EVENT_COLUMNS):
        raise TraceFormatError(f"{name}: the event columns disagree on the number of events")
    num_nodes = len(c["node_name"])
    _bounded(c, "ev_kind", 0, len(KINDS), name)
    _bounded(c, "ev_node", -1, max(num_nodes, 1), name)
    _bounded(c, "ev_thread", 0, max(len(c.get("thread_ident", ())), 1), name)
    for col in ("node_name", "node_device", "frame_file", "frame_func", "frame_source", "thread_name",
                "queue_name", "s_dtype", "s_device"):
        _bounded(c, col, 0, max(num_strings, 1), name)
    if "node_stack" in c:  # optional: written only for traces recorded under anomaly mode
        _bounded(c, "node_stack", -1, max(num_strings, 1), name)
    _bounded(c, "node_frame", -1, max(len(c.get("frame_file", ())), 1), name)
    _bounded(c, "edge_child", -1, max(num_nodes, 1), name)
    for col in ("deps_node", "pruned_node", "needed_node", "captured_node", "task_root", "task_roots_node",
                "task_inputs_node"):
        _bounded(c, col, -1, max(num_nodes, 1), name)
    kinds = c["ev_kind"]
    counts = np.bincount(kinds, minlength=len(KINDS))
    for count_col, items_col in (("node_nedges", "edge_child"), ("s_count", "s_info"), ("s_ndim", "s_dims")):
        if count_col not in c or items_col not in c or int(np.asarray(c[count_col], dtype=np.int64).sum()) != \
                len(c[items_col]) or (len(c[count_col]) and int(c[count_col].min()) < 0):
            raise TraceFormatError(f"{name}: {count_col} does not add up to the length of {items_col}")
    owners = [("push_seq", [KIND_CODES[TaskPushed]]), ("pop_push", [KIND_CODES[TaskPopped]]),
              ("task_root", [KIND_CODES[GraphTaskStarted]]), ("s_count", list(SUMMARY_KINDS))]
    for col, kind_list in owners:
        if len(c.get(col, ())) != int(sum(counts[k] for k in kind_list)):
            raise TraceFormatError(f"{name}: column {col} does not match the number of its events")
    for ragged, kind in (("deps", DependenciesComputed), ("pruned", DependenciesComputed),
                         ("needed", ExecInfoComputed), ("captured", ExecInfoComputed),
                         ("task_roots", GraphTaskStarted), ("task_inputs", GraphTaskStarted)):
        start = c.get(f"{ragged}_start")
        first_field = next((k for k in c if k.startswith(ragged + "_") and k != f"{ragged}_start"), None)
        if start is None or first_field is None or len(start) != counts[KIND_CODES[kind]] + 1 or start[0] != 0 \
                or start[-1] != len(c[first_field]) or (len(start) > 1 and (np.diff(start) < 0).any()):
            raise TraceFormatError(f"{name}: the ragged table {ragged} is corrupt")
    _check_event_fields(c, kinds, num_strings, name)
    pushes = np.flatnonzero(kinds == KIND_CODES[TaskPushed])
    pops = c.get("pop_push")
    if pops is not None and len(pops):
        origin = np.where(pops < -1, -pops - 2, pops)
        if int(origin.max()) >= n or int(origin.min()) < -1 or not np.isin(origin[origin >= 0], pushes).all():
            raise TraceFormatError(f"{name}: a TaskPopped points at no TaskPushed")


def _check_event_fields(c: dict, kinds: np.ndarray, num_strings: int, name: str) -> None:
    """Per-kind ranges of ev_node, ev_a and ev_b, so a consistent-looking file cannot crash a replay."""
    from . import events as ev

    code = ev.KIND_CODES
    needs_node = [code[k] for k in (ev.SeqNrBumped, ev.NodeCreated, ev.GraphTaskStarted, ev.BufferWritten, ev.HookRan,
                                    ev.NodeStarted, ev.NodeFinished, ev.GradCaptured, ev.GradAccumulated)]
    node, a, b = c["ev_node"], c["ev_a"], c["ev_b"]
    checks = [
        (np.isin(kinds, needs_node) & (node < 0), "an event that needs a node has none"),
        (c["ev_task"] < 0, "a graph task id is negative"),
        (np.isin(kinds, [code[ev.TaskPushed], code[ev.TaskPopped]]) & ((a < 0) | (a >= len(c["queue_name"]))),
         "a queue index is out of range"),
        ((kinds == code[ev.HookRan]) & ((a < 0) | (a >= len(ev.HOOK_KINDS)) | (b < 0) | (b >= num_strings)),
         "a hook event is out of range"),
        ((kinds == code[ev.ErrorRaised]) & ((a < 0) | (a >= num_strings) | (b < 0) | (b >= num_strings)),
         "an error event names no string"),
        (np.isin(kinds, [code[ev.BufferWritten], code[ev.GradCaptured]]) & (a < 0), "a slot index is negative"),
    ]
    for bad, what in checks:
        if bad.any():
            raise TraceFormatError(f"{name}: {what} (step {int(np.flatnonzero(bad)[0])})")
    for col, low in (("node_nedges", 0), ("edge_input_nr", 0), ("s_ndim", 0), ("s_dims", 0), ("task_depth", 0),
                     ("push_seq", -2), ("deps_count", 0), ("node_inputs", 0)):
        arr = c.get(col)
        if arr is not None and arr.size and int(arr.min()) < low:
            raise TraceFormatError(f"{name}: column {col} holds negative values")
