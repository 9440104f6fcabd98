"""The Recorder's fused points (NOTE [fused points] in engine/_observer.py) write the rows its two separate points
write: a program recorded by it and by a Recorder without them (the engine then adapts each fused call into the two
points) saves to the same bytes."""
from __future__ import annotations

import threading

import pytest

from agdb import engine as t
from agdb.tracer.sources.engine import Recorder
from agdb.tracer.store import tracefile


class TwoPointRecorder(Recorder):
    """The Recorder with its fused points hidden, so that the engine calls task_popped, node_started, buffer_written
    and task_pushed through its adapters."""

    task_popped_and_started = None
    buffer_written_and_task_pushed = None


def _chain():
    x = t.ones(4, requires_grad=True)
    y = x
    for i in range(60):
        y = y * 1.0001 if i % 3 == 0 else (y + 0.5 if i % 3 == 1 else y.sin())
    (y + x * 2.0).sum().backward()


def _hooks_grad_and_create_graph():
    x = t.tensor([1.0, 2.0], requires_grad=True)
    w = t.tensor([0.5, -0.5], requires_grad=True)
    y = (x * w).sin()
    y.register_hook(lambda g: g * 3.0)
    y.retain_grad()
    (gx,) = t.autograd.grad((y * y).sum(), x, create_graph=True)
    (gx.sum() + y.sum()).backward()


@pytest.mark.parametrize("program", [_chain, _hooks_grad_and_create_graph])
def test_fused_points_write_what_the_two_points_write(program, tmp_path):
    saved = {}
    for cls in (Recorder, TwoPointRecorder):
        def record(cls=cls):
            recorder = cls().attach()
            try:
                program()
            finally:
                saved[cls.__name__] = recorder.finish()

        th = threading.Thread(target=record, name="recording")  # a fresh seq_nr counter, the same thread name
        th.start()
        th.join()
    data = {}
    for name, trace in saved.items():
        tracefile.save(trace, tmp_path / f"{name}.agdb")
        data[name] = (tmp_path / f"{name}.agdb").read_bytes()
    assert len(saved["Recorder"]) == len(saved["TwoPointRecorder"]) > 100
    assert data["Recorder"] == data["TwoPointRecorder"]
