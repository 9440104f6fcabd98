"""The trace format as a source other than the engine sees it: a trace written by hand with TraceBuilder,
the schema, the document that describes it, and traces that do not depend on the run."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agdb.tracer import Kind, TraceBuilder
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import COLUMNS, UINT64_MAX
from agdb.tracer.store.tracefile import TraceFormatError, load, loads, save

ROOT = Path(__file__).resolve().parents[2]
ACC = "torch::autograd::AccumulateGrad"


def hand_trace(source: str = "test", provenance: dict | None = None, queues: bool = True):
    """`y = (x * w)` with w a leaf, backward from MulBackward0, written event by event.

    Node keys: 10 MulBackward0 (seq 0), 20 w's AccumulateGrad. Steps, by hand:
    0 bump, 1 created, 2 task started, 3 deps, 4 push Mul, 5 pop Mul, 6 Mul starts, 7 buffer of Acc, 8 Mul
    finishes, 9 push Acc, 10 pop Acc, 11 Acc starts, 12 grad accumulated, 13 Acc finishes, 14 task ends.
    Without `queues`, the four push and pop events are left out, as a source that cannot see them would.
    """
    b = TraceBuilder(source=source, provenance=provenance)
    main = b.thread("MainThread")
    line = b.frame("model.py", 3, "<module>", "y = x * w")
    b.node(20, name=ACC, seq_nr=UINT64_MAX, topological_nr=0, num_inputs=1)
    b.seq_nr_bumped(thread=main, node=10, name="MulBackward0", old=0, seq_nr=1, frame=line)
    b.node_created(thread=main, node=10, name="MulBackward0", seq_nr=0, topological_nr=1,
                   next_edges=[(None, 0), (20, 0)], frame=line)
    b.graph_task_started(thread=main, graph_task=7, graph_root=10, roots=[(10, 0)])
    b.dependencies_computed(thread=main, graph_task=7, min_topo_nr=0, dependencies=[(10, 0), (20, 1)])
    cpu = b.queue(f"cpu:{main}")
    if queues:
        b.task_pushed(thread=main, graph_task=7, node=10, queue=cpu, seq_nr=0, queue_length=1)
        b.task_popped(thread=main, graph_task=7, node=10, queue=cpu, queue_length=0)
    b.node_started(thread=main, graph_task=7, node=10, inputs=[np.ones(2)])
    b.buffer_written(thread=main, graph_task=7, node=20, slot=0, is_accumulation=False)
    b.node_finished(thread=main, graph_task=7, node=10, outputs=[None, np.array([3.0, 4.0])])
    if queues:
        b.task_pushed(thread=main, graph_task=7, node=20, queue=cpu, seq_nr=UINT64_MAX, queue_length=1)
        b.task_popped(thread=main, graph_task=7, node=20, queue=cpu, queue_length=0)
    b.node_started(thread=main, graph_task=7, node=20, inputs=[np.array([3.0, 4.0])])
    b.grad_accumulated(thread=main, graph_task=7, node=20, grad=np.array([3.0, 4.0]))
    b.node_finished(thread=main, graph_task=7, node=20, outputs=[])
    b.graph_task_finished(thread=main, graph_task=7)
    return b.finish()


def test_a_hand_written_trace_decodes_to_the_events_written():
    """Each event reads back with the values given to the builder; nodes are rows in key order (Mul 0, Acc 1),
    the graph task is renumbered 1, and the queue is labelled by its thread's name."""
    trace = hand_trace()
    assert len(trace) == 15 and trace.num_nodes == 2
    assert [type(e) for e in trace] == [ev.SeqNrBumped, ev.NodeCreated, ev.GraphTaskStarted,
                                        ev.DependenciesComputed, ev.TaskPushed, ev.TaskPopped, ev.NodeStarted,
                                        ev.BufferWritten, ev.NodeFinished, ev.TaskPushed, ev.TaskPopped,
                                        ev.NodeStarted, ev.GradAccumulated, ev.NodeFinished,
                                        ev.GraphTaskFinished]
    bump = trace[0]
    assert (bump.node, bump.node_name, bump.old, bump.seq_nr, bump.lineno, bump.source) == \
        (0, "MulBackward0", 0, 1, 3, "y = x * w")
    mul = trace.node(0)
    assert (mul.name, mul.seq_nr, mul.topological_nr, mul.next_edges) == ("MulBackward0", 0, 1, ((None, 0), (1, 0)))
    assert trace.node(1).seq_nr == UINT64_MAX
    assert trace[2].graph_task == 1 and trace[2].roots == ((0, 0),)
    assert trace[3].dependencies == ((0, 0), (1, 1))
    push = trace[9]
    assert (push.node, push.priority, push.queue) == (1, (0, UINT64_MAX), "cpu:0")
    assert trace.queue_label(push.queue) == "cpu (MainThread)"
    assert trace[10].pushed_at == 9 and not trace[10].stale
    finished = trace[8]
    assert finished.outputs[0] is None and finished.outputs[1].preview == (3.0, 4.0)
    assert trace[12].grad.shape == (2,)


