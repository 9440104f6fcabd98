"""Reading a step's state a screenful at a time against making it whole: NodeStates.fill, which sets only the nodes
a short move can change (NOTE [stepping the states] in tracer/replay/node_states.py), against NodeStates.at, which sets
every node; and a graph task's counts read by rows and by node (NOTE [counts at a step] in tracer/store/tasks.py)
against its whole dependency arrays."""
from __future__ import annotations

import random

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agdb.tracer.replay.node_states import NodeStates
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import tasks
from agdb.tracer.store.schema import Kind
from tests.strategies import programs
from tests.tracer.programs import run_program
from tests.tracer.test_lazy_indexes import _fresh, _prefix_trace
from tests.tracer.test_replay_properties import EXAMPLES


def _moves(trace, rng: random.Random, count: int) -> list[int]:
    """Steps to visit in turn: one event on or back, the next or previous node run, and now and then a jump."""
    n = len(trace)
    runs = trace.steps_of(Kind.NODE_STARTED).tolist()
    step, out = 0, []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.4:
            step += 1
        elif roll < 0.55:
            step -= 1
        elif roll < 0.75 and runs:
            later = [s for s in runs if s > step]
            step = later[0] if later else step
        elif roll < 0.85 and runs:
            earlier = [s for s in runs if s < step]
            step = earlier[-1] if earlier else step
        else:
            step = rng.randrange(n)
        step = max(0, min(n - 1, step))
        out.append(step)
    return out


def _check_fill(trace, seed: int) -> int:
    """Fill along random moves, comparing with `at` after each; returns how many fills set only some nodes."""
    replay, states = Replay(trace), NodeStates(trace)
    if seed % 2:
        states.warm()  # with the whole history built first
    whole = NodeStates(_fresh(trace))
    filled = states.filled()
    partial = 0
    for step in _moves(trace, random.Random(seed), 3 * len(trace)):
        state = replay.state_at(step)
        touched = states.fill(state, filled)
        partial += touched is not None and len(touched) > 0
        codes, order = whole.at(state)
        assert filled.codes.tolist() == codes.tolist(), step
        assert filled.order.tolist() == order.tolist(), step
    return partial


@settings(deadline=None)
@given(programs(), st.integers(0, 2**32), st.booleans())
@example(EXAMPLES[0], 0, False)
@example(EXAMPLES[1], 1, True)
@example(EXAMPLES[2], 2, False)
@example(EXAMPLES[3], 3, True)
def test_filling_step_after_step_gives_the_states_of_at(program, seed, prefix):
    """After every move of a random walk (on, back, node to node, jumps), the codes and execution indexes that
    fill keeps up to date equal those that `at` computes for every node; with indexes of prefixes too."""
    trace = run_program(program).trace
    _check_fill(_prefix_trace(trace) if prefix else _fresh(trace), seed)


def test_filling_sets_only_the_nodes_a_step_touches():
    """On the examples, most moves set a few nodes (fill does not fall back to setting every node), and a step
    to the next event inside a backward touches fewer nodes than the graph has."""
    partial = sum(_check_fill(_fresh(run_program(p).trace), i) for i, p in enumerate(EXAMPLES))
    assert partial > 20
    trace = _fresh(run_program(EXAMPLES[2]).trace)
    replay, states = Replay(trace), NodeStates(trace)
    filled = states.filled()
    started = int(trace.steps_of(Kind.NODE_STARTED)[0])
    states.fill(replay.state_at(started), filled)
    touched = states.fill(replay.state_at(started + 1), filled)
    assert touched is not None and len(touched) < trace.num_nodes


@settings(deadline=None)
@given(programs(), st.integers(0, 2**32))
@example(EXAMPLES[0], 0)
@example(EXAMPLES[3], 3)
def test_counts_read_by_rows_and_by_node_equal_the_whole_arrays(program, seed):
    """At every step, each graph task's count of counted nodes, any slice of its rows and the count of any node
    equal what its whole dependency arrays say; with snapshots every 3 decrements, so that the windows since a
    snapshot and the snapshots themselves are both read; stepping on, then seeking in a random order; with the
    windows keeping the nodes not counted (as for few) and keeping the counted ones (as for many)."""
    trace = run_program(program).trace
    for dead_max in (1 << 16, -1):
        _check_counts(trace, random.Random(seed), dead_max)


def _check_counts(trace, rng: random.Random, dead_max: int) -> None:
    saved = tasks.SNAP, tasks.WindowIndex.DEAD_MAX
    tasks.SNAP, tasks.WindowIndex.DEAD_MAX = 3, dead_max
    try:
        replay = Replay(_fresh(trace))
        steps = list(range(len(trace)))
        for step in steps + rng.sample(steps, len(steps)):
            for gt in replay.state_at(step).graph_tasks:
                lazy = Replay(_fresh(trace)) if rng.random() < 0.05 else replay  # a fresh one: nothing made yet
                gt_lazy = next(g for g in lazy._graph_tasks_at(step) if g.graph_task == gt.graph_task)
                nodes, counts = gt.dependency_arrays()
                assert gt_lazy.num_counted() == len(nodes)
                lo = rng.randrange(len(nodes) + 1)
                hi = rng.randrange(lo, len(nodes) + 2)
                got_nodes, got_counts = gt_lazy.counted_rows(lo, hi)
                assert got_nodes.tolist() == nodes[lo:hi].tolist() and got_counts.tolist() == counts[lo:hi].tolist()
                ask = np.arange(trace.num_nodes + 2)
                expected = dict(zip(nodes.tolist(), counts.tolist(), strict=True))
                assert gt_lazy.counts_of(ask).tolist() == [expected.get(n, 0) for n in ask.tolist()]
    finally:
        tasks.SNAP, tasks.WindowIndex.DEAD_MAX = saved


