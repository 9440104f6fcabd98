"""tracer/replay/rows.py: the panels' rows, on traces written by hand with the TraceBuilder.

The graph of the first backward (keys as written): Sum (1, seq_nr 2) -> Mul (2, seq_nr 1) -> {Exp (3, seq_nr 0),
AccA (4)}; Exp -> AccA. Counts by hand: Mul 1 (Sum), Exp 1 (Mul), AccA 2 (Mul and Exp). The engine's events for it
are written step by step below; a second backward prunes AccA (topo 0 < min_topo_nr 1) and needs only Mul.
"""
from __future__ import annotations

import pytest

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.replay.replay import Replay
from agdb.tracer.replay.rows import DependencyRows, pruning_rows, ready_queue_rows
from agdb.tracer.store.schema import UINT64_MAX
from agdb.tracer.views.panel_text import queue_note, slots_text

SUM, MUL, EXP, ACC = 1, 2, 3, 4


@pytest.fixture(scope="module")
def built():
    """(trace, {label: the step right after that event}, {key: node index})."""
    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    q = b.queue("cpu:0")
    steps: dict[str, int] = {}

    def at(label: str) -> None:
        steps[label] = b.num_events - 1

    b.node_created(thread=t, node=ACC, name="torch::autograd::AccumulateGrad", seq_nr=UINT64_MAX, topological_nr=0)
    b.node_created(thread=t, node=EXP, name="ExpBackward0", seq_nr=0, topological_nr=1, next_edges=[(ACC, 0)])
    b.node_created(thread=t, node=MUL, name="MulBackward0", seq_nr=1, topological_nr=2,
                   next_edges=[(EXP, 0), (ACC, 0)])
    b.node_created(thread=t, node=SUM, name="SumBackward0", seq_nr=2, topological_nr=3, next_edges=[(MUL, 0)])
    b.graph_task_started(thread=t, graph_task=1, graph_root=SUM, roots=[(SUM, 0)])
    b.dependencies_computed(thread=t, graph_task=1, min_topo_nr=0, dependencies=[(MUL, 1), (EXP, 1), (ACC, 2)])
    at("counted")
    b.task_pushed(thread=t, graph_task=1, node=SUM, queue=q, seq_nr=2, queue_length=1)
    b.task_popped(thread=t, graph_task=1, node=SUM, queue=q, queue_length=0)
    b.node_started(thread=t, graph_task=1, node=SUM, inputs=())
    b.node_finished(thread=t, graph_task=1, node=SUM, outputs=())
    at("sum finished")
    b.buffer_written(thread=t, graph_task=1, node=MUL, slot=0, is_accumulation=False)
    b.task_pushed(thread=t, graph_task=1, node=MUL, queue=q, seq_nr=1, queue_length=1)
    b.task_popped(thread=t, graph_task=1, node=MUL, queue=q, queue_length=0)
    b.node_started(thread=t, graph_task=1, node=MUL, inputs=())
    b.node_finished(thread=t, graph_task=1, node=MUL, outputs=())
    at("mul finished")
    b.buffer_written(thread=t, graph_task=1, node=EXP, slot=0, is_accumulation=False)
    at("exp written")
    b.buffer_written(thread=t, graph_task=1, node=ACC, slot=0, is_accumulation=False)
    at("acc written")
    b.task_pushed(thread=t, graph_task=1, node=EXP, queue=q, seq_nr=0, queue_length=1)
    b.task_pushed(thread=t, graph_task=1, node=None, queue=q, seq_nr=0, queue_length=2)  # a wake-up task
    at("two queued")
    b.task_popped(thread=t, graph_task=1, node=EXP, queue=q, queue_length=1)
    b.task_popped(thread=t, graph_task=1, node=None, queue=q, queue_length=0)
    b.node_started(thread=t, graph_task=1, node=EXP, inputs=())
    b.node_finished(thread=t, graph_task=1, node=EXP, outputs=())
    b.buffer_written(thread=t, graph_task=1, node=ACC, slot=0, is_accumulation=True)
    b.task_pushed(thread=t, graph_task=1, node=ACC, queue=q, seq_nr=UINT64_MAX, queue_length=1)
    b.task_popped(thread=t, graph_task=1, node=ACC, queue=q, queue_length=0)
    b.node_started(thread=t, graph_task=1, node=ACC, inputs=())
    b.node_finished(thread=t, graph_task=1, node=ACC, outputs=())
    b.graph_task_finished(thread=t, graph_task=1)
    at("first done")
    b.graph_task_started(thread=t, graph_task=2, graph_root=SUM, roots=[(SUM, 0)], inputs=[(MUL, 0)])
    b.dependencies_computed(thread=t, graph_task=2, min_topo_nr=1, dependencies=[(MUL, 1), (EXP, 1)],
                            pruned=[ACC])
    b.exec_info_computed(thread=t, graph_task=2, needed=[MUL])
    at("pruned")
    b.graph_task_finished(thread=t, graph_task=2)
    at("second done")
    trace = b.finish()
    names = {"SumBackward0": SUM, "MulBackward0": MUL, "ExpBackward0": EXP, "torch::autograd::AccumulateGrad": ACC}
    index = {names[trace.node(i).name]: i for i in range(trace.num_nodes)}
    return trace, steps, index


