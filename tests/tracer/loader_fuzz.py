"""Loader fuzzing: mutated and inconsistent trace files are refused with a TraceFormatError, or load into a trace
that every tool can use (decode, replay every step, `agdb show`, `culprits`, `export` to DOT, the TUI).

Cases, from a seeded random generator, over a few recorded seed traces:
- `flip`: bits flipped anywhere in a valid file;
- `truncate`: the file cut short;
- `append`: bytes added after the last column;
- `header`: a value of the JSON header replaced, removed or nested deep, its CRC recomputed (so only the checks
  after the CRC can object);
- `writer`: columns, strings, meta or the event count made inconsistent (values out of range, rows added or
  dropped, wrong dtypes and shapes, columns missing or unknown) and written with agdb's own `save`, so every
  checksum is right.

`python -m tests.tracer.loader_fuzz --n 5000 [--seed 1] [--tui-every 1]` runs thousands and prints a summary;
tests/tracer/test_loader_fuzz.py runs a small count in the normal suite.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import functools
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

MAGIC = b"AGDB-TRACE\n"
CASE_TIMEOUT_S = 60
"""A case that takes longer than this counts as a hang."""
KINDS = ("flip", "truncate", "append", "header", "writer")


# -- seed traces --------------------------------------------------------------------------------------------------
def _record_seeds() -> list:
    from agdb import engine, tracer
    from tests.engine.helpers import run_in_thread

    class Planned(Exception):
        pass

    class Reent(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            with engine.enable_grad():
                q = a.detach().requires_grad_()
                (q.exp() * 3).sin().sum().backward()
            return g * 3

    def diamond():
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        with tracer.record() as rec:
            y = x.exp()
            (y.sin() + y.cos()).sum().backward()
        return rec.trace

    def grads_hooks_reentrant():
        x = engine.tensor([0.5, -1.0, 2.0], requires_grad=True)
        w = engine.tensor([1.5, 0.25, -3.0], requires_grad=True)
        with tracer.record() as rec:
            y = Reent.apply(x * w)
            y.register_hook(lambda g: g * 2)
            z = (y.tanh() * w).sum()
            engine.autograd.grad(z, [x], retain_graph=True, create_graph=True)
            z.backward(inputs=[w])
        return rec.trace

    def error_and_anomaly():
        x = engine.tensor([[1.0, 2.0], [3.0, float("nan")]], requires_grad=True)
        with tracer.record() as rec, engine.autograd.set_detect_anomaly(True, check_nan=False):
            y = (x.sigmoid() * x).sum()

            def fail(grad_outputs):
                raise Planned("planned")

            y.grad_fn.register_prehook(fail)
            try:
                y.backward()
            except Planned:
                pass
        return rec.trace

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns about the planned error
        return [run_in_thread(f) for f in (diamond, grads_hooks_reentrant, error_and_anomaly)]


@functools.lru_cache(maxsize=1)
def seeds() -> tuple[tuple[Any, bytes], ...]:
    """(trace, the bytes of its saved file) of each seed program."""
    from agdb.tracer.store.tracefile import save

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, trace in enumerate(_record_seeds()):
            path = Path(tmp) / f"seed{i}.agdb"
            save(trace, path, durable=False)
            out.append((trace, path.read_bytes()))
    return tuple(out)


# -- file surgery -----------------------------------------------------------------------------------------------
def split(data: bytes) -> tuple[dict, bytes]:
    """(header, body) of a valid file."""
    pos = len(MAGIC)
    size = int.from_bytes(data[pos:pos + 8], "little")
    return json.loads(data[pos + 12:pos + 12 + size]), data[pos + 12 + size:]


def join_raw(raw: bytes, body: bytes) -> bytes:
    """A file from header bytes (their CRC computed afresh) and a body."""
    return MAGIC + len(raw).to_bytes(8, "little") + zlib.crc32(raw).to_bytes(4, "little") + raw + body


class _Raw:
    """What `save` reads of a trace, with any columns, strings and meta: lets the real writer write nonsense."""

    def __init__(self, columns: dict, strings: list, meta: Any, num_events: int) -> None:
        self.columns, self.strings, self.meta, self._n = columns, strings, meta, num_events

    def __len__(self) -> int:
        return self._n


WEIRD_VALUES = [-(2**70), -(2**63), -3, -2, -1, 0, 1, 2, 3, 7, 255, 2**15, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1,
                2**64, 10**30, 0.5, -0.0, float("inf"), float("-inf"), float("nan"), True, False, None, "", "x",
                "1", "int64", "bool", [], [0], [1, 2], [2**40, 2**40], {}, {"a": 1}]
WEIRD_STRINGS = ["", "Weird[/]", "[bold red]x[/]", "\x1b[2J\x1b[31mred\x1b[0m", "\x07\x08\r\n\t", "a" * 2000,
                 "/etc/passwd", "../../../etc/shadow", "/dev/zero", "\u202eevil", "x\x00y", "cpu:99", "cuda:0",
                 "cpu:abc", "torch::autograd::AccumulateGrad", "MulBackward0"]


DEEP = "<deeply nested>"
"""Stands for a value nested `depth` lists deep in header_case."""


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _set(root: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return root


def header_case(rng: random.Random, data: bytes) -> bytes:
    """A header value replaced, removed, nested deep or given Infinity/NaN; the CRC recomputed."""
    header, body = split(data)
    depth = 0
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(header))
        path = rng.choice(paths)
        how = rng.random()
        if how < 0.12 and path:
            header = _set(header, path, None, delete=True)
        elif how < 0.2:
            header = _set(header, path, DEEP)
            depth = rng.choice([50, 5000, 100_000])
        elif how < 0.35 and path and isinstance(path[-1], str):
            header = _set(header, path, rng.choice(WEIRD_STRINGS))
        elif how < 0.45 and "columns" in header and isinstance(header.get("columns"), list) and header["columns"]:
            cols = header["columns"]
            pick = rng.randrange(len(cols))
            choice = rng.random()
            if choice < 0.3:
                cols.append(copy.deepcopy(cols[pick]))  # a duplicate entry
            elif choice < 0.6:
                del cols[pick]
            else:
                other = rng.randrange(len(cols))
                cols[pick]["name"], cols[other]["name"] = cols[other].get("name"), cols[pick].get("name")
        else:
            value = rng.choice(WEIRD_VALUES)
            if isinstance(value, int) and not isinstance(value, bool) and rng.random() < 0.3:
                value += rng.randint(-8, 8)
            header = _set(header, path, copy.deepcopy(value))
    text = json.dumps(header, allow_nan=True)  # Infinity and NaN where the values say so
    # Deep nesting is spliced in as text: json.dumps itself would recurse too deep.
    text = text.replace(json.dumps(DEEP), "[" * depth + "0" + "]" * depth)
    return join_raw(text.encode("utf-8"), body)


def writer_case(rng: random.Random, trace: Any) -> bytes:
    """The trace's columns, strings, meta or event count made inconsistent, written by `save`."""
    from agdb.tracer.store.schema import DERIVED_COLUMNS
    from agdb.tracer.store.tracefile import save

    columns = {k: np.array(v) for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}
    strings = list(trace.strings)
    meta: Any = copy.deepcopy(trace.meta)
    n = len(trace)
    for _ in range(rng.randint(1, 3)):
        what = rng.random()
        if what < 0.08:
            strings = _mutate_strings(rng, strings)
        elif what < 0.14:
            meta = _mutate_meta(rng, meta)
        elif what < 0.18:
            n = rng.choice([0, n - 1, n + 1, 2**40])
        else:
            name = rng.choice(sorted(columns) + ["node_stack", "no_such_column"])
            _mutate_column(rng, columns, name)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.agdb"
        try:
            save(_Raw(columns, strings, meta, n), path, durable=False)
        except (TypeError, ValueError, OverflowError, UnicodeEncodeError):
            return b""  # the writer refused what it was given (e.g. meta that is not JSON): nothing to load
        return path.read_bytes()