@settings(deadline=None)
@given(programs())
@example(EXAMPLES[0])
@example(EXAMPLES[2])
def test_states_set_by_a_range_of_counted_nodes_equal_those_set_node_by_node(program):
    """NodeStates.at sets a graph task whose counted nodes form a range by the range and its holes; at every
    step that gives the codes and execution indexes of setting each counted node."""
    from agdb.tracer.replay.state import GraphTaskState

    trace = run_program(program).trace
    saved = GraphTaskState.counted_span
    GraphTaskState.counted_span = lambda self: None
    try:
        by_node = [[a.tolist() for a in NodeStates(trace).at(s)] for s in _states(trace)]
    finally:
        GraphTaskState.counted_span = saved
    for dead_max in (1 << 16, -1):  # the windows keep the nodes not counted, or the counted ones
        kept = tasks.SNAP, tasks.WindowIndex.DEAD_MAX
        tasks.SNAP, tasks.WindowIndex.DEAD_MAX = 3, dead_max  # many windows, from snapshots
        try:
            assert [[a.tolist() for a in NodeStates(trace).at(s)] for s in _states(trace)] == by_node
        finally:
            tasks.SNAP, tasks.WindowIndex.DEAD_MAX = kept


def _states(trace) -> list:
    replay = Replay(_fresh(trace))
    return [replay.state_at(step) for step in range(len(trace))]


def test_the_examples_count_ranges_of_nodes():
    """The range way is taken on the examples (so the test above compares two ways)."""
    spans = 0
    for program in EXAMPLES:
        replay = Replay(_fresh(run_program(program).trace))
        for step in range(len(replay.trace)):
            spans += sum(gt.counted_span() is not None for gt in replay.state_at(step).graph_tasks)
    assert spans > 10


def test_counts_reach_zero_at_the_same_steps_whether_decrements_are_sorted_or_counted(monkeypatch):
    """_reached_zero's two ways (sorting few decrements, counting many): by hand, node 2 starts at 0 (spent from
    step 0), node 5's one decrement is at step 10, node 7's second at 12, node 9 starts at 0 and is decremented
    at 13."""
    import agdb.tracer.replay.node_states as ns
    from agdb.tracer.store.tasks import TaskIndex

    t = TaskIndex()
    t.dep_nodes, t.dep_counts = np.array([2, 5, 7, 9], np.int32), np.array([0, 1, 2, 0], np.int32)
    t.dec_pos, t.dec_steps = np.array([1, 2, 2, 3]), np.array([10, 11, 12, 13])
    for way in (0, 10**9):
        monkeypatch.setattr(ns, "SPARSE_DECREMENTS", way)
        nodes, steps = ns._reached_zero(t)
        assert nodes.tolist() == [2, 5, 7, 9] and steps.tolist() == [0, 10, 12, 13]


def _boxes_by_scan(folding, codes: np.ndarray) -> np.ndarray:
    """The box rule read from every member: min and max of each box's codes, then waiting, ready, running."""
    from agdb.tracer.replay.node_states import STATE_CODE

    members = codes[folding.members]
    lo = np.minimum.reduceat(members, folding.starts[:-1])
    hi = np.maximum.reduceat(members, folding.starts[:-1])
    out = np.where(lo == hi, lo, STATE_CODE["counted"]).astype(np.int8)
    for state in ("waiting", "ready", "running"):
        boxes = folding.group_of[np.flatnonzero(codes == STATE_CODE[state])]
        out[boxes[boxes >= 0]] = STATE_CODE[state]
    return out


@settings(deadline=None)
@given(programs(), st.integers(0, 2**32))
@example(EXAMPLES[2], 2)
def test_box_states_kept_up_step_by_step_equal_those_read_from_every_node(program, seed):
    """BoxStates, updated from the nodes each fill set, gives after every move of a random walk the box codes that
    reading every member gives; the nodes are put in random boxes (some left out of the picture)."""
    from agdb.tracer.replay.node_states import BoxStates
    from agdb.tracer.views.folding import Folding

    trace = _fresh(run_program(program).trace)
    rng = np.random.default_rng(seed)
    shown = np.flatnonzero(rng.random(trace.num_nodes) < 0.8)
    if not len(shown):
        return
    members = rng.permutation(shown)
    cuts = np.unique(np.r_[0, np.sort(rng.integers(1, len(members) + 1, size=3)), len(members)])
    group_of = np.full(trace.num_nodes, -1, dtype=np.int64)
    group_of[members] = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
    folding = Folding(group_of, members, cuts.astype(np.int64))
    replay, states = Replay(trace), NodeStates(trace)
    filled, boxes = states.filled(), BoxStates(folding)
    for step in _moves(trace, random.Random(seed), 2 * len(trace)):
        states.fill(replay.state_at(step), filled)
        assert boxes.update(filled).tolist() == _boxes_by_scan(folding, filled.codes).tolist(), step
