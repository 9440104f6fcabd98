"""Replay properties over random engine programs (tests.strategies.programs, run by tests.tracer.programs).

Every program is recorded with `tracer.record()` in a fresh thread. The checks compare the replayed state
with the events themselves and with what the engine did as seen through channels the tracer does not use:
Node pre-hooks on every node (execution order) and the thread's sequence counter (number of bumps).
"""
from __future__ import annotations

import random
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.tracefile import load, save
from tests.strategies import Program, programs
from tests.tracer.programs import run_program

ONE_AT_A_TIME = 10**9  # an interval no trace reaches: only the start checkpoint, every event applied in turn

# Programs every property also runs on, so each run covers the rare cases whatever hypothesis draws:
EXAMPLES = (
    # Cos (seq 2) fails in its pre-hook while Sin (seq 1) waits: the retry pops Sin as a stale task.
    Program((True, True), (("exp", (0,)), ("sin", (2,)), ("cos", (2,)), ("add", (3, 4)), ("mul", (5, 1))),
            "backward", (6,), fail_at=4),
    # Two roots (GraphRoot), a reentrant custom Function (inner graph tasks at depth 1), a tensor hook, twice.
    Program((True,), (("reent", (0,)), ("exp", (0,)), ("add", (1, 2))), "two_roots", (3, 2), hooks=(1,),
            repeat=True),
    # create_graph grad through custom Functions (plain and @once_differentiable) with a shared x*x.
    Program((True, False, True), (("mul", (0, 0)), ("fn", (3,)), ("add", (4, 1)), ("od", (5,)), ("exp", (3,))),
            "grad_create_graph", (6,), (3, 0, 2), hooks=(3,)),
    # backward(inputs=[x.exp() * w]): min_topo_nr 2 prunes Exp and Acc(w); plus a failure and a repeat.
    Program((True, True), (("exp", (0,)), ("mul", (2, 1)), ("sin", (3,))), "backward_inputs", (4,), (3,),
            hooks=(2,), fail_at=4, repeat=True),
    # grad with an unused leaf among the inputs (an Identity stands in for it) and a shared subexpression.
    Program((True, True, True), (("sin", (0,)), ("mul", (3, 3)), ("add", (4, 0))), "grad", (5,), (2, 3, 0)),
    # Five AccumulateGrads ready at once (engine-semantics §15 B2): they leave in libstdc++'s tie order 0, 2, 4, 1, 3.
    Program((True,) * 5, (("stack", (0, 1, 2, 3, 4)),), "backward", (5,)),
)


def with_examples(test):
    """Decorate a one-argument property test so it also runs on every program of EXAMPLES."""
    for program in EXAMPLES:
        test = example(program)(test)
    return test


def _of(trace, kind):
    return [e for e in trace if isinstance(e, kind)]


def _queue(state, name):
    matches = [q for q in state.ready_queues if q.name == name]
    assert len(matches) == 1, f"queue {name} appears {len(matches)} times"
    return matches[0]


def _task_state(state, graph_task):
    matches = [g for g in state.graph_tasks if g.graph_task == graph_task]
    assert len(matches) == 1, f"graph task {graph_task} is not live (exactly once) at step {state.step}"
    return matches[0]


@given(programs(), st.randoms(use_true_random=False))
@example(EXAMPLES[0], random.Random(0))
@example(EXAMPLES[1], random.Random(1))
@example(EXAMPLES[3], random.Random(2))
def test_checkpointed_replay_equals_event_by_event_replay(program, rnd):
    """state_at(k) with checkpoints every 1, 3 or 7 events equals applying events 0..k one at a time, in any order."""
    trace = run_program(program).trace
    reference = Replay(trace, interval=ONE_AT_A_TIME)
    expected = [reference.state_at(step) for step in range(len(trace))]
    for interval in (1, 3, 7):
        replay = Replay(trace, interval=interval)
        steps = list(range(len(trace)))
        rnd.shuffle(steps)  # seeking back and forth must not matter
        for step in steps:
            got = replay.state_at(step)
            assert got == expected[step], f"interval {interval}, step {step}: {got!r} != {expected[step]!r}"
            assert got.step == step and got.num_steps == len(trace) and got.event == trace[step]