def _mutate_strings(rng: random.Random, strings: list) -> list:
    strings = list(strings)
    how = rng.random()
    if how < 0.3 and strings:
        del strings[rng.randrange(len(strings))]
    elif how < 0.5:
        strings.append(rng.choice(WEIRD_STRINGS))
    elif strings:
        strings[rng.randrange(len(strings))] = rng.choice(WEIRD_STRINGS)
    return strings


def _mutate_meta(rng: random.Random, meta: Any) -> Any:
    choices = [None, [], "engine", 3, {"source": 3}, {"source": "x" * 1000}, {"provenance": []},
               {"provenance": {"seq_nr_bumped": 5, "task_pushed": "missing"}}, {"provenance": "observed"},
               {"source": "\x1b[31m[red]x[/]"}]
    return copy.deepcopy(rng.choice(choices))


def _mutate_column(rng: random.Random, columns: dict, name: str) -> None:
    arr = columns.get(name)
    if arr is None:
        size = rng.choice([0, 1, 3, 50])
        columns[name] = np.asarray([rng.randint(-2, 5) for _ in range(size)], dtype=np.int64)
        return
    how = rng.random()
    if how < 0.45 and arr.size:
        arr = arr.astype(np.int64) if arr.dtype.kind in "iub" else arr.copy()
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(arr.shape[0])
            top = int(np.max(arr)) if arr.dtype.kind in "iu" else 3
            value = rng.choice([-3, -2, -1, 0, 1, top, top + 1, top + 2, 2**31 - 1, 2**62,
                                rng.randint(-5, 2 * top + 5)])
            if arr.dtype.kind == "f":
                value = rng.choice([float("nan"), float("inf"), -1e30, 0.0])
            arr[i] = value
    elif how < 0.55:
        arr = arr[:-1] if rng.random() < 0.5 else arr[1:]
    elif how < 0.65 and arr.size:
        arr = np.concatenate([arr, arr[rng.randrange(arr.shape[0]):][:1]])
    elif how < 0.7:
        arr = arr.reshape(arr.shape[0], 1) if arr.ndim == 1 else arr.reshape(-1)
        if arr.ndim == 2 and rng.random() < 0.5:
            arr = np.concatenate([arr, arr], axis=1)
    elif how < 0.75:
        arr = arr.astype(bool)
    elif how < 0.8:
        arr = arr.astype(np.float64)
    elif how < 0.86:
        arr = arr.astype(rng.choice([np.uint8, np.int8, np.int16, np.int32, np.int64]))
    elif how < 0.9:
        del columns[name]
        return
    elif how < 0.95:
        arr = arr.copy()
        np.random.default_rng(rng.randrange(2**32)).shuffle(arr)
    else:
        arr = np.zeros_like(arr)
    columns[name] = arr


