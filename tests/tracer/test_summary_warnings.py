"""Summarising grads numpy cannot show in a float32 preview (complex values, values past float32's range) stays
quiet: agdb's own summaries never send numpy warnings to the user's stderr."""
from __future__ import annotations

import math
import warnings

import numpy as np

from agdb.tracer.recording.builder import TraceBuilder


def _trace_of(grads: list[np.ndarray]):
    """A one-node backward whose node starts on `grads`."""
    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    b.seq_nr_bumped(thread=t, node=1, name="SumBackward0", old=0, seq_nr=1)
    b.node_created(thread=t, node=1, name="SumBackward0", seq_nr=0, topological_nr=1)
    b.graph_task_started(thread=t, graph_task=1, graph_root=1, roots=((1, 0),))
    b.node_started(thread=t, graph_task=1, node=1, inputs=grads)
    return b.finish()


def _finished_quietly(grads: list[np.ndarray]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = _trace_of(grads)
    assert [str(w.message) for w in caught] == []
    return trace


def _previews(trace) -> list[list[float]]:
    step = trace.steps_of(trace.kinds()[-1])[0]  # the NodeStarted
    return [list(s.preview) for s in trace[step].inputs]


def test_complex_grads_are_previewed_by_their_real_part_without_a_warning():
    """A complex grad, small (summarised in a block) or large (summarised at once), previews its real part."""
    small = np.array([1 + 2j, -3 - 4j], dtype=np.complex128)
    large = np.full(40, 0.5 - 7j, dtype=np.complex64)
    trace = _finished_quietly([small, large])
    assert _previews(trace) == [[1.0, -3.0], [0.5, 0.5, 0.5]]


def test_values_past_float32_range_preview_as_infinities_without_a_warning():
    """float64 values too big for the float32 preview become +-inf there, small grads and large alike."""
    small = np.array([1e39, -1e300, 2.0])
    large = np.full(40, -1e300)
    trace = _finished_quietly([small, large])
    assert _previews(trace) == [[math.inf, -math.inf, 2.0], [-math.inf] * 3]
    assert [(s.has_nan, s.has_inf) for s in trace[trace.steps_of(trace.kinds()[-1])[0]].inputs] == [(False, False)] * 2


def test_recording_the_engine_with_grads_past_float32_range_is_quiet():
    """The engine's Recorder, end to end: grads of 1e300 (small and large tensors) print no warning."""
    from agdb import engine
    from agdb.tracer.sources.engine import Recorder

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recorder = Recorder().attach()
        try:
            for size in (3, 40):
                x = engine.ones(size, dtype=engine.float64, requires_grad=True)
                (x * 1e300).sum().backward()
        finally:
            trace = recorder.finish()
    assert [str(w.message) for w in caught] == []
    assert len(trace) > 0
