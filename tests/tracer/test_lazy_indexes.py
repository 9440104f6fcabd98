"""The indexes built late (NOTE [lazy task flows] in tracer/store/indexes.py, the Replay's runs) and the forward map's
shortcut (only steps after the first backward can be inside one) against what building everything up front, or
a plain scan of the events, gives."""
from __future__ import annotations

import random

from hypothesis import example, given
from hypothesis import strategies as st

from agdb.tracer.replay.forward_map import FLAGS, ForwardMap
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace
from tests.strategies import programs
from tests.tracer.programs import run_program
from tests.tracer.test_replay_properties import EXAMPLES, with_examples


def _fresh(trace: Trace) -> Trace:
    """The same trace with indexes of its own (none built yet)."""
    return Trace(dict(trace.columns), list(trace.strings), dict(trace.meta))


@given(programs(), st.integers(0, 2**32))
@example(EXAMPLES[0], 0)
@example(EXAMPLES[1], 1)
@example(EXAMPLES[2], 2)
@example(EXAMPLES[3], 3)
def test_lazily_built_indexes_give_the_states_of_eagerly_built_ones(program, seed):
    """A Replay that builds the task flows and runs when a step first needs them (stepping from 0, or seeking at
    random) shows the same state at every step as one whose indexes were all built before the first step."""
    trace = run_program(program).trace
    eager_trace = _fresh(trace)
    eager_trace.index.task_flows()
    eager = Replay(eager_trace)
    assert eager._runs_until(len(trace)) is not None or not trace.steps_of(Kind.NODE_STARTED).size
    expected = [eager.state_at(step) for step in range(len(trace))]
    stepping = Replay(_fresh(trace))
    assert [stepping.state_at(step) for step in range(len(trace))] == expected
    seeking = Replay(_fresh(trace))
    steps = list(range(len(trace)))
    random.Random(seed).shuffle(steps)
    for step in steps:
        assert seeking.state_at(step) == expected[step], step


def _runs_by_scan(events: list) -> list[tuple[int, int, int]]:
    """(start, end, thread) of every node run: a NodeStarted to the next NodeFinished or ErrorRaised that closes
    the innermost open run of its thread."""
    open_runs: dict[int, list[int]] = {}
    runs = []
    for e in events:
        if isinstance(e, ev.NodeStarted):
            open_runs.setdefault(e.thread, []).append(e.step)
        elif isinstance(e, (ev.NodeFinished, ev.ErrorRaised)) and open_runs.get(e.thread):
            runs.append((open_runs[e.thread].pop(), e.step, e.thread))
    runs += [(start, len(events), thread) for thread, starts in open_runs.items() for start in starts]
    return runs


@given(programs())
@with_examples
def test_in_backward_flag_equals_a_scan_of_the_events(program):
    """ForwardMap's in_backward flag: the node's first bump or creation lies inside a graph task started on its
    thread, or inside a node run on its thread; checked by looking at every interval for every node."""
    trace = run_program(program).trace
    events = list(trace)
    ends = {e.graph_task: e.step for e in events if isinstance(e, ev.GraphTaskFinished)}
    intervals = [(e.step, ends.get(e.graph_task, len(events)), e.thread) for e in events
                 if isinstance(e, ev.GraphTaskStarted)] + _runs_by_scan(events)
    made: dict[int, tuple[int, int]] = {}
    for e in events:
        if isinstance(e, (ev.SeqNrBumped, ev.NodeCreated)) and e.node not in made:
            made[e.node] = (e.step, e.thread)
    bit = 1 << FLAGS.index("in_backward")
    flags = ForwardMap(_fresh(trace)).flags
    for node in range(trace.num_nodes):
        expected = node in made and any(start <= made[node][0] < end and thread == made[node][1]
                                        for start, end, thread in intervals)
        assert bool(flags[node] & bit) == expected, (node, made.get(node))


def test_the_examples_make_nodes_inside_a_backward():
    """The shortcut's other branch is covered: some example makes a node while a backward runs."""
    bit = 1 << FLAGS.index("in_backward")
    assert any((ForwardMap(run_program(p).trace).flags & bit).any() for p in EXAMPLES)


@given(programs())
@with_examples
def test_dense_task_indexes_equal_sorted_ones(program):
    """The task flows built with an array slot per (task, node) (indexes.DENSE, a single backward's case) equal the
    ones built by sorting keys (a training loop's case), field by field."""
    from agdb.tracer.store import indexes

    trace = run_program(program).trace
    dense = _fresh(trace).index.task_flows()
    saved = indexes.DENSE
    indexes.DENSE = 0
    try:
        by_sorting = _fresh(trace).index.task_flows()
    finally:
        indexes.DENSE = saved
    assert sorted(dense) == sorted(by_sorting)
    for tid, t in dense.items():
        u = by_sorting[tid]
        for name in ("dec_steps", "dec_nodes", "dec_pos", "buf_nodes"):
            assert getattr(t, name).tolist() == getattr(u, name).tolist(), (tid, name)
        assert t.buffers.starts.tolist() == u.buffers.starts.tolist()
        assert t.buffers.ends.tolist() == u.buffers.ends.tolist()