def make_case(rng: random.Random, kind: str) -> bytes:
    """One file of the given kind."""
    trace, data = rng.choice(seeds())
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "truncate":
        return data[:rng.randrange(len(data))]
    if kind == "append":
        return data + bytes(rng.randrange(256) for _ in range(rng.choice([1, 7, 8, 64])))
    if kind == "header":
        return header_case(rng, data)
    return writer_case(rng, trace)


# -- what a loaded trace must survive ------------------------------------------------------------------------------
def use_everywhere(path: Path, tui: bool) -> None:
    """Every tool on the file: decode, replay each step, show (text and JSON), culprits, export to DOT, the TUI."""
    from agdb.app.cli import main
    from agdb.tracer.replay.replay import Replay
    from agdb.tracer.replay.state_json import state_to_json
    from agdb.tracer.store.tracefile import load

    trace = load(path)
    list(trace)
    if len(trace):  # a trace of no events has no step: Replay says so, and the commands below refuse it
        replay = Replay(trace)
        for step in range(len(trace)):
            json.dumps(state_to_json(trace, replay.state_at(step)))
    out, err = io.StringIO(), io.StringIO()
    commands = [["show", str(path)], ["show", str(path), "--json"], ["show", str(path), "--step", "0"],
                ["culprits", str(path)], ["export", str(path), "-o", str(path.with_suffix(".dot"))],
                ["export", str(path), "-o", str(path.with_suffix(".dot")), "--collapse", "--step", "0"]]
    for argv in commands:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        if code != 0 and len(trace):
            raise AssertionError(f"agdb {' '.join(argv[:1])} exited {code} on a loaded trace: {err.getvalue()[-300:]}")
    if tui:
        asyncio.run(_tui(path))