@given(programs())
@with_examples
def test_every_started_node_was_popped_once_with_no_dependencies_left(program):
    """Each started node was popped once in its graph task, before it, with no count left and no partial buffer."""
    trace = run_program(program).trace
    replay = Replay(trace)
    pops = defaultdict(list)
    for e in _of(trace, ev.TaskPopped):
        if not e.stale and e.node is not None:
            pops[(e.graph_task, e.node)].append(e.step)
    for started in _of(trace, ev.NodeStarted):
        steps = pops[(started.graph_task, started.node)]
        assert len(steps) == 1, f"{started.node_name} (node {started.node}) popped {len(steps)} times"
        pop_step = steps[0]
        assert pop_step < started.step
        before = _task_state(replay.state_at(pop_step - 1), started.graph_task)
        assert started.node not in dict(before.dependencies), \
            f"{started.node_name} popped at step {pop_step} with dependencies {dict(before.dependencies)}"
        assert started.node not in dict(before.not_ready)


@given(programs())
@with_examples
def test_replayed_queue_head_is_what_the_engine_popped(program):
    """Just before every TaskPopped, the replayed queue's first task (pop order) is the very task the engine popped."""
    trace = run_program(program).trace
    replay = Replay(trace)
    for popped in _of(trace, ev.TaskPopped):
        assert popped.pushed_at >= 0, "the fresh thread's queue held a task pushed before the recording"
        head = _queue(replay.state_at(popped.step - 1), popped.queue).tasks[0]
        assert (head.pushed_at, head.node, head.graph_task) == (popped.pushed_at, popped.node, popped.graph_task)
        assert head.priority == popped.priority


@given(programs())
@with_examples
def test_pruned_and_unneeded_nodes_never_run(program):
    """Pruned nodes, and nodes outside a non-empty exec_info, never start (nor, the root aside, get pushed)."""
    trace = run_program(program).trace
    started, pushed = defaultdict(set), defaultdict(set)
    for e in _of(trace, ev.NodeStarted):
        started[e.graph_task].add(e.node)
    for e in _of(trace, ev.TaskPushed):
        if e.node is not None:
            pushed[e.graph_task].add(e.node)
    roots = {e.graph_task: e.graph_root for e in _of(trace, ev.GraphTaskStarted)}
    for deps in _of(trace, ev.DependenciesComputed):
        pruned = set(deps.pruned)
        assert not pruned & started[deps.graph_task]
        assert not (pruned - {roots[deps.graph_task]}) & pushed[deps.graph_task]  # the root task is always pushed
        for n in pruned:
            assert trace.node(n).topological_nr < deps.min_topo_nr
    for info in _of(trace, ev.ExecInfoComputed):
        needed = set(info.needed)
        captured = {n for n, _, _ in info.captured}
        assert started[info.graph_task] <= needed, f"ran without being needed: {started[info.graph_task] - needed}"
        assert pushed[info.graph_task] <= needed | captured | {roots[info.graph_task]}


@given(programs())
@with_examples
def test_save_load_round_trip_is_exact(program):
    """A trace saved and loaded again has the same events, columns, strings, meta and node table."""
    trace = run_program(program).trace
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.agdb"
        save(trace, path)
        loaded = load(path)
        assert [p.name for p in Path(tmp).iterdir()] == ["t.agdb"]  # no temp file left
    assert len(loaded) == len(trace)
    assert list(loaded) == list(trace)
    assert set(loaded.columns) == set(trace.columns)
    for name, col in trace.columns.items():
        other = loaded.columns[name]
        assert other.dtype == col.dtype and other.shape == col.shape, name
        assert np.array_equal(other, col, equal_nan=col.dtype.kind == "f"), name
    assert loaded.strings == trace.strings and loaded.meta == trace.meta
    assert [loaded.node(i) for i in range(loaded.num_nodes)] == [trace.node(i) for i in range(trace.num_nodes)]


@given(programs())
@with_examples
def test_node_started_order_equals_prehook_order(program):
    """NodeStarted (name, seq_nr) order equals the order Node pre-hooks saw; GraphRoot runs only for two roots."""
    run = run_program(program)
    trace = run.trace
    ran = [(e.node_name, trace.node(e.node).seq_nr) for e in _of(trace, ev.NodeStarted)]
    assert [r for r in ran if r[0] != "GraphRoot"] == run.hook_log  # GraphRoot has no Python handle to hook
    first_started = {}
    for e in _of(trace, ev.NodeStarted):
        first_started.setdefault(e.graph_task, e.node_name)
    top_level = [e.graph_task for e in _of(trace, ev.GraphTaskStarted) if e.reentrant_depth == 0]
    if program.ending == "two_roots":
        assert all(first_started[t] == "GraphRoot" for t in top_level if t in first_started)  # engine-semantics §15 E
    else:
        assert "GraphRoot" not in [name for name, _ in ran]  # engine-semantics §3.1 step 7: one root, no GraphRoot


