"""Recording stays compact (issue 17 item 8): the builder freezes its raw rows into compact numpy chunks as it
goes (NOTE [frozen chunks] in tracer/recording/builder.py), so what a recording holds per event is bounded.

The truth for the chunked trace is the same program recorded with chunks too big to ever fill (every row stays
raw until finish, the layout before chunks existed): the two traces must be equal column for column.
"""
from __future__ import annotations

import gc
import threading
import tracemalloc

import numpy as np
import pytest

from agdb import engine
from agdb.tracer import Recorder
from agdb.tracer.recording import builder as builder_module
from agdb.tracer.sources import engine as recorder_module

from .test_recorder_attach import test_attach_and_finish_racing_backwards_on_another_thread_always_load

BYTES_PER_EVENT = 100
"""The issue's budget for what a recording holds per event, besides the engine's own memory."""


def _chain_program(n: int):
    x = engine.tensor([0.1, 0.2, 0.3], requires_grad=True)
    y = x
    for i in range(n):
        y = y * 1.0001 if i % 2 else y.sin()
    y.sum().backward()


def _record(n: int):
    """The trace of a chain of `n` nodes, recorded on a fresh thread (its seq_nr counter starts at 0)."""
    box = {}

    def program():
        recorder = Recorder().attach()
        _chain_program(n)
        box["trace"] = recorder.finish()
    thread = threading.Thread(target=program, name="recording")  # one name: the trace stores it
    thread.start()
    thread.join()
    return box["trace"]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 64 rows, so that a small program freezes many (the recorder reads its own copy of CHUNK)."""
    monkeypatch.setattr(builder_module, "CHUNK", 64)
    monkeypatch.setattr(recorder_module, "CHUNK", 64)


def test_chunked_trace_equals_the_unchunked_one(monkeypatch):
    """The same program recorded with 64-row chunks and with no chunk ever filled gives equal columns."""
    monkeypatch.setattr(builder_module, "CHUNK", 64)
    monkeypatch.setattr(recorder_module, "CHUNK", 64)
    chunked = _record(300)
    monkeypatch.setattr(builder_module, "CHUNK", 10**9)
    monkeypatch.setattr(recorder_module, "CHUNK", 10**9)
    whole = _record(300)
    assert len(chunked) == len(whole) > 64 * 20
    assert chunked.strings == whole.strings
    assert sorted(chunked.columns) == sorted(whole.columns)
    for name, column in whole.columns.items():
        assert np.array_equal(chunked.columns[name], column, equal_nan=column.dtype.kind == "f"), name


def test_named_methods_freeze_chunks_too(small_chunks):
    """A source writing through the TraceBuilder's named methods gets its rows frozen and all of them back."""
    b = builder_module.TraceBuilder(source="test")
    t = b.thread("main")
    for k in range(1, 201):
        b.node_created(thread=t, node=k, name="ExpBackward0", seq_nr=k, topological_nr=k)
    assert b._chunks and len(b.raw_buffers().rows) < 64 and b.num_events == 200
    trace = b.finish()
    assert len(trace) == 200 and trace.num_nodes == 200


def test_attach_and_finish_race_with_chunk_freezing(tmp_path, small_chunks):
    """Attaching and finishing at random moments while chunks freeze on another thread: every trace loads."""
    test_attach_and_finish_racing_backwards_on_another_thread_always_load(tmp_path)


def test_recording_holds_at_most_the_budget_per_event(monkeypatch):
    """Recording a 3,000-node chain (21k events) holds at most BYTES_PER_EVENT per event once the graph is gone.

    Chunks of 1,024 rows: the raw rows not yet frozen are a constant (CHUNK of them at most, ~130 B each), which
    the default CHUNK would make the bulk of so small a recording. Measured with tracemalloc: everything
    allocated between attaching and the end of the backward that is still alive after the program's tensors
    are dropped is the recording's buffers (73 B per event when written).
    """
    monkeypatch.setattr(builder_module, "CHUNK", 1024)
    monkeypatch.setattr(recorder_module, "CHUNK", 1024)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        recorder = Recorder().attach()
        _chain_program(3000)
        recorder.detach()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    events = recorder.builder.num_events
    assert events > 20_000
    assert held / events <= BYTES_PER_EVENT, f"{held / events:.0f} B per event"


def test_dependency_counts_from_lazy_snapshots_equal_counting_from_the_start(monkeypatch):
    """Dependency counts read from the lazily made snapshots (every 8 decrements here, asked in a shuffled
    order) equal those counted from the start (no snapshot), at 400 random steps of a 300-node chain's trace."""
    import random

    from agdb.tracer.replay.replay import Replay
    from agdb.tracer.store import tasks

    trace = _record(300)

    def counts(snap: int, steps: list[int]) -> list:
        monkeypatch.setattr(tasks, "SNAP", snap)
        replay = Replay(trace)
        return [[tuple(a.tolist() for a in g.dependency_arrays()) for g in replay._graph_tasks_at(s)] for s in steps]

    steps = random.Random(0).sample(range(len(trace)), 400)
    assert counts(8, steps) == counts(10**9, steps)
