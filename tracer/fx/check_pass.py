"""`check_pass`: run a graph pass on a copy and name the nodes where it broke an invariant (seed 001).

The invariants of graphs between AOT tracing and Inductor, and how a pass's changes to them are found, are
tracer/fx/invariants.py's (the graph half). This module runs graphs on agdb's engine (`EngineRunner`, the
default runner); graphs of torch's ops run on torch's fake tensors (`TorchRunner`, tracer/sources/torch/fx_runner.py,
which `agdb.tracer.check_pass` in tracer/sources/fx.py picks for them), and any other runner plugs into
`check_pass` the same way.

Imports numpy and the engine (to run the graph); never textual or rich.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from agdb.tracer.fx.compile import uses_torch_ops
from agdb.tracer.fx.graph import Graph, Node
from agdb.tracer.fx.interpret import NotRunnable, run
from agdb.tracer.fx.invariants import (
    GraphRunner,
    Values,
    ValueSummary,
    Violation,
    ViolationKind,
    changes,
    invariants,
    is_inplace,
)

__all__ = ["EngineRunner", "Violation", "ViolationKind", "check_pass"]


class EngineRunner:
    """Runs engine graphs (capture_joint's) under no_grad on random inputs made once from the placeholders'
    `val`, by name: every graph it runs gets the same values, each run its own copies of them."""

    def __init__(self, graph: Graph, seed: int = 0) -> None:
        from agdb.engine._tensor import make_tensor

        rng = np.random.default_rng(seed)
        self.inputs: dict[str, Any] = {}
        for n in graph.nodes:
            if n.op == "placeholder":
                val = n.meta.get("val") or {"shape": [], "dtype": "float32"}
                dtype = {"float64": np.float64, "int64": np.int64, "bool": np.bool_}.get(val.get("dtype"), np.float32)
                self.inputs[n.name] = make_tensor(_strided(rng, val["shape"], val.get("stride"), dtype))

    def run(self, graph: Graph) -> Values:
        """Each placeholder's and call/get_attr node's value summary (tensor storages numbered by their memory).

        Raises:
            interpret.NotRunnable: a node the engine cannot run.
            KeyError: a placeholder the graph passed to the constructor did not have.
        """
        from agdb import engine

        with engine.no_grad():
            ph = {n: self.inputs[n.name].clone() for n in graph.nodes if n.op == "placeholder"}
            env = run(graph, ph)
            env.update(ph)
            roots: dict[int, int] = {}
            return {n.name: _summary(v, roots) for n, v in env.items()}

    def mutates(self, node: Node) -> bool:
        """In-place ops by name: the engine's targets say it (`engine.mul_`, `engine.copy_`)."""
        return is_inplace(node)


def _strided(rng: np.random.Generator, shape: list[int], stride: list[int] | None, dtype: Any) -> np.ndarray:
    """Random values with the recorded strides (a tangent of a transposed output is itself transposed), so that
    the values the graph computes have the strides its vals record."""
    if not stride or len(stride) != len(shape) or any(s < 0 for s in stride) or 0 in shape:
        return rng.standard_normal(shape).astype(dtype)
    size = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    buf = rng.standard_normal(size).astype(dtype)
    item = buf.itemsize
    return np.lib.stride_tricks.as_strided(buf, shape, [s * item for s in stride])


def _summary(value: Any, roots: dict[int, int]) -> Any:
    from agdb.engine import Tensor

    if isinstance(value, Tensor):
        data = value._data
        root = data
        while isinstance(root.base, np.ndarray):  # a view's memory is its base's
            root = root.base
        storage = roots.setdefault(id(root), len(roots))  # the values stay alive in the run's env meanwhile
        return ValueSummary(shape=list(data.shape), stride=[s // data.itemsize for s in data.strides],
                            dtype=value.dtype.name, storage=storage)
    if isinstance(value, (tuple, list)):
        return [_summary(v, roots) for v in value]
    return None


def check_pass(graph: Graph, pass_fn: Callable[[Graph], Graph | None],
               runner: GraphRunner | None = None) -> list[Violation]:
    """Run `pass_fn` on a copy of `graph` (it may edit the copy or return a new graph) and list what it broke:
    the invariants (tracer/fx/invariants.py) of the graph after the pass that the graph before it kept. A pass
    that changes nothing is clean.

    Args:
        runner: what runs the two graphs (default: an EngineRunner on `graph`'s placeholders; a graph of torch's
            ops needs a TorchRunner, which `agdb.tracer.check_pass` gives it).

    Raises:
        Whatever the pass raises; interpret.NotRunnable when a graph cannot run (a node named).
    """
    before = graph.copy()
    after = graph.copy()
    result = pass_fn(after)
    if isinstance(result, Graph):
        after = result
    after.changed()
    if runner is None and uses_torch_ops(graph):
        raise NotRunnable("this graph's ops are torch's: check it with runner=TorchRunner(graph) "
                          "(agdb.tracer.sources.torch.fx_runner), as agdb.tracer.check_pass does")
    runner = runner or EngineRunner(before)
    inv_before = invariants(before, runner.run(before), runner.mutates)
    inv_after = invariants(after, runner.run(after), runner.mutates)
    return changes(before, inv_before, after, inv_after)