def test_a_hand_written_trace_replays():
    """The replay of the hand trace: hand-derived queue, counts and executed nodes at chosen steps."""
    replay = Replay(hand_trace())
    assert [t.node for t in replay.state_at(4).ready_queues[0].tasks] == [0]
    assert replay.state_at(5).ready_queues[0].tasks == ()
    assert replay.state_at(7).dependencies == {1: 1}  # Acc waits for Mul's grad
    assert replay.state_at(8).dependencies == {}  # Mul finished and routed to Acc
    assert list(replay.state_at(14).executed) == [0, 1]
    assert replay.state_at(14).graph_tasks == ()


def test_a_hand_written_trace_survives_save_and_load(tmp_path):
    """Saved and loaded, the trace has the same events, source and provenance."""
    trace = hand_trace(source="test", provenance={k: "observed" for k in Kind if k != Kind.HOOK_RAN})
    save(trace, tmp_path / "hand.agdb")
    loaded = load(tmp_path / "hand.agdb")
    assert list(loaded) == list(trace)
    assert loaded.source == "test"
    assert loaded.provenance(Kind.HOOK_RAN) == "missing"
    assert loaded.provenance(Kind.TASK_PUSHED) == "observed"


def test_provenance_defaults_to_observed_and_keeps_reconstructed():
    """A builder told nothing observes every kind; a kind declared reconstructed reads back so."""
    assert all(hand_trace().provenance(k) == "observed" for k in Kind)
    told = hand_trace(provenance={Kind.NODE_CREATED: "observed", Kind.TASK_PUSHED: "reconstructed"})
    assert told.provenance(Kind.TASK_PUSHED) == "reconstructed"
    assert told.provenance(Kind.BUFFER_WRITTEN) == "missing"


@pytest.mark.parametrize("key", [0, -3, "a", None])
def test_the_builder_refuses_node_keys_that_are_not_positive_ints(key):
    """0 and None mean "no node", so a node key must be an int >= 1; the error says so."""
    b = TraceBuilder()
    with pytest.raises(ValueError, match="node keys are ints >= 1"):
        b.node_created(thread=b.thread("t"), node=key, name="X", seq_nr=0, topological_nr=0)


def test_the_builder_refuses_a_bump_that_skips_numbers():
    """A bump takes exactly one number: old + 1 == seq_nr."""
    b = TraceBuilder()
    with pytest.raises(ValueError, match="one number"):
        b.seq_nr_bumped(thread=b.thread("t"), node=1, name="X", old=4, seq_nr=6)


def test_the_loader_refuses_an_edge_to_a_node_that_does_not_exist(tmp_path):
    """A file whose edge names a node past the node table is refused with the column named."""
    trace = hand_trace()
    columns = dict(trace.columns)
    columns["edge_child"] = np.array([-1, 5], dtype=np.int8)
    bad = type(trace)({k: v for k, v in columns.items() if k not in ("node_edge_start", "sgroup_start",
                                                                         "s_shape_start")},
                      list(trace.strings), trace.meta)
    save(bad, tmp_path / "bad.agdb")
    with pytest.raises(TraceFormatError, match="edge_child names a node that does not exist"):
        load(tmp_path / "bad.agdb")


def test_the_loader_refuses_node_columns_of_unequal_length(tmp_path):
    """A node column shorter than its table is refused, naming the column."""
    trace = hand_trace()
    columns = {k: v for k, v in trace.columns.items() if k not in ("node_edge_start", "sgroup_start",
                                                                      "s_shape_start")}
    columns["node_topo"] = columns["node_topo"][:1]
    save(type(trace)(columns, list(trace.strings), trace.meta), tmp_path / "short.agdb")
    with pytest.raises(TraceFormatError, match="column node_topo has 1 rows"):
        loads((tmp_path / "short.agdb").read_bytes())


def test_the_document_names_every_kind_and_column():
    """docs/trace-format.md describes every kind of tracer.store.schema and every stored column."""
    text = (ROOT / "docs" / "trace-format.md").read_text()
    for kind in Kind:
        assert re.search(rf"\| {int(kind)} \| `{kind.name}` \|", text), kind
    for column in COLUMNS:
        assert f"`{column.name}`" in text, column.name


_RECORD = """
import sys
from agdb.app.demo import record_example
from agdb.tracer.store.tracefile import save
save(record_example(), sys.argv[1])
"""


def test_the_same_program_in_two_processes_gives_the_same_file(tmp_path):
    """The demo recorded in two fresh processes gives byte-identical files: no thread ident, address or time
    reaches a trace (its threads include a cuda worker and a reentrant pool thread)."""
    paths = [tmp_path / "a.agdb", tmp_path / "b.agdb"]
    for path in paths:
        subprocess.run([sys.executable, "-c", _RECORD, str(path)], cwd=ROOT, check=True, timeout=120)
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_version_1_queue_names_become_thread_rows():
    """A version 1 file named a CPU queue by its thread's ident; loading renames it cpu:<row> of the latest thread
    with that ident (the second of two threads that shared ident 7), leaves device queues alone, drops idents."""
    from agdb.tracer.store.tracefile import upgrade_v1_queues

    strings = ["first", "second", "cpu:7", "cuda:0", "cpu:99"]
    columns = {"thread_ident": np.array([7, 7]), "thread_name": np.array([0, 1]), "queue_name": np.array([2, 3, 4])}
    upgrade_v1_queues(columns, strings)
    assert "thread_ident" not in columns
    assert [strings[i] for i in columns["queue_name"]] == ["cpu:1", "cuda:0", "cpu:99"]