@given(programs())
@with_examples
def test_bumps_match_the_threads_counter(program):
    """The SeqNrBumped events number old = 0, 1, 2, ... up to the counter the engine reports at the end."""
    run = run_program(program)
    bumps = _of(run.trace, ev.SeqNrBumped)
    assert [b.old for b in bumps] == list(range(run.counter))
    assert all(b.seq_nr == b.old + 1 for b in bumps)
    assert all(run.trace.node(b.node).seq_nr == b.old for b in bumps)
    assert Replay(run.trace).state_at(len(run.trace) - 1).culprits == run.counter


@given(programs())
@with_examples
def test_executed_is_the_node_started_prefix(program):
    """EngineState.executed lists the NodeStarted nodes up to the step, over every graph task, in order."""
    trace = run_program(program).trace
    replay = Replay(trace)
    started = [(e.step, e.node) for e in _of(trace, ev.NodeStarted)]
    for step in range(len(trace)):
        assert list(replay.state_at(step).executed) == [n for s, n in started if s <= step]


def test_five_ready_accumulate_grads_replay_in_libstdcxx_tie_order():
    """Five AccumulateGrads pushed together (equal priority) sit in the replayed queue in pop order 0, 2, 4, 1, 3."""
    trace = run_program(EXAMPLES[-1]).trace  # torch.stack([l0, .., l4]).sum(0).sum().backward()
    events = list(trace)
    stack = next(e for e in events if isinstance(e, ev.NodeFinished) and e.node_name == "StackBackward0")
    first_pop = next(e.step for e in events[stack.step:] if isinstance(e, ev.TaskPopped))
    accs = [child for child, _ in trace.node(stack.node).next_edges]  # Acc(l0) .. Acc(l4), pushed in edge order
    (queue,) = Replay(trace).state_at(first_pop - 1).ready_queues
    assert [t.node for t in queue.tasks] == [accs[i] for i in (0, 2, 4, 1, 3)]  # engine-semantics §6.2, k = 5
    assert all(t.priority == (0, 2**64 - 1) for t in queue.tasks)
    ran = [e.node for e in events if isinstance(e, ev.NodeStarted) and e.step > stack.step]
    assert ran == [accs[i] for i in (0, 2, 4, 1, 3)]


def test_state_cache_stays_within_its_bytes_and_recomputes_what_it_evicted():
    """The Replay's state cache (NOTE [fresh memory]) never holds more than its byte bound; a step evicted from
    it comes back equal, and a step asked again is the same object while it is cached (and weighed again: the
    comparison made its dependency arrays)."""
    from agdb.tracer.replay.replay import state_bytes

    trace = run_program(EXAMPLES[0]).trace
    fresh = Replay(trace)
    expected = [fresh.state_at(step) for step in range(len(trace))]
    replay = Replay(trace)
    replay._CACHE_BYTES = 3 * max(state_bytes(s) for s in expected)  # a few states at most
    for step in list(range(len(trace))) * 2:
        got = replay.state_at(step)
        assert got == expected[step]
        assert replay.state_at(step) is got
        assert replay._cache_bytes == sum(state_bytes(s) for s in replay._cache.values()) <= replay._CACHE_BYTES
    assert len(replay._cache) <= 3 < len(trace)


@given(st.lists(st.integers(-3, 40), max_size=200), st.integers(0, 45))
def test_first_positions_finds_each_keys_first_position(keys, size):
    """indexes.first_positions (np.minimum.at, no sort) against a plain loop: the first index of each key in
    0..size-1, -1 for keys never seen; negative keys and keys past `size` are not asked for."""
    from agdb.tracer.store.arrays import first_positions

    keys = [k for k in keys if k < size]
    expected = [-1] * size
    for i, k in reversed(list(enumerate(keys))):
        if k >= 0:
            expected[k] = i
    assert first_positions(np.asarray(keys, dtype=np.int64), size).tolist() == expected
