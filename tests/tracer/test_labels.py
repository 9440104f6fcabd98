"""tracer/views/labels.py: one naming rule at every width, checked on a trace written by hand.

The trace: MulBackward0 (seq_nr 3) and SumBackward0 (seq_nr 4) on thread 0, an AccumulateGrad whose leaf is named
`w`, one whose leaf has no name (`leaf 2`: the second AccumulateGrad made), and an Error node (seq_nr 2**64-1,
no leaf: told apart by its index).
"""
from __future__ import annotations

import numpy as np
import pytest

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.store.schema import UINT64_MAX
from agdb.tracer.views.labels import NodeLabels, label_pieces, priority_text, seq_text
from agdb.tracer.views.model import label_texts

MAX = UINT64_MAX


@pytest.fixture(scope="module")
def trace():
    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    b.node_created(thread=t, node=10, name="torch::autograd::AccumulateGrad", seq_nr=MAX, topological_nr=0)
    b.leaf_name(10, "w")
    b.node_created(thread=t, node=11, name="torch::autograd::AccumulateGrad", seq_nr=MAX, topological_nr=0)
    b.seq_nr_bumped(thread=t, node=12, name="MulBackward0", old=3, seq_nr=4)
    b.node_created(thread=t, node=12, name="MulBackward0", seq_nr=3, topological_nr=1,
                   next_edges=[(10, 0), (11, 0)])
    b.seq_nr_bumped(thread=t, node=13, name="SumBackward0", old=4, seq_nr=5)
    b.node_created(thread=t, node=13, name="SumBackward0", seq_nr=4, topological_nr=2, next_edges=[(12, 0)])
    b.node_created(thread=t, node=14, name="torch::autograd::Error", seq_nr=MAX, topological_nr=0)
    return b.finish()


def _node(trace, name: str, nth: int = 0) -> int:
    return [i for i in range(trace.num_nodes) if trace.node(i).name.endswith(name)][nth]


EXPECTED = {  # by hand, from the module's table: (box, list, column)
    ("MulBackward0", 0): ("MulBackward0 s3", "MulBackward0 seq 3", "MulBackward0"),
    ("SumBackward0", 0): ("SumBackward0 s4", "SumBackward0 seq 4", "SumBackward0"),
    ("AccumulateGrad", 0): ("AccumulateGrad w", "AccumulateGrad w", "AccumulateGrad w"),
    ("AccumulateGrad", 1): ("AccumulateGrad leaf 2", "AccumulateGrad leaf 2", "AccumulateGrad leaf 2"),
}


def test_each_width_writes_the_rule_of_the_table(trace):
    """A numbered node is `Name s3` in a box, `Name seq 3` in a list and `Name` beside a seq_nr column; an
    AccumulateGrad is its leaf's name (or `leaf N`) at every width; an Error node is told apart by its index."""
    labels = NodeLabels(trace)
    for (name, nth), expected in EXPECTED.items():
        node = _node(trace, name, nth)
        assert (labels.box(node), labels.label(node), labels.column_name(node)) == expected
    error = _node(trace, "Error")
    assert (labels.box(error), labels.label(error), labels.column_name(error)) == \
        (f"Error n{error}", f"Error node {error}", f"Error node {error}")
    assert all("torch::" not in labels.label(n, w) for n in range(trace.num_nodes) for w in ("box", "list", "column"))


def test_a_task_with_no_node_is_a_wake_up(trace):
    """A ready-queue task with no node (None, or -1 as events store it) is `(wake-up)` at every width."""
    labels = NodeLabels(trace)
    assert labels.task(None) == labels.task(-1, "box") == "(wake-up)"
    assert labels.task(_node(trace, "MulBackward0"), "column") == "MulBackward0"


@pytest.mark.parametrize("width", ["box", "list", "column"])
def test_columns_of_labels_are_the_labels_one_at_a_time(trace, width):
    """label_pieces (a whole column, for the graph models) writes what NodeLabels.label writes node by node,
    for every node and for a chosen subset in any order."""
    labels = NodeLabels(trace)
    every = [labels.label(n, width) for n in range(trace.num_nodes)]
    assert label_texts(label_pieces(trace, None, width), trace.num_nodes) == every
    some = np.asarray([4, 0, 2], dtype=np.int64)
    assert label_texts(label_pieces(trace, some, width), 3) == [every[4], every[0], every[2]]


def test_seq_nr_max_is_written_max_everywhere():
    """seq_nr 2**64-1 is `max`, alone and in a priority; other seq_nrs are their number."""
    assert seq_text(MAX) == "max" and seq_text(0) == "0" and seq_text(12) == "12"
    assert priority_text((1, MAX)) == "(1, max)" and priority_text((0, 3)) == "(0, 3)"


def test_a_box_cuts_a_long_leaf_name_a_list_keeps_it():
    """A 60-character leaf name is cut to 40 characters (an ellipsis last) in a box and kept whole in a list."""
    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    b.node_created(thread=t, node=1, name="torch::autograd::AccumulateGrad", seq_nr=MAX, topological_nr=0)
    b.leaf_name(1, "p" * 60)
    labels = NodeLabels(b.finish())
    assert labels.label(0) == "AccumulateGrad " + "p" * 60
    assert labels.box(0) == "AccumulateGrad " + "p" * 39 + "…"


def test_column_width_fits_the_longest_name(trace):
    """A name column is as wide as the longest name it holds (here `AccumulateGrad leaf 2`, 21 characters, or a
    list label `SumBackward0 seq 4` with room for the trace's largest number), within the minimum and 40."""
    labels = NodeLabels(trace)
    assert labels.column_width(5) == len("AccumulateGrad leaf 2")
    assert labels.column_width(30) == 30
    longest = max(len(labels.label(n)) for n in range(trace.num_nodes))
    assert labels.column_width(5, with_seq=True) >= longest


def test_a_wake_up_tasks_priority_is_written_as_first_not_as_numbers():
    """A wake-up task has no depth or seq_nr (it leaves before every node task): its cells are blank and its
    priority reads `(first: a wake-up)`, never the replay's placeholder `(-1, -1)`; a node task's reads `(1, max)`."""
    from agdb.tracer.replay.scheduler import WAKE_UP_PRIORITY, priority, wake_up_key
    from agdb.tracer.views.labels import priority_cells, priority_text

    assert priority(wake_up_key()) == WAKE_UP_PRIORITY
    assert priority_cells(WAKE_UP_PRIORITY) == ("", "")
    assert priority_text(WAKE_UP_PRIORITY) == "(first: a wake-up)"
    assert priority_cells((0, 3)) == ("0", "3") and priority_text((1, 2**64 - 1)) == "(1, max)"