def _state(built, label: str):
    trace, steps, _ = built
    replay = Replay(trace)
    return replay.state_at(steps[label]), replay.state_at(steps[label] - 1)


def _dependency_rows(built, label: str):
    _, _, n = built
    key = {v: k for k, v in n.items()}
    state, before = _state(built, label)
    rows = DependencyRows(state, before)
    return [(key[r.node], r.count, r.is_changed, slots_text(r.filled)) for r in rows.rows(0, len(rows))]


def test_counted_nodes_are_rows_by_node_none_changed_at_first(built):
    """Right after the counts are computed: Mul 1, Exp 1, AccA 2, in node order; the step before counted nothing,
    and a count that was not there is no change."""
    _, _, n = built
    expected = sorted([(MUL, 1, False, ""), (EXP, 1, False, ""), (ACC, 2, False, "")], key=lambda r: n[r[0]])
    assert _dependency_rows(built, "counted") == expected


def test_a_finished_parent_lowers_its_childrens_counts_and_marks_them(built):
    """Mul finishing: Exp 1 -> 0 (no longer counted, and no grad in its buffer yet: no row), AccA 2 -> 1 (changed)."""
    assert _dependency_rows(built, "mul finished") == [(ACC, 1, True, "")]


def test_a_node_at_zero_with_a_grad_in_its_buffer_is_about_to_be_pushed(built):
    """Exp's grad written: it shows after the counted nodes with count 0 and its slot filled; AccA, one of its
    two grads in, is counted and its buffer's one slot is filled; nothing changed count at that step."""
    assert _dependency_rows(built, "exp written") == [(ACC, 1, False, ""), (EXP, 0, False, "[x]")]
    assert _dependency_rows(built, "acc written") == [(ACC, 1, False, "[x]"), (EXP, 0, False, "[x]")]


def test_rows_of_one_node(built):
    """of_node gives only that node's row: AccA's while counted, Exp's while about to be pushed, none for Mul."""
    _, _, n = built
    state, before = _state(built, "acc written")
    rows = DependencyRows(state, before)
    assert [(r.node, r.count) for r in rows.of_node(n[ACC])] == [(n[ACC], 1)]
    assert [(r.node, r.count) for r in rows.of_node(n[EXP])] == [(n[EXP], 0)]
    assert rows.of_node(n[MUL]) == []


def test_ready_queue_rows_are_in_pop_order_with_a_wake_up_task(built):
    """Exp (priority (0, 0)) then a wake-up task pushed: the wake-up pops first (an empty task outranks every
    node's, as PyTorch's CompareNodeTaskTime has it); the two are not tied."""
    _, _, n = built
    state, _ = _state(built, "two queued")
    (queue,) = ready_queue_rows(state)
    assert [t.node for t in queue.tasks] == [None, n[EXP]]
    assert not queue.is_head_tied and queue_note(queue) == "head first: largest depth, then largest seq_nr"


def test_a_tie_at_the_head_is_said():
    """Two AccumulateGrads queued with the same priority (0, max): the note says the heap's shape decides."""
    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    q = b.queue("cpu:0")
    for key in (1, 2):
        b.node_created(thread=t, node=key, name="torch::autograd::AccumulateGrad", seq_nr=UINT64_MAX,
                       topological_nr=0)
    b.graph_task_started(thread=t, graph_task=1, graph_root=1, roots=[(1, 0), (2, 0)])
    for key, length in ((1, 1), (2, 2)):
        b.task_pushed(thread=t, graph_task=1, node=key, queue=q, seq_nr=UINT64_MAX, queue_length=length)
    trace = b.finish()
    (queue,) = ready_queue_rows(Replay(trace).state_at(len(trace) - 1))
    assert [t.priority for t in queue.tasks] == [(0, UINT64_MAX)] * 2 and queue.is_head_tied
    assert queue_note(queue).endswith("; tied with the next, so the heap's shape decides (libstdc++ order)")


def test_pruning_rows_while_running_and_after(built):
    """While the second backward runs: AccA pruned (topo 0 < 1), Mul needed; after it, the finished task's pruning
    is recalled with the step it finished at, and no exec_info; before any pruning, none."""
    trace, steps, n = built
    state, _ = _state(built, "pruned")
    (running,) = pruning_rows(trace, state)
    assert (running.graph_task, running.min_topo_nr, running.pruned, running.needed, running.finished_at) == \
        (2, 1, ((n[ACC], 0),), (n[MUL],), None)
    state, _ = _state(built, "second done")
    (recalled,) = pruning_rows(trace, state)
    assert (recalled.graph_task, recalled.pruned, recalled.needed, recalled.finished_at) == \
        (2, ((n[ACC], 0),), (), steps["second done"])
    assert pruning_rows(trace, _state(built, "first done")[0]) == ()