async def _tui(path: Path) -> None:
    from agdb.app.app import AgdbApp
    from agdb.app.screens.step import StepScreen

    app = AgdbApp(path=str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        if isinstance(app.screen, StepScreen):
            for keys in (("G",), ("g",), ("l", "n"), ("i",), ("7", "enter")):  # 7, enter: a culprit's source
                await pilot.press(*keys)
                await pilot.pause()
    if app.return_code not in (None, 0):
        raise AssertionError(f"the TUI exited {app.return_code}")


# -- running cases ----------------------------------------------------------------------------------------------
class Hang(Exception):
    """A case ran past CASE_TIMEOUT_S."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread after `seconds` (no-op off the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        raise Hang(f"no answer after {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


MEMORY_LIMIT = 2 * 1024**3
"""Address space for `run_isolated`: plenty for agdb, and an endless read fails fast instead of filling the
machine's memory."""


def run_isolated(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run Python `code` (with sys.argv[1:] = args) in a subprocess of limited memory and time, from the repo root:
    for checks whose failure would be an endless read (/dev/zero) or a wait that never ends (a FIFO)."""
    import resource

    root = Path(__file__).resolve().parents[2]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit)


def check(data: bytes, folder: Path, tui: bool) -> tuple[str, str]:
    """('refused', message) | ('loaded', '') | ('problem', what went wrong) for one file."""
    from agdb.tracer.store.tracefile import TraceFormatError, load

    path = folder / "case.agdb"
    path.write_bytes(data)
    try:
        with deadline(CASE_TIMEOUT_S):
            try:
                load(path)
            except TraceFormatError as e:
                message = str(e)
                if not message.startswith(f"{path}: ") or "\n" in message:
                    return "problem", f"TraceFormatError without the file's name or on several lines: {message!r}"
                return "refused", message
            use_everywhere(path, tui)
    except Exception as e:  # noqa: BLE001 - every other exception is what this fuzzer looks for
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-3:]
        return "problem", f"{type(e).__name__}: {str(e)[:300]} at " + " <- ".join(
            f"{Path(f.filename).name}:{f.lineno}" for f in reversed(where))
    return "loaded", ""


def run(n: int, seed: int = 0, tui_every: int = 1, on_case: Callable[[int, str, str, str], None] | None = None
        ) -> list[tuple[int, str, str]]:
    """Run `n` cases (kinds in turn); the TUI opens on every `tui_every`-th loaded one (0: never).
    Returns the problems as (case number, kind, what)."""
    rng = random.Random(seed)
    problems = []
    loaded = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            kind = KINDS[i % len(KINDS)]
            case_rng = random.Random(rng.randrange(2**63))
            data = make_case(case_rng, kind)
            # The TUI is the slow part: it opens on every tui_every-th file that loads.
            tui = bool(tui_every) and loaded % tui_every == 0
            outcome, what = check(data, Path(tmp), tui)
            if outcome == "loaded":
                loaded += 1
            if outcome == "problem":
                problems.append((i, kind, what))
            if on_case:
                on_case(i, kind, outcome, what)
    return problems


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.tracer.loader_fuzz --n N`: exit 1 when any case raised something else than a refusal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="how many files (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tui-every", type=int, default=1, help="open the TUI on every K-th loaded file (0: never)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every problem as it happens")
    args = parser.parse_args(argv)
    counts: dict[tuple[str, str], int] = {}
    start = time.monotonic()

    def on_case(i: int, kind: str, outcome: str, what: str) -> None:
        counts[kind, outcome] = counts.get((kind, outcome), 0) + 1
        if outcome == "problem" and args.verbose:
            print(f"case {i} ({kind}): {what}", flush=True)
        if (i + 1) % 500 == 0:
            print(f"{i + 1} cases, {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)

    problems = run(args.n, args.seed, args.tui_every, on_case)
    print(f"{args.n} files in {time.monotonic() - start:.1f} s (seed {args.seed}):")
    for kind in KINDS:
        row = {o: counts.get((kind, o), 0) for o in ("refused", "loaded", "problem")}
        print(f"  {kind:9} refused {row['refused']:5}  loaded and usable {row['loaded']:5}  problems {row['problem']}")
    distinct = sorted({what for _, _, what in problems})
    for what in distinct[:40]:
        print("  PROBLEM", what)
    return 1 if problems else 0


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "200")
    sys.exit(main())
