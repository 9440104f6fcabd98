"""`agdb diff`'s graph edges aspect (tracer/replay/diff.py) on traces made by hand through the builder: each node's
edges by relative seq_nr, and how many distinct AccumulateGrads ran."""
from __future__ import annotations

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.replay.diff import compare, side_of
from agdb.tracer.store.schema import UINT64_MAX
from agdb.tracer.views.labels import NodeLabels

ACC = "torch::autograd::AccumulateGrad"


def _steps(acc_per_step: list[int], swap: bool = False, unused_leaf: bool = False):
    """Steps of `y = (w * 2).sum(); y.backward()`, the AccumulateGrad of step i being node acc_per_step[i] (the same
    key: one node run again; new keys: a new node each step). `swap` puts Mul's edges the other way round."""
    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    seq, key = 0, 100
    made: set[int] = set()
    if unused_leaf:  # an AccumulateGrad the engine saw made by a forward no backward ran (a bridge never meets it)
        b.node_created(thread=t, node=99, name=ACC, seq_nr=UINT64_MAX, topological_nr=0)
    for step, acc in enumerate(acc_per_step):
        if acc not in made:
            b.node_created(thread=t, node=acc, name=ACC, seq_nr=UINT64_MAX, topological_nr=0)
            made.add(acc)
        mul, total = key, key + 1
        key += 2
        edges = ((acc, 0), (None, 0))
        for node, name, next_edges in ((mul, "MulBackward0", edges[::-1] if swap else edges),
                                       (total, "SumBackward0", ((mul, 0),))):
            b.seq_nr_bumped(thread=t, node=node, name=name, old=seq, seq_nr=seq + 1)
            b.node_created(thread=t, node=node, name=name, seq_nr=seq, topological_nr=1, next_edges=next_edges)
            seq += 1
        b.graph_task_started(thread=t, graph_task=step + 1, graph_root=total, roots=((total, 0),))
        for node in (total, mul, acc):
            b.node_started(thread=t, graph_task=step + 1, node=node, inputs=())
    trace = b.finish()
    return side_of(trace, "x", NodeLabels(trace))


def _graph(a, b):
    return next(x for x in compare(a, b).aspects if x.name == "graph edges")


def test_the_same_graphs_agree():
    aspect = _graph(_steps([1, 2, 3]), _steps([1, 2, 3]))
    assert aspect.equal and "3 AccumulateGrad(s) run" in aspect.summary


def test_one_accumulate_grad_run_three_times_is_not_three_of_them():
    """Three steps that each made the leaf a new AccumulateGrad against three that ran one (what a bridge that
    keyed AccumulateGrads by their leaf alone recorded): the runs agree by name, the graph does not."""
    new_each_step, one = _steps([1, 2, 3]), _steps([1, 1, 1])
    aspects = {x.name: x for x in compare(new_each_step, one).aspects}
    assert aspects["execution order"].equal and aspects["node names"].equal
    graph = aspects["graph edges"]
    assert not graph.equal and graph.first == {"accumulate_grads": [3, 1]}, graph


def test_an_accumulate_grad_no_backward_ran_is_no_difference():
    """The engine sees every AccumulateGrad made; the bridge only those a backward met: only runs are counted."""
    assert _graph(_steps([1, 2], unused_leaf=True), _steps([1, 2])).equal


def test_swapped_edges_are_found_at_their_node():
    graph = _graph(_steps([1]), _steps([1], swap=True))
    assert not graph.equal and graph.first["seq_nr"] == 0, graph
    assert [e["node"] for e in graph.first["a"]] == ["AccumulateGrad", None]
    assert [e["node"] for e in graph.first["b"]] == [None, "AccumulateGrad"]
