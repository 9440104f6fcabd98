"""`compile_joint` for a joint graph of torch's ops (docs/fx.md, "Descriptors"): the graph rebuilt as a torch.fx
GraphModule (fx_runner.py), its forward part run in a `torch.autograd.Function`'s forward and its backward part in
that Function's backward, on real tensors, as tracer/fx/compile.py does on the engine. An edited joint graph can so be
executed and its gradients compared with eager torch.

The values the backward part reads from the forward part are kept with `ctx.save_for_backward` (tensors; torch then
checks that nothing modified them in place in between) or on `ctx` (anything else). Forward outputs without a
tangent are marked non-differentiable, as AOTAutograd makes no tangent for an output that needs no gradient.

Imports torch: imported lazily, by compile_joint when the graph's targets are torch's.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from agdb.tracer.fx.compile import JointParts
from agdb.tracer.fx.graph import Graph

from .fx_runner import run_nodes, to_graph_module


def compile_torch_joint(graph: Graph, parts: JointParts) -> Callable[..., Any]:
    """A callable `f(*params, *buffers, *inputs)` running `graph` on torch (tracer/fx/compile.py's contract).

    Raises:
        interpret.NotRunnable: a node agdb cannot rebuild (a higher-order op, a get_attr), named.
    """
    gm, nodes = to_graph_module(graph)
    names = {t: name for name, t in nodes.items()}
    primals = [nodes[p.name] for p in parts.primals]
    fwd = [nodes[n.name] for n in parts.fwd_nodes]
    bwd = [nodes[n.name] for n in parts.bwd_nodes]
    fwd_out = [None if v is None else nodes[v.name] for v in parts.fwd_out]
    tangents = {nodes[t.name]: i for t, i in ((t, parts.tangent_of[t.name]) for t in parts.tangents)}
    grad_of = [None if g is None else nodes[g.name] for g in parts.grad_of]
    bwd_set = set(bwd)
    saved = [n for n in primals + fwd if n in grad_of or any(u in bwd_set for u in n.users)]
    no_tangent = [i for i in range(len(fwd_out)) if i not in tangents.values()]

    class CompiledJoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            if len(args) != len(primals):
                raise TypeError(f"the compiled joint graph takes {len(primals)} tensors (parameters, buffers, then "
                                f"inputs), not {len(args)}")
            env = run_nodes(fwd, dict(zip(primals, args, strict=True)), names)
            tensors = [n for n in saved if isinstance(env[n], torch.Tensor)]
            ctx.save_for_backward(*(env[n] for n in tensors))
            ctx.tensors = tensors
            ctx.others = {n: env[n] for n in saved if not isinstance(env[n], torch.Tensor)}
            results = tuple(None if v is None else env[v] for v in fwd_out)
            ctx.mark_non_differentiable(*(results[i] for i in no_tangent if isinstance(results[i], torch.Tensor)))
            return results if len(results) != 1 else results[0]

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            env = dict(zip(ctx.tensors, ctx.saved_tensors, strict=True))
            env.update(ctx.others)
            env.update({t: grads[i] for t, i in tangents.items()})
            run_nodes(bwd, env, names)
            return tuple(None if g is None else env[g] for g in grad_of)

    def compiled(*args: Any) -> Any:
        return CompiledJoint.apply(*args)

    compiled.graph = graph  # type: ignore[attr-defined]
    compiled.graph_module = gm  # type: ignore[attr-defined]
    return compiled
