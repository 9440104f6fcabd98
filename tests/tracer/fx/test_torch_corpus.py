"""capture_joint against torch 2.13's aot_function and aot_export_joint_with_descriptors on a corpus.

Compared relative to the first forward node (AOT runs the forward once before tracing, so torch's absolute
numbers start later): the forward seq_nrs in order, which forward seq_nrs have backward nodes, the number
and seq_nr of is_gradient_acc nodes, and the descriptors of placeholders and outputs.

Known differences, listed rather than hidden: AOT's joint graph holds `detach` nodes for saved outputs
(forward and backward), which the engine's formulas read directly; they are dropped from torch's side. Op
names: the forward ones agree exactly; backward ones agree after ENGINE_RENAMES (the engine's formula
helpers) and with aten's `sum` + `view` pair (at::sum_to) counted as the engine's one `sum_to`; detach is
left out of the name comparison on both sides.
"""
from __future__ import annotations

import contextlib
import functools

import pytest

from agdb import engine
from agdb.tracer.fx import capture_joint

from .corpus import PROGRAMS

torch = pytest.importorskip("torch")

TORCH_ONLY_TARGETS = {"aten.detach.default"}
"""Targets AOT adds that have no counterpart in the engine's graphs (saved outputs are detached in aten)."""


ENGINE_RENAMES = {"mul_scalar": "mul", "div_scalar": "div", "slice_": "slice", "sum_to": "sum", "reshape": "view",
                  "squeeze_dims": "squeeze"}
"""Formula helpers of the engine and the aten op each stands for (ViewBackward0's formula reshapes the grad, which
aten decomposes to view; matmul's in-place squeeze_ of its fresh 1-D result is functionalized to squeeze)."""


def op_names(nodes, renames=None):
    """(forward, backward) base op names in graph order: `aten.mul.Tensor` and `engine._ops.mul` are `mul`."""
    out: tuple[list, list] = ([], [])
    for n in nodes:
        t = str(n.target)
        name = t.split(".")[1] if t.startswith("aten.") else t.rsplit(".", 1)[-1]
        name = (renames or {}).get(name, name)
        if name == "detach":
            continue  # dropped on torch's side (TORCH_ONLY_TARGETS), so a user's own detach is dropped on ours

        side = out[n.meta.get("partitioner_tag") == "is_backward"]
        if renames is None and name == "view" and side and side[-1] == "sum":
            continue  # at::sum_to's view after its sum
        side.append(name)
    return out


def summary(nodes):
    """(forward seq_nrs in order, forward seq_nrs with backward nodes, grad-acc seq_nrs), relative."""
    calls = [(n.meta.get("partitioner_tag"), n.meta.get("seq_nr"), bool(n.meta.get("is_gradient_acc")))
             for n in nodes]
    fwd = [s for tag, s, _ in calls if tag != "is_backward"]
    s0 = fwd[0]
    rel = [s - s0 for s in fwd]
    bwd = {s - s0 for tag, s, acc in calls if tag == "is_backward" and not acc}
    acc = sorted(s - s0 for tag, s, a in calls if a)
    return rel, sorted(bwd & set(rel)), acc


def torch_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and str(n.target) not in TORCH_ONLY_TARGETS
            and str(n.target) != "<built-in function getitem>"]


def ours(program):
    target, args = program(engine)
    g = capture_joint(target, *args)
    return g, [n for n in g.nodes if n.op == "call_function" and n.target != "getitem"]


@functools.lru_cache(maxsize=None)
def torch_aot(program):
    """The joint graph of aot_function (functions) or aot_export_joint_with_descriptors (modules)."""
    from functorch.compile import aot_function, default_partition

    target, args = program(torch)
    if isinstance(target, torch.nn.Module):
        from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

        with contextlib.ExitStack() as stack:
            return aot_export_joint_with_descriptors(stack, target, args).graph_module
    seen = {}

    def partition(joint, joint_inputs, **kw):
        seen["joint"] = joint
        return default_partition(joint, joint_inputs, **kw)

    def compiler(gm, _):
        return gm

    aot_function(target, fw_compiler=compiler, bw_compiler=compiler, partition_fn=partition)(*args)
    return seen["joint"]


def torch_descs(program):
    target, args = program(torch)
    if not isinstance(target, torch.nn.Module):
        fn = target

        class Wrap(torch.nn.Module):
            def forward(self, *a):
                return fn(*a)
        target = Wrap()
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    with contextlib.ExitStack() as stack:
        gm = aot_export_joint_with_descriptors(stack, target, args).graph_module
    ph = [repr(n.meta["desc"]) for n in gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return ph, [repr(d) for d in out.meta["desc"]]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_seq_nrs_agree_with_aot(program):
    """Forward seq_nrs in order, the forward seq_nrs with backward nodes, and the grad-acc nodes agree."""
    _, mine = ours(program)
    theirs = torch_nodes(torch_aot(program))
    assert summary(mine) == summary(theirs)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_descriptors_agree_with_export(program):
    """Placeholder and output descriptors agree with aot_export_joint_with_descriptors."""
    g, _ = ours(program)
    ph = [repr(n.meta["desc"]) for n in g.nodes if n.op == "placeholder"]
    assert (ph, [repr(d) for d in g.output_node.meta["desc"]]) == torch_descs(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_op_names_agree_up_to_the_listed_differences(program):
    """Forward op names agree exactly; backward ones after ENGINE_RENAMES and aten's sum_to pair."""
    _, mine = ours(program)
    assert op_names(mine, ENGINE_RENAMES) == op_names(torch_nodes(torch_aot(program)))
