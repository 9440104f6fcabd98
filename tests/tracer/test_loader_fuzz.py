"""Every file the loader accepts can be used by every tool, and every file it refuses is refused with a
TraceFormatError: a seeded fuzz run (tests/tracer/loader_fuzz.py; thousands with `python -m
tests.tracer.loader_fuzz --n 5000`), the inconsistencies that once crashed the TUI, `show` and `export`, written
with agdb's own writer, corrupt headers, and files of older format versions.
"""
from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from agdb.tracer.store.schema import DERIVED_COLUMNS, Kind
from agdb.tracer.store.tracefile import TraceFormatError, load, loads, save
from tests.tracer.loader_fuzz import MAGIC, _Raw, check, run, run_isolated, seeds, split, use_everywhere


def test_seeded_fuzz_finds_no_file_that_crashes_a_tool():
    """300 seeded cases (flips, cuts, appended bytes, header edits, inconsistent writes): each refused with a
    TraceFormatError naming the file, or loaded and used by decode, replay, show, culprits, export and the TUI."""
    problems = run(300, seed=17, tui_every=4)
    assert not problems, "\n".join(f"case {i} ({kind}): {what}" for i, kind, what in problems[:10])


# -- inconsistent traces written with agdb's own writer ---------------------------------------------------------
def _columns(trace) -> dict:
    return {k: np.array(v) for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}


_SAME = object()


def _write(tmp_path: Path, trace, columns: dict, meta=_SAME) -> Path:
    path = tmp_path / "edited.agdb"
    save(_Raw(columns, list(trace.strings), trace.meta if meta is _SAME else meta, len(trace)), path)
    return path


def _first_with(name: str):
    """The first seed trace that has a non-empty column `name`."""
    return next(t for t, _ in seeds() if name in t.columns and len(t.columns[name]))


def _edit(name: str, change):
    def apply(columns: dict) -> None:
        columns[name] = change(columns[name])
    return apply


def _set_first(name: str, value):
    def change(arr):
        arr = arr.astype(np.int64)
        arr[0] = value(arr) if callable(value) else value
        return arr
    return _edit(name, change)


def _slot_past_the_node_inputs(columns: dict) -> None:
    a = columns["ev_a"].astype(np.int64)
    step = int(np.flatnonzero(columns["ev_kind"] == Kind.BUFFER_WRITTEN)[0])
    a[step] = 2**40  # the replay would have made a list this long
    columns["ev_a"] = a


def _falling_ragged_offsets(columns: dict) -> None:
    start = columns["deps_start"].astype(np.int64)
    start[-1] = start[-2] - 1
    columns["deps_start"] = start


