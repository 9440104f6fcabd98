"""`compile_joint`: a (possibly edited) joint graph of the engine's ops back into a differentiable callable.

The graph is partitioned by `partitioner_tag` (`joint_parts`): the forward part runs in a custom Function's forward,
the backward part in its backward, reading the forward's values it needs. The callable takes the parameters,
the buffers, then the inputs, as the placeholders order them, and returns the forward outputs. A graph of torch's ops
(`aten.mul.Tensor`) is split the same way and run on torch by tracer/sources/torch/fx_compile.py;
`agdb.tracer.compile_joint` (tracer/sources/fx.py) picks the one a graph needs.

Imports the engine inside the function that builds the callable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from agdb.tracer.fx.descriptors import (
    AOTOutput,
    GradAOTOutput,
    PlainAOTOutput,
    TangentAOTInput,
    descriptor_from_text,
)
from agdb.tracer.fx.graph import Graph, Node
from agdb.tracer.fx.interpret import NotRunnable, run


@dataclass
class JointParts:
    """A joint graph split as compile_joint runs it."""

    primals: list[Node]  # the callable's arguments: parameters, buffers, inputs
    tangents: list[Node]
    tangent_of: dict[str, int]  # tangent name -> the position in `fwd_out` of the output it is the grad of
    fwd_out: list[Node | None]  # the forward outputs (PlainAOTOutput), in order
    grad_of: list[Node | None]  # per primal: the node of its gradient, or None
    fwd_nodes: list[Node]  # call and get_attr nodes not tagged is_backward, in order
    bwd_nodes: list[Node]  # those tagged is_backward


def joint_parts(graph: Graph) -> JointParts:
    """Split a joint graph by its descriptors and partitioner tags (torch's `{"class", "expr"}` descriptor text
    read as agdb's descriptor classes).

    Raises:
        ValueError: no descriptors, or outputs that are neither plain outputs nor gradients (an input mutation's
            new value), which compile_joint does not return.
    """
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if any("desc" not in n.meta for n in placeholders):
        raise ValueError("compile_joint needs a joint graph with descriptors (capture_joint makes one)")
    desc = {n.name: descriptor_from_text(n.meta["desc"], output=False) for n in placeholders}
    primals = [n for n in placeholders if not isinstance(desc[n.name], TangentAOTInput)]
    tangents = [n for n in placeholders if isinstance(desc[n.name], TangentAOTInput)]
    out = graph.output_node
    values = out.args[0]
    descs: list[AOTOutput | None] = [descriptor_from_text(d, output=True) for d in out.meta.get("desc") or []]
    if len(descs) != len(values):
        raise ValueError("compile_joint needs the output's descriptors (one per returned value)")
    plain = [(v, d) for v, d in zip(values, descs, strict=True) if isinstance(d, PlainAOTOutput)]
    other = [d.expr() for v, d in zip(values, descs, strict=True)
             if d is not None and not isinstance(d, (PlainAOTOutput, GradAOTOutput))]
    if other:
        raise ValueError(f"compile_joint returns plain outputs and gradients; this joint graph also returns "
                         f"{', '.join(other)}")
    position = {d.idx: i for i, (_, d) in enumerate(plain)}
    tangent_of = {}
    for t in tangents:
        of = desc[t.name].output  # type: ignore[union-attr]
        if not isinstance(of, PlainAOTOutput) or of.idx not in position:
            raise ValueError(f"tangent {t.name} is the grad of {of.expr()}, which is not a plain output")
        tangent_of[t.name] = position[of.idx]
    grads = {d.grad_of: v for v, d in zip(values, descs, strict=True) if isinstance(d, GradAOTOutput)}
    calls = [n for n in graph.nodes if n.op in ("call_function", "get_attr")]
    return JointParts(primals, tangents, tangent_of, [v for v, _ in plain],
                      [grads.get(desc[p.name]) for p in primals],
                      [n for n in calls if n.meta.get("partitioner_tag") != "is_backward"],
                      [n for n in calls if n.meta.get("partitioner_tag") == "is_backward"])


def torch_target(graph: Graph) -> str | None:
    """The first call target of `graph` that is torch's (`aten.mul.Tensor`), not the engine's (`engine.mul`), or
    None."""
    return next((n.target for n in graph.nodes if n.op == "call_function"
                 and n.target not in ("getitem", "PythonOp", "PythonOpGrad") and not n.target.startswith("engine.")),
                None)


def uses_torch_ops(graph: Graph) -> bool:
    """Whether `graph`'s calls are torch's (`aten.mul.Tensor`), not the engine's (`engine.mul`)."""
    return torch_target(graph) is not None


def compile_joint(graph: Graph) -> Callable[..., Any]:
    """A callable `f(*params, *buffers, *inputs)` that runs the forward part and, under backward, the backward
    part of `graph` on the engine.

    Raises:
        ValueError: the graph has no output node or placeholders without descriptors.
        interpret.NotRunnable: a graph of torch's ops (agdb.tracer.compile_joint runs those).
    """
    target = torch_target(graph)
    if target is not None:
        raise NotRunnable(f"this joint graph's ops are torch's ({target}): agdb.tracer.compile_joint runs it on "
                          "torch (tracer/sources/torch/fx_compile.py)")
    parts = joint_parts(graph)
    from agdb import engine

    primals, fwd_out = parts.primals, parts.fwd_out
    tangents = {t: parts.tangent_of[t.name] for t in parts.tangents}

    class CompiledJoint(engine.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            if len(args) != len(primals):
                raise TypeError(f"the compiled joint graph takes {len(primals)} tensors (parameters, buffers, then "
                                f"inputs), not {len(args)}")
            env = run(graph, dict(zip(primals, args, strict=True)), parts.fwd_nodes)
            ctx.env = env
            results = tuple(env[v] if v is not None else None for v in fwd_out)
            return results if len(results) != 1 else results[0]

        @staticmethod
        def backward(ctx, *grads):
            env = run(graph, {t: grads[i] for t, i in tangents.items()}, parts.bwd_nodes, env=ctx.env)
            return tuple(env[g] if g is not None else None for g in parts.grad_of)

    def compiled(*args: Any) -> Any:
        return CompiledJoint.apply(*args)

    compiled.graph = graph  # type: ignore[attr-defined]
    return compiled
