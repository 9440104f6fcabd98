"""The status line's sparklines: the ready queues' length and the seq_nrs taken per step, checked against the
replay's own queues and a count of SeqNrBumped events, and drawn as bars scaled to the largest value."""
from __future__ import annotations

import numpy as np

from agdb.app.demo import record_example
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store.events import SeqNrBumped
from agdb.tracer.views.sparkline import BARS, bucket_of, queue_lengths, seq_nr_taken, sparkline


def test_queue_lengths_match_the_replay():
    """At every step, queue_lengths equals the number of tasks in the replayed state's ready queues."""
    trace = record_example()
    replay = Replay(trace)
    lengths = queue_lengths(trace)
    want = [sum(len(q.tasks) for q in replay.state_at(step).ready_queues) for step in range(len(trace))]
    assert lengths.tolist() == want and max(want) >= 2


def test_seq_nr_taken_counts_the_bumps():
    """seq_nr_taken at a step counts the SeqNrBumped events up to it."""
    trace = record_example()
    bumps = np.cumsum([isinstance(e, SeqNrBumped) for e in trace])
    assert seq_nr_taken(trace).tolist() == bumps.tolist()


def test_sparkline_scales_to_the_peak():
    """Each character is its bucket's peak on eight heights; zero is a space; the width is kept."""
    assert sparkline(np.array([0, 1, 2, 3, 4, 5, 6, 7, 8]), 9) == " " + BARS
    assert sparkline(np.array([0, 0, 8, 0]), 2) == " █"
    assert len(sparkline(np.arange(1000), 20)) == 20
    assert sparkline(np.zeros(5, dtype=np.int64), 3) == "   "
    assert bucket_of(0, 1000, 20) == 0 and bucket_of(999, 1000, 20) == 19 and bucket_of(50, 1000, 20) == 1