INCONSISTENT = {
    "node columns of unequal length": (_edit("node_seq", lambda a: a[:-1]), "column node_seq has"),
    "a 2-D node column": (_edit("node_topo", lambda a: a.reshape(-1, 1)), "column node_topo has shape"),
    "a bool index column": (_edit("ev_thread", lambda a: a.astype(bool)), "column ev_thread has dtype 'bool'"),
    "a float index column": (_edit("edge_child", lambda a: a.astype(np.float32)), "column edge_child has dtype"),
    "an edge to a node that does not exist": (_set_first("edge_child", lambda a: 10**6),
                                              "column edge_child names a node that does not exist"),
    "a buffer slot out of range": (_slot_past_the_node_inputs, "input slots"),
    "a graph task number past the events": (_set_first("ev_task", 2**62), "graph task number"),
    "ragged offsets that fall": (_falling_ragged_offsets, "the ragged table deps is corrupt"),
    "a missing required column": (lambda c: c.pop("frame_line"), "lacks column frame_line"),
    "an unknown column": (lambda c: c.update(no_such=np.zeros(3, np.int64)), "column 'no_such'"),
    "a source line naming no string": (_set_first("source_text", 10**6), "column source_text names a string"),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_inconsistent_tables_are_refused_with_a_message(case, tmp_path):
    """Tables that disagree, written by agdb's own writer (checksums right), are refused by name."""
    change, phrase = INCONSISTENT[case]
    trace = _first_with("edge_child")
    columns = _columns(trace)
    change(columns)
    path = _write(tmp_path, trace, columns)
    with pytest.raises(TraceFormatError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}: ") and phrase in str(info.value), str(info.value)


def test_a_trace_without_its_optional_column_loads_and_works(tmp_path):
    """node_stack (the anomaly-mode tracebacks) may be left out: the trace loads and every tool and the TUI work."""
    trace = _first_with("node_stack")
    columns = _columns(trace)
    del columns["node_stack"]
    path = _write(tmp_path, trace, columns)
    assert load(path).node(0).forward_stack == ""
    use_everywhere(path, tui=True)


@pytest.mark.parametrize("meta", [None, [], "engine", {"source": 3}, {"provenance": {"task_pushed": 7}},
                                  {"provenance": {"no_such_kind": "observed"}}])
def test_a_malformed_meta_is_refused(meta, tmp_path):
    """A header whose meta is not an object of a string source and known provenances is refused."""
    trace = seeds()[0][0]
    path = _write(tmp_path, trace, _columns(trace), meta=meta)
    with pytest.raises(TraceFormatError, match="meta"):
        load(path)


# -- headers --------------------------------------------------------------------------------------------------
def _with_header_text(data: bytes, edit) -> bytes:
    header, body = split(data)
    raw = edit(json.dumps(header)).encode("utf-8")
    return MAGIC + len(raw).to_bytes(8, "little") + zlib.crc32(raw).to_bytes(4, "little") + raw + body


HEADER_EDITS = {
    "Infinity": lambda text: text.replace('"num_events": ', '"num_events": Infinity, "x": '),
    "NaN in a column entry": lambda text: text.replace('"offset": 0', '"offset": NaN', 1),
    "-Infinity in a shape": lambda text: text.replace('"shape": [', '"shape": [-Infinity, ', 1),
    "1e400 (a float that overflows)": lambda text: text.replace('"offset": 0', '"offset": 1e400', 1),
    "deep nesting": lambda text: text.replace('"meta": ', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ', "meta": '),
    "a float offset": lambda text: text.replace('"offset": 0', '"offset": 0.0', 1),
    "a bool shape": lambda text: text.replace('"shape": [', '"shape": [true, ', 1),
    "an integer of 5000 digits": lambda text: text.replace('"offset": 0', '"offset": ' + "9" * 5000, 1),
    "a header that is a list": lambda text: "[" + text + "]",
}


@pytest.mark.parametrize("case", sorted(HEADER_EDITS))
def test_odd_json_in_the_header_is_refused(case, tmp_path):
    """Infinity, NaN, deep nesting, floats and bools where integers belong (CRC recomputed): TraceFormatError."""
    data = _with_header_text(seeds()[0][1], HEADER_EDITS[case])
    with pytest.raises(TraceFormatError) as info:
        loads(data, "odd.agdb")
    assert str(info.value).startswith("odd.agdb: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("extra", [b"\0", b"\0" * 8, b"AGDB-TRACE\n", bytes(range(64))])
def test_bytes_after_the_last_column_are_refused(extra):
    """Anything appended to a valid file, even zeros the size of a padding word, is refused."""
    with pytest.raises(TraceFormatError, match="follow the last column"):
        loads(seeds()[0][1] + extra, "long.agdb")


def test_two_flips_of_one_bit_in_two_words_are_caught():
    """The same bit flipped in two 8-byte words of a column, once 0 -> 1 and once 1 -> 0 (which leaves a wrapping
    sum of the words unchanged), is refused."""
    data = seeds()[1][1]
    header, body = split(data)
    base = len(data) - len(body)
    for col in sorted(header["columns"], key=lambda c: -c["nbytes"]):
        start = base + col["offset"]
        words = [int.from_bytes(data[start + 8 * i:start + 8 * i + 8], "little") for i in range(col["nbytes"] // 8)]
        pair = next(((i, j, bit) for bit in range(64) for i in range(len(words)) for j in range(i + 1, len(words))
                     if (words[i] >> bit & 1) != (words[j] >> bit & 1)), None)
        if pair is not None:
            break
    i, j, bit = pair
    out = bytearray(data)
    for w in (i, j):
        out[start + 8 * w + bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(TraceFormatError, match=f"column {col['name']} fails its checksum"):
        loads(bytes(out))


def test_two_swapped_words_are_caught():
    """Two different 8-byte words of a column swapped (a wrapping sum cannot see it) are refused."""
    data = seeds()[1][1]
    header, body = split(data)
    base = len(data) - len(body)
    for col in sorted(header["columns"], key=lambda c: -c["nbytes"]):
        start = base + col["offset"]
        words = [data[start + 8 * i:start + 8 * i + 8] for i in range(col["nbytes"] // 8)]
        pair = next(((i, j) for i in range(len(words)) for j in range(i + 1, len(words)) if words[i] != words[j]),
                    None)
        if pair is not None:
            break
    i, j = pair
    out = bytearray(data)
    out[start + 8 * i:start + 8 * i + 8], out[start + 8 * j:start + 8 * j + 8] = words[j], words[i]
    with pytest.raises(TraceFormatError, match="fails its checksum"):
        loads(bytes(out))


# -- older versions ----------------------------------------------------------------------------------------------
def _without_columns(event):
    """An event as a trace without frame columns (before version 4) gives it: no column range."""
    return dataclasses.replace(event, col=-1, end_col=-1) if hasattr(event, "end_col") else event


def _old_file(trace, version: int) -> bytes:
    """The trace as a version 1 or 2 writer wrote it: no source table, no frame columns, no leaf names, the
    wrapping-sum checksum (and in version 1, thread idents); written here from the documented layout,
    independently of tracer.store.tracefile."""
    columns = {k: v for k, v in _columns(trace).items()
               if not k.startswith("source_") and k not in ("frame_col", "frame_end_col", "node_leaf_name")}
    strings = [s.encode("utf-8") for s in trace.strings]
    columns["string_offsets"] = np.cumsum([0] + [len(s) for s in strings]).astype(np.int64)
    columns["string_bytes"] = np.frombuffer(b"".join(strings), dtype=np.uint8)
    if version == 1:
        columns["thread_ident"] = np.arange(1000, 1000 + len(columns["thread_name"]), dtype=np.int64)
    directory, blobs, offset = [], [], 0
    for name, arr in columns.items():
        raw = np.ascontiguousarray(arr).tobytes()
        blob = raw + b"\0" * (-len(raw) % 8)
        checksum = int(np.frombuffer(blob, dtype="<u8").sum(dtype=np.uint64))
        directory.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape), "offset": offset,
                          "nbytes": len(raw), "checksum": checksum})
        blobs.append(blob)
        offset += len(blob)
    meta = copy.deepcopy(trace.meta) if version >= 2 else {}
    raw = json.dumps({"format_version": version, "meta": meta, "columns": directory,
                      "num_events": len(trace)}).encode("utf-8")
    return MAGIC + len(raw).to_bytes(8, "little") + zlib.crc32(raw).to_bytes(4, "little") + raw + b"".join(blobs)


@pytest.mark.parametrize("version", [1, 2])
def test_files_of_older_versions_still_load_and_work(version, tmp_path):
    """Version 1 and 2 files (wrapping-sum checksums, no stored source) load into the same events, and every
    tool works on them; a flipped bit in them is still caught by their old checksum."""
    trace = seeds()[1][0]
    data = _old_file(trace, version)
    loaded = loads(data)
    assert list(loaded) == [_without_columns(e) for e in trace] and not loaded.has_source
    path = tmp_path / f"v{version}.agdb"
    path.write_bytes(data)
    use_everywhere(path, tui=False)
    with pytest.raises(TraceFormatError, match="fails its checksum"):
        loads(data[:-9] + bytes([data[-9] ^ 1]) + data[-8:])


# -- the TUI, `open` and `show` on a refused file -----------------------------------------------------------------
def _infinity_file(tmp_path: Path) -> Path:
    """A header with Infinity as a column's offset (an int() of it raises OverflowError, which must not kill the
    TUI's load worker and leave "loading…" forever)."""
    path = tmp_path / "infinity.agdb"
    path.write_bytes(_with_header_text(seeds()[0][1], lambda text: text.replace('"offset": 0', '"offset": Infinity')))
    return path


async def _open_and_quit(path: Path) -> tuple[str, object, int | None]:
    from textual.widgets import Static

    from agdb.app.app import AgdbApp

    app = AgdbApp(path=str(path))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(app.query_one("#status", Static).content)
        failure = app.failure
        await pilot.press("q")
        await pilot.pause()
    return status, failure, app.return_code


@pytest.mark.parametrize("make", [_infinity_file, lambda tmp: tmp / "missing.agdb"])
def test_the_tui_says_why_a_file_is_refused_and_quits_non_zero(make, tmp_path):
    """The TUI on a refused file (a header with Infinity; a missing file) shows why, not "loading…" forever, and
    `q` quits with status 1."""
    path = make(tmp_path)
    status, failure, code = asyncio.run(_open_and_quit(path))
    assert "could not open" in status and str(path) in status and "loading" not in status
    assert failure and str(path) in failure
    assert code == 1


@pytest.mark.parametrize("command", ["open", "show", "export", "culprits"])
def test_commands_exit_non_zero_with_one_line_on_a_refused_file(command, tmp_path, capsys, monkeypatch):
    """`agdb open|show|export|culprits BAD` exits 1 and prints one `agdb: ...` line naming the file, no traceback."""
    from agdb.app import app as app_module
    from agdb.app.cli import main

    def headless_run(self, *args, **kwargs):  # what a user does: read the message, press q
        async def drive():
            async with self.run_test(size=(100, 30)) as pilot:
                await self.workers.wait_for_complete()
                await pilot.pause()
                await pilot.press("q")
        asyncio.run(drive())

    monkeypatch.setattr(app_module.AgdbApp, "run", headless_run)
    monkeypatch.setenv("COLUMNS", "2000")
    path = _infinity_file(tmp_path)
    argv = {"open": ["open", path], "show": ["show", path], "culprits": ["culprits", path],
            "export": ["export", path, "-o", tmp_path / "x.dot"]}[command]
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and out == "" and "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith(f"agdb: {path}: ") and "Infinity" in lines[0], err


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_path_that_is_no_regular_file_is_refused_at_once(kind, tmp_path):
    """`load` of a FIFO (which would wait for a writer) or /dev/zero (which never ends) is refused at once (run in
    a subprocess of limited memory and time, where a regression fails instead of filling the machine)."""
    import os

    if kind == "fifo":
        path = tmp_path / "pipe.agdb"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    code = ("import sys\nfrom agdb.tracer.store.tracefile import TraceFormatError, load\n"
            "try:\n    load(sys.argv[1])\nexcept TraceFormatError as e:\n    print('refused', e)\n")
    try:
        done = run_isolated(code, str(path), timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"load({path}) did not return")
    assert done.returncode == 0 and done.stdout.startswith("refused") and "not a regular file" in done.stdout, \
        done.stderr[-500:]


def test_fuzz_check_reports_a_crash_as_a_problem(tmp_path, monkeypatch):
    """The fuzz harness itself: a tool that raises on a loaded file is reported, not counted as usable."""
    from agdb.tracer.replay import replay

    def broken(self, step):
        raise RuntimeError("injected")

    monkeypatch.setattr(replay.Replay, "state_at", broken)
    outcome, what = check(seeds()[0][1], tmp_path, tui=False)
    assert outcome == "problem" and "injected" in what
