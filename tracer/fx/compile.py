"""`compile_joint`: a (possibly edited) joint graph back into a differentiable callable on the engine.

The graph is partitioned by `partitioner_tag`: the forward part runs in a custom Function's forward, the
backward part in its backward, reading the forward's values it needs. The callable takes the parameters,
the buffers, then the inputs, as the placeholders order them, and returns the forward outputs.

Imports the engine inside the function that builds the callable.
"""
from __future__ import annotations

from typing import Any, Callable

from agdb.tracer.fx.descriptors import GradAOTOutput, PlainAOTOutput, TangentAOTInput
from agdb.tracer.fx.graph import Graph
from agdb.tracer.fx.interpret import run


def compile_joint(graph: Graph) -> Callable[..., Any]:
    """A callable `f(*params, *buffers, *inputs)` that runs the forward part and, under backward, the backward
    part of `graph`.

    Raises:
        ValueError: the graph has no output node or placeholders without descriptors.
    """
    from agdb import engine

    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if any("desc" not in n.meta for n in placeholders):
        raise ValueError("compile_joint needs a joint graph with descriptors (capture_joint makes one)")
    primals = [n for n in placeholders if not isinstance(n.meta["desc"], TangentAOTInput)]
    tangents = [n for n in placeholders if isinstance(n.meta["desc"], TangentAOTInput)]
    out = graph.output_node
    values, descs = out.args[0], out.meta["desc"]
    fwd_out = [(v, d) for v, d in zip(values, descs, strict=True) if isinstance(d, PlainAOTOutput)]
    grad_out = {d.grad_of: v for v, d in zip(values, descs, strict=True) if isinstance(d, GradAOTOutput)}
    fwd_nodes = [n for n in graph.nodes if n.op in ("call_function", "get_attr")
                 and n.meta.get("partitioner_tag") != "is_backward"]
    bwd_nodes = [n for n in graph.nodes if n.op in ("call_function", "get_attr")
                 and n.meta.get("partitioner_tag") == "is_backward"]

    class CompiledJoint(engine.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            if len(args) != len(primals):
                raise TypeError(f"the compiled joint graph takes {len(primals)} tensors (parameters, buffers, then "
                                f"inputs), not {len(args)}")
            env = run(graph, dict(zip(primals, args, strict=True)), fwd_nodes)
            ctx.env = env
            results = tuple(env[v] if v is not None else None for v, _ in fwd_out)
            return results if len(results) != 1 else results[0]

        @staticmethod
        def backward(ctx, *grads):
            by_output = {d.idx: g for (_, d), g in zip(fwd_out, grads, strict=True)}
            inputs = {t: by_output[t.meta["desc"].output.idx] for t in tangents}
            env = run(graph, inputs, bwd_nodes, env=ctx.env)
            return tuple(env[grad_out[p.meta["desc"]]] if grad_out.get(p.meta["desc"]) is not None else None
                         for p in primals)

    def compiled(*args: Any) -> Any:
        return CompiledJoint.apply(*args)

    compiled.graph = graph  # type: ignore[attr-defined]
    return compiled
