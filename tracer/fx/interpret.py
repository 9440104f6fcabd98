"""Run FX nodes on the engine: the interpreter behind `compile_joint`, `check_pass` and re-tracing.

Imports the engine inside the functions that need it; never textual or rich.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

from agdb.tracer.fx.graph import Graph, Node, Opaque, map_arg


class NotRunnable(ValueError):
    """A node whose target agdb cannot run (a PythonOp, a value kept only as text); the message names it."""


_impls: dict[str, Callable] = {}


def resolve(target: str) -> Callable[..., Any]:
    """The engine callable for a target: `engine.<op>` (a public op, by its op name), `engine._ops.<fn>` (a
    formula's op), `getitem`.

    Raises:
        NotRunnable: an unknown target, or a PythonOp / PythonOpGrad.
    """
    if target == "getitem":
        return operator.getitem
    if target.startswith("engine._ops."):
        from agdb.engine import _ops

        fn = getattr(_ops, target.removeprefix("engine._ops."), None)
        if fn is not None:
            return getattr(fn, "__wrapped__", fn)
    elif target.startswith("engine."):
        if not _impls:
            from agdb.engine import _dispatch

            for entry in _dispatch.REGISTRY.values():
                _impls.setdefault(entry.op, entry.impl)
        fn = _impls.get(target.removeprefix("engine."))
        if fn is not None:
            return fn
    if target in ("PythonOp", "PythonOpGrad"):
        raise NotRunnable(f"{target} nodes stand for a custom Function agdb cannot call again: capture with "
                          "custom_functions='trace' to get a runnable graph")
    raise NotRunnable(f"unknown target {target!r}")


def _value(a: Any) -> Any:
    if isinstance(a, Opaque):
        raise NotRunnable(f"an argument was kept only as text ({a.text}); the graph cannot run after loading")
    obj = getattr(a, "obj", None)  # capture's object references
    return obj if obj is not None and type(a).__name__ == "Ref" else a


def run_node(node: Node, env: dict[Node, Any], graph: Graph) -> Any:
    """The value of one node, its arguments taken from `env`."""
    if node.op == "get_attr":
        from agdb.engine._tensor import make_tensor

        if node.target not in graph.constants:
            raise NotRunnable(f"constant {node.target} was not saved with the graph")
        return make_tensor(graph.constants[node.target].copy())
    args = map_arg(node.args, lambda n: env[n])
    kwargs = map_arg(node.kwargs, lambda n: env[n])
    args = tuple(_value(a) for a in args)
    kwargs = {k: _value(v) for k, v in kwargs.items()}
    return _callable(node)(*args, **kwargs)


def _callable(node: Node) -> Callable[..., Any]:
    """The node's implementation: the exact public entry the capture saw (meta["overload"]) while the target
    still names that op, else the target's."""
    overload = node.meta.get("overload")
    if overload and node.target.startswith("engine.") and not node.target.startswith("engine._ops."):
        from agdb.engine import _dispatch

        surface, _, attr = overload.partition(":")
        entry = _dispatch.REGISTRY.get((surface, attr))
        if entry is not None and f"engine.{entry.op}" == node.target:
            return entry.impl
    return resolve(node.target)


def run(graph: Graph, inputs: dict[Node, Any], nodes: list[Node] | None = None,
        env: dict[Node, Any] | None = None, on_node: Callable[[Node, Any], None] | None = None) -> dict[Node, Any]:
    """Run `nodes` (default: every call_function and get_attr node) in order; returns the environment."""
    env = dict(env or {})
    env.update(inputs)
    for n in graph.nodes if nodes is None else nodes:
        if n.op in ("call_function", "get_attr") and n not in env:
            env[n] = run_node(n, env, graph)
            if on_node is not None:
                on_node(n, env[n])
    return env
