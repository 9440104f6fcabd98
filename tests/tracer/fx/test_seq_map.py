"""The forward-to-backward map, copy_fwd_metadata_to_bw_nodes, the anomalies report, and re-tracing."""
from __future__ import annotations

from agdb import engine as torch
from agdb.tracer.fx import capture_joint
from agdb.tracer.fx.seq_map import (
    anomalies,
    copy_fwd_metadata_to_bw_nodes,
    preserve_node_seq_nr,
    retrace,
    seq_map,
    set_current_replay_node,
)

from .test_capture import f_diamond, leaf


def kinds(g):
    return sorted((a.kind, a.nodes) for a in anomalies(g))


def test_map_both_ways():
    """Each forward node maps to the backward nodes sharing its seq_nr; grad-acc nodes map to none."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    m = seq_map(g)
    names = {f.name: [b.name for b in bs] for f, bs in m.backward_of.items()}
    assert names == {"mul": ["mul_2", "mul_3"], "sin": ["cos", "mul_1"], "add": [], "sum": ["expand"]}
    assert m.forward_of[g.node("cos")] is g.node("sin") and g.node("add_1") not in m.forward_of


def test_copy_fwd_metadata_to_bw_nodes_as_torch_does():
    """nn_module_stack and source_fn_stack are copied under fwd_ names, custom merged (forward wins); grad-acc
    nodes and stack_trace are left alone."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    g.node("sin").meta.update({"nn_module_stack": {"m": ["m", "M"]}, "custom": {"k": 1}})
    g.node("cos").meta["custom"] = {"k": 0, "j": 2}
    trace_before = g.node("cos").meta["stack_trace"]
    copy_fwd_metadata_to_bw_nodes(g)
    cos = g.node("cos").meta
    assert cos["fwd_nn_module_stack"] == {"m": ["m", "M"]} and cos["fwd_source_fn_stack"] is None
    assert cos["custom"] == {"k": 1, "j": 2} and cos["stack_trace"] == trace_before
    assert "fwd_nn_module_stack" not in g.node("add_1").meta


def test_anomalies_name_the_culprit_line():
    """A custom Function under no_grad bumps the counter but its node reaches nothing: the no-node ops after
    it take that number; the report names the apply line."""
    class Id(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g

    def f(x):
        y = x.exp()
        with torch.no_grad():
            Id.apply(y)  # the culprit
        return (y.detach() * y).sum()

    g = capture_joint(f, leaf(3))
    shifted = [a for a in anomalies(g) if a.kind == "shifted"]
    assert len(shifted) == 1 and shifted[0].nodes == ("mul", "detach")
    (file, line, fn, node), = shifted[0].culprits
    assert fn == "f" and node == "IdBackward"
    assert "Id.apply(y)  # the culprit" in open(file).read().splitlines()[line - 1]


def test_anomalies_of_a_plain_capture():
    """The diamond has one grad-acc node and no other anomaly; a hook op is reported as mislabelled."""
    assert kinds(capture_joint(f_diamond, leaf(4), leaf(4))) == [("gradient_acc", ("add_1",))]

    def hooked(x):
        a = x * 3
        a.register_hook(lambda g: g * 7)
        return a.sin().sum()

    (acc,) = anomalies(capture_joint(hooked, leaf(3)))
    assert acc.kind == "gradient_acc" and "tensor hook" in acc.message


def test_retrace_loses_numbers_without_preservation_and_keeps_them_with_it():
    """Re-tracing gives every node a new number (the map breaks: every backward node has no forward node);
    under preserve_node_seq_nr() the numbers and the map are kept."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    lost = retrace(g)
    seqs = [n.meta["seq_nr"] for n in lost.nodes if n.op == "call_function"]
    assert seqs == sorted(set(seqs))  # all new, one per op (each op made an autograd node)
    assert {a.kind for a in anomalies(lost)} == {"no_forward", "gradient_acc"}
    assert all(not bs for bs in seq_map(lost).backward_of.values())
    with preserve_node_seq_nr():
        kept = retrace(g)
    assert [n.meta.get("seq_nr") for n in kept.nodes] == [n.meta.get("seq_nr") for n in g.nodes]
    assert kinds(kept) == kinds(g)


def test_replay_node_rule():
    """Under set_current_replay_node, re-traced nodes take the replay node's number unless preserving."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    with set_current_replay_node(g.node("sin")):
        replayed = retrace(g)
        with preserve_node_seq_nr():
            kept = retrace(g)
    assert {n.meta["seq_nr"] for n in replayed.nodes if n.op == "call_function"} == {g.node("sin").meta["seq_nr"]}
    assert [n.meta.get("seq_nr") for n in kept.nodes] == [n.meta.get("seq_nr") for n in g.nodes]