def _prefix_trace(trace: Trace) -> Trace:
    """A fresh copy whose indexes answer a step from a prefix as small as one event past the first backward's
    start (NOTE [prefix indexes]): at the real minimum, only traces far larger than a test's would use prefixes."""
    fresh = _fresh(trace)
    fresh.index.PREFIX_MIN = 1
    return fresh


@given(programs(), st.integers(0, 2**32))
@example(EXAMPLES[0], 0)
@example(EXAMPLES[1], 1)
@example(EXAMPLES[2], 2)
@example(EXAMPLES[3], 3)
def test_prefix_indexes_give_the_states_and_node_states_of_whole_ones(program, seed):
    """States and node states (to_push, pruned, raised ...) at every step, seeking at random or stepping on, are
    the same when answered from indexes of a prefix of the trace as from indexes of the whole trace."""
    from agdb.tracer.replay.node_states import NodeStates

    trace = run_program(program).trace
    eager_trace = _fresh(trace)
    eager_trace.index.task_flows()
    eager, eager_states = Replay(eager_trace), NodeStates(eager_trace)
    eager_states.warm()
    expected = [eager.state_at(step) for step in range(len(trace))]
    expected_codes = [[a.tolist() for a in eager_states.at(s)] for s in expected]
    steps = list(range(len(trace)))
    for order in (steps, random.Random(seed).sample(steps, len(steps))):
        prefix_trace = _prefix_trace(trace)
        replay, states = Replay(prefix_trace), NodeStates(prefix_trace)
        for step in order:
            state = replay.state_at(step)
            assert state == expected[step], step
            assert [a.tolist() for a in states.at(state)] == expected_codes[step], step


def test_prefix_indexes_are_used_below_the_middle_of_the_backward():
    """A step early in the backward is answered from a prefix (no whole index built), one past the middle from the
    whole trace's indexes; a bound covers the step and grows twice as deep each time."""
    trace = run_program(EXAMPLES[1]).trace
    fresh = _prefix_trace(trace)
    index = fresh.index
    first = index.first_backward
    replay = Replay(fresh)
    replay.state_at(first + 1)
    assert not index._flows_done and index._runs_full is None
    bound = index._flows_part[0] if index._flows_part else index._runs_part[0]
    assert bound == first + 2
    assert index.prefix_bound(first + 3) == first + 6
    assert index.prefix_bound(len(trace) - 1) is None
    replay.state_at(len(trace) - 1)
    assert index._runs_full is not None


@given(programs(), st.integers(0, 2**32))
@example(EXAMPLES[0], 0)
@example(EXAMPLES[1], 1)
@example(EXAMPLES[2], 2)
@example(EXAMPLES[3], 3)
def test_seeks_that_start_where_every_queue_is_empty_give_the_replayed_states(program, seed):
    """With a queue checkpoint every event, seeks past the built checkpoints start from the last point where every
    queue was empty (NOTE [empty queues] in replay): the states equal those replayed from the first event."""
    trace = run_program(program).trace
    expected = [Replay(_fresh(trace)).state_at(step) for step in range(len(trace))]
    seeking = Replay(_fresh(trace), interval=1)
    for step in random.Random(seed).sample(range(len(trace)), len(trace)):
        assert seeking.state_at(step) == expected[step], step


def test_the_examples_seek_from_empty_queues():
    """The property above is not vacuous: on the examples, some seeks do start where every queue was empty."""
    used = []
    for program in EXAMPLES:
        trace = run_program(program).trace
        seeking = Replay(_fresh(trace), interval=1)
        found = seeking._from_empty

        def counted(hi: int, found=found) -> tuple:
            out = found(hi)
            used.append(out[1] is not None)
            return out

        seeking._from_empty = counted
        for step in random.Random(0).sample(range(len(trace)), len(trace)):
            seeking.state_at(step)
    assert any(used)


def test_empty_points_are_where_pushes_equal_pops():
    """The points a seek may start from are exactly the queue events after which the replayed heaps are all
    empty."""
    from agdb.tracer.replay.replay import _copy_heaps

    trace = run_program(EXAMPLES[1]).trace
    replay = Replay(_fresh(trace), interval=1)
    empty = set(replay._empty_points().tolist())
    assert empty
    heaps: dict = {}
    for i in range(len(replay._queue_steps)):
        replay._apply_queue_event(heaps, i)
        assert (i + 1 in empty) == (not any(_copy_heaps(heaps).values())), i


def test_node_states_at_the_end_first_keep_to_push_inside_the_backward():
    """Asking for the node states after the last backward first (which needs no task flows) does not leave the
    steps inside a backward without their to_push nodes."""
    from agdb.tracer.replay.node_states import STATE_CODE, NodeStates

    trace = run_program(EXAMPLES[1]).trace
    eager = Replay(_fresh(trace))
    to_push = [s for s in range(len(trace))
               if (NodeStates(eager.trace).at(eager.state_at(s))[0] == STATE_CODE["to_push"]).any()]
    assert to_push
    fresh = _fresh(trace)
    replay, states = Replay(fresh), NodeStates(fresh)
    states.at(replay.state_at(len(trace) - 1))
    for s in to_push:
        assert (states.at(replay.state_at(s))[0] == STATE_CODE["to_push"]).any(), s
