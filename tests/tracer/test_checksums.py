"""Column checksums: XXH3-64 from format version 6, CRC-32 in versions 3 to 5 (whose files still load), and the
corruptions a weaker checksum lets through (two swapped words, one bit flipped both ways in two words, a burst equal
to CRC-32's polynomial) refused in a version 6 file.

The files are written here from the layout docs/trace-format.md documents, independently of
tracer.store.tracefile, and the checksums computed with xxhash and zlib directly.
"""
from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
import xxhash

from agdb.tracer.store.schema import DERIVED_COLUMNS
from agdb.tracer.store.tracefile import TraceFormatError, loads
from tests.tracer.loader_fuzz import MAGIC, seeds, split

CRC32_POLYNOMIAL = 0x1DB710641
"""CRC-32's generator polynomial (x^32 + ... + 1) as zlib reads bits, least significant first: XORed into a message
anywhere, it leaves zlib.crc32 of the message unchanged."""


def _checksum(blob: bytes, version: int) -> int:
    return xxhash.xxh3_64_intdigest(blob) if version >= 6 else zlib.crc32(blob)


def _file(trace, version: int) -> bytes:
    """The trace as a writer of `version` (5 or 6, which have the same columns) writes it."""
    columns = {k: v for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}
    strings = [s.encode("utf-8") for s in trace.strings]
    columns["string_offsets"] = np.cumsum([0] + [len(s) for s in strings]).astype(np.int64)
    columns["string_bytes"] = np.frombuffer(b"".join(strings), dtype=np.uint8)
    directory, blobs, offset = [], [], 0
    for name, arr in columns.items():
        raw = np.ascontiguousarray(arr).tobytes()
        blob = raw + b"\0" * (-len(raw) % 8)
        directory.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape), "offset": offset,
                          "nbytes": len(raw), "checksum": _checksum(blob, version)})
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps({"format_version": version, "meta": trace.meta, "columns": directory,
                      "num_events": len(trace)}).encode("utf-8")
    return MAGIC + len(raw).to_bytes(8, "little") + zlib.crc32(raw).to_bytes(4, "little") + raw + b"".join(blobs)


def _padded(data: bytes, base: int, col: dict) -> bytes:
    start = base + col["offset"]
    return data[start:start + col["nbytes"] + (-col["nbytes"] % 8)]


def test_a_saved_file_is_version_6_with_each_columns_xxh3_64():
    """agdb's own writer writes version 6, each column's checksum the XXH3-64 of its padded bytes."""
    data = seeds()[1][1]
    header, body = split(data)
    base = len(data) - len(body)
    assert header["format_version"] == 6
    assert [c["checksum"] for c in header["columns"]] == \
        [xxhash.xxh3_64_intdigest(_padded(data, base, c)) for c in header["columns"]]


@pytest.mark.parametrize("version", [5, 6])
def test_a_file_of_version_5_or_6_loads_and_a_flip_is_caught(version):
    """A file written with CRC-32 (version 5) or XXH3-64 (version 6) loads into the same events; a flipped bit in
    its last column is refused by that column's checksum."""
    trace = seeds()[1][0]
    data = _file(trace, version)
    assert list(loads(data)) == list(trace)
    with pytest.raises(TraceFormatError, match="column string_bytes fails its checksum"):
        loads(data[:-9] + bytes([data[-9] ^ 1]) + data[-8:])


def _largest_column(header: dict) -> dict:
    return max(header["columns"], key=lambda c: c["nbytes"])


def _swap_words(data: bytes, base: int, col: dict) -> bytes:
    """Two different 8-byte words of the column swapped."""
    start = base + col["offset"]
    words = [data[start + 8 * i:start + 8 * i + 8] for i in range(col["nbytes"] // 8)]
    i, j = next((i, j) for i in range(len(words)) for j in range(i + 1, len(words)) if words[i] != words[j])
    out = bytearray(data)
    out[start + 8 * i:start + 8 * i + 8], out[start + 8 * j:start + 8 * j + 8] = words[j], words[i]
    return bytes(out)


def _flip_both_ways(data: bytes, base: int, col: dict) -> bytes:
    """One bit flipped in two 8-byte words of the column, once 0 -> 1 and once 1 -> 0."""
    start = base + col["offset"]
    words = [int.from_bytes(data[start + 8 * i:start + 8 * i + 8], "little") for i in range(col["nbytes"] // 8)]
    i, j, bit = next((i, j, bit) for bit in range(64) for i in range(len(words)) for j in range(i + 1, len(words))
                     if (words[i] >> bit & 1) != (words[j] >> bit & 1))
    out = bytearray(data)
    for w in (i, j):
        out[start + 8 * w + bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def _crc32_burst(data: bytes, base: int, col: dict) -> bytes:
    """CRC-32's polynomial XORed into the column's bytes, 11 bits in: 15 bits flipped over 33."""
    start = base + col["offset"]
    out = bytearray(data)
    pattern = (CRC32_POLYNOMIAL << 11).to_bytes(6, "little")
    for k, byte in enumerate(pattern):
        out[start + k] ^= byte
    return bytes(out)


CORRUPTIONS = {"two swapped words": _swap_words, "one bit flipped both ways in two words": _flip_both_ways,
               "a burst equal to CRC-32's polynomial": _crc32_burst}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_version_6_file_refuses_what_weaker_checksums_miss(corruption):
    """Each corruption, in the largest column of a version 6 file, is refused by that column's checksum; the
    wrapping sum of versions 1 and 2 misses the first two, and CRC-32 (versions 3 to 5) misses the burst."""
    trace = seeds()[1][0]
    data = _file(trace, 6)
    header, body = split(data)
    base = len(data) - len(body)
    col = _largest_column(header)
    bad = CORRUPTIONS[corruption](data, base, col)
    before, after = _padded(data, base, col), _padded(bad, base, col)
    assert before != after and len(bad) == len(data)
    if corruption == "a burst equal to CRC-32's polynomial":
        assert zlib.crc32(after) == zlib.crc32(before)
    else:
        words = (np.frombuffer(b, dtype="<u8").sum(dtype=np.uint64) for b in (before, after))
        assert next(words) == next(words)
    with pytest.raises(TraceFormatError, match=f"column {col['name']} fails its checksum"):
        loads(bad)

