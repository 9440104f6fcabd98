"""`compile_joint` and `check_pass` for a joint graph from any source (`agdb.tracer.compile_joint`,
`agdb.tracer.check_pass`; docs/fx.md): a graph of the engine's ops (capture_joint's) runs on the engine
(tracer/fx/compile.py, tracer/fx/check_pass.py's EngineRunner), a graph of torch's ops (`aten.mul.Tensor`, from
tracer/sources/torch) on torch (tracer/sources/torch/fx_compile.py, fx_runner.py's TorchRunner on fake tensors).

It sits above tracer/fx, which never imports a source; torch is imported only for a graph of torch's ops.
"""
from __future__ import annotations

from typing import Any, Callable

from agdb.tracer.fx.check_pass import EngineRunner
from agdb.tracer.fx.check_pass import check_pass as check_with
from agdb.tracer.fx.compile import compile_joint as compile_on_engine
from agdb.tracer.fx.compile import joint_parts, uses_torch_ops
from agdb.tracer.fx.graph import Graph
from agdb.tracer.fx.invariants import GraphRunner, Violation


def default_runner(graph: Graph) -> GraphRunner:
    """check_pass's runner for `graph`: a TorchRunner for torch's ops, an EngineRunner for the engine's."""
    if uses_torch_ops(graph):
        from agdb.tracer.sources.torch.fx_runner import TorchRunner

        return TorchRunner(graph)
    return EngineRunner(graph)


def check_pass(graph: Graph, pass_fn: Callable[[Graph], Graph | None],
               runner: GraphRunner | None = None) -> list[Violation]:
    """tracer/fx/check_pass.py's `check_pass`, run by `runner` or `default_runner(graph)`.

    Raises:
        Whatever the pass raises; interpret.NotRunnable when a graph cannot run (a node named).
    """
    return check_with(graph, pass_fn, runner or default_runner(graph))


def compile_joint(graph: Graph) -> Callable[..., Any]:
    """A differentiable callable `f(*params, *buffers, *inputs)` running the joint `graph`: on torch, in a
    torch.autograd.Function, for torch's ops; on the engine for the engine's (tracer/fx/compile.py).

    Raises:
        ValueError: no descriptors, or outputs that are neither plain outputs nor gradients.
        interpret.NotRunnable: a node agdb cannot rebuild (a higher-order op such as invoke_subgraph), named.
    """
    if uses_torch_ops(graph):
        from agdb.tracer.sources.torch.fx_compile import compile_torch_joint

        return compile_torch_joint(graph, joint_parts(graph))
    return compile_on_engine(graph)
