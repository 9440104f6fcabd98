"""family_map's `retraced` anomaly on hand-made graphs shaped as torch 2.13 makes them (the compiled corpus,
tests/tracer/fx/test_compiled_corpus.py, shows the same on real torch): one differentiable op is not a re-trace,
and a re-trace split by the partitioner into a forward and a backward graph is one."""
from __future__ import annotations

from agdb.tracer.fx.family_map import family_anomalies
from agdb.tracer.fx.graph import Graph


def graph(*calls: tuple[str, str, int]) -> Graph:
    """Placeholders aside, calls as (name, partitioner_tag, seq_nr), in order."""
    g = Graph()
    g.create_node("placeholder", "primals_1", name="primals_1", meta={"partitioner_tag": "is_forward"})
    for name, tag, seq_nr in calls:
        g.create_node("call_function", f"aten.{name.split('_')[0]}.default", name=name,
                      meta={"partitioner_tag": tag, "seq_nr": seq_nr})
    return g


def kinds(members):
    return [(a.kind, a.graph, a.nodes) for a in family_anomalies(members)]


def test_one_op_and_its_backward_share_a_number_without_being_re_traced():
    """`x.sin()` compiled: sin, and its backward cos and mul, all carry sin's number (torch's own joint)."""
    joint = graph(("sin", "is_forward", 2), ("cos", "is_backward", 2), ("mul", "is_backward", 2))
    assert kinds([("c0.joint", joint)]) == []


def test_a_re_traced_joint_is_reported():
    joint = graph(("mul", "is_forward", 8), ("sin", "is_forward", 8), ("cos", "is_backward", 8),
                  ("mul_1", "is_backward", 8))
    assert kinds([("c0.joint", joint)]) == [("retraced", "c0.joint", ("mul", "sin", "cos", "mul_1"))]


def test_a_re_traced_joint_split_into_forward_and_backward_graphs_is_reported_in_both():
    """Each graph alone is one-sided (only forward calls, or only backward ones); the family shows the re-trace,
    and the forward graph's calls are not reported as merely sharing a number."""
    forward = graph(("mul", "is_forward", 8), ("sin", "is_forward", 8), ("sum_1", "is_forward", 8))
    backward = graph(("expand", "is_backward", 8), ("cos", "is_backward", 8), ("mul_1", "is_backward", 8))
    assert kinds([("c0.forward", forward), ("c0.backward", backward)]) == [
        ("retraced", "c0.forward", ("mul", "sin", "sum_1")), ("retraced", "c0.backward", ("expand", "cos", "mul_1"))]


def test_forward_calls_sharing_a_number_beside_others_are_not_a_re_trace():
    """BatchNorm's addmm and add share a number in torch's graphs; the graph's other calls do not."""
    forward = graph(("addmm", "is_forward", 9), ("add", "is_forward", 9), ("relu", "is_forward", 10))
    backward = graph(("threshold_backward", "is_backward", 10), ("mm", "is_backward", 9))
    assert [k for k, _, _ in kinds([("c0.forward", forward), ("c0.backward", backward)])] == ["shared_seq_nr"]
