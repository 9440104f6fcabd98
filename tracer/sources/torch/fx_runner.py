"""agdb's plain graphs of aten ops run on torch again: `to_graph_module`, `TorchRunner` (docs/fx.md, "Pass invariants").

A graph converted from torch (tracer/sources/torch/fx.py, fx_run.py) keeps its targets as text (`aten.mul.Tensor`,
`getitem`) and dtypes, devices and layouts as `Opaque` text. `to_graph_module` resolves them back
(`torch.ops.aten.mul.Tensor`, `operator.getitem`, `torch.float32`, `torch.device("cpu")`) into a torch.fx
GraphModule with the same node names; `run_nodes` runs some of its nodes on given values (compile_joint's forward
and backward parts, tracer/sources/torch/fx_compile.py).

`TorchRunner` is check_pass's runner for such graphs: it runs a graph on fake tensors made from the placeholders'
`val` (shape, stride, dtype) under a FakeTensorMode, so every node's value is recomputed by torch's meta functions as
FakeTensorUpdater recomputes `val`, without real compute (a constant tensor, a `get_attr`, is made from its own
`val`); storage identity is the fake tensor's untyped storage.
Which nodes mutate is the op schema's word (an argument whose alias_info is written), not the op's name.

A node agdb cannot rebuild (a higher-order op holding a subgraph such as invoke_subgraph, a `get_attr` whose value
a real run needs, an argument kept only as text) raises `NotRunnable` naming the node.

Imports torch: imported lazily (by check-pass --torch, compile_joint on a torch graph, and tests).
"""
from __future__ import annotations

import operator
from typing import Any

import torch

from agdb.tracer.fx.graph import Graph, Node, Opaque
from agdb.tracer.fx.interpret import NotRunnable
from agdb.tracer.fx.invariants import Values, ValueSummary, is_inplace

from .fx import _DTYPES

_NAMESPACES = ("aten", "prims", "quantized", "_c10d_functional", "c10d_functional", "_quantized", "rngprims")
"""torch.ops namespaces whose ops a converted graph may name (`aten.mul.Tensor`): the first part of the target."""

_KEPT_META = ("seq_nr", "partitioner_tag", "is_gradient_acc", "autograd_backward", "custom", "stack_trace")


def resolve(target: str, node: str | None = None) -> Any:
    """The torch callable a converted target names: `aten.mul.Tensor` -> torch.ops.aten.mul.Tensor, `getitem` ->
    operator.getitem, `operator.mul` -> operator.mul (symbolic-size arithmetic).

    Raises:
        NotRunnable: a target that names no op agdb can call (a higher-order op, an unknown namespace).
    """
    where = f"node {node} ({target})" if node else repr(target)
    if target == "getitem":
        return operator.getitem
    parts = target.split(".")
    if parts[0] == "operator" and len(parts) == 2 and callable(getattr(operator, parts[1], None)):
        return getattr(operator, parts[1])
    if parts[0] in _NAMESPACES and len(parts) in (2, 3):
        try:
            op: Any = getattr(getattr(torch.ops, parts[0]), parts[1])
            if len(parts) == 3:
                op = getattr(op, parts[2])
        except (AttributeError, RuntimeError):
            raise NotRunnable(f"{where}: torch {torch.__version__} has no such op") from None
        if isinstance(op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return op
    if "." not in target or target.startswith("higher_order."):
        raise NotRunnable(f"{where} is a higher-order op or an object agdb keeps only by name: its subgraphs and "
                          "arguments are not in the plain graph, so agdb cannot run this graph")
    raise NotRunnable(f"{where}: not an op agdb can call again (only torch.ops targets such as aten.mul.Tensor, and "
                      "getitem)")


def _object(value: Opaque, node: Node) -> Any:
    """A dtype, memory format, layout or device kept as text, as the torch object."""
    text = value.text
    if text.startswith("torch."):
        obj = getattr(torch, text.removeprefix("torch."), None)
        if isinstance(obj, (torch.dtype, torch.memory_format, torch.layout)):
            return obj
    else:
        try:
            return torch.device(text)
        except (RuntimeError, TypeError, ValueError):
            pass
    raise NotRunnable(f"node {node.name} ({node.target}): the argument {text} was kept only as text (a symbolic "
                      "size, or an object agdb does not rebuild), so agdb cannot run it")


def _arg(value: Any, env: dict, node: Node) -> Any:
    if isinstance(value, Opaque):
        return _object(value, node)
    if isinstance(value, Node):
        return env[value.name]
    if isinstance(value, tuple):
        return tuple(_arg(v, env, node) for v in value)
    if isinstance(value, list):
        return [_arg(v, env, node) for v in value]
    if isinstance(value, dict):
        return {k: _arg(v, env, node) for k, v in value.items()}
    return value


def to_graph_module(graph: Graph, constants_as_inputs: bool = False) -> tuple[torch.fx.GraphModule,
                                                                               dict[str, torch.fx.Node]]:
    """A runnable torch.fx GraphModule of `graph` (aten targets), and its nodes by agdb's node names (torch may
    rename one whose name is a Python keyword or builtin). Plain meta (`seq_nr`, `partitioner_tag`, `custom`, ...)
    is copied onto torch's nodes; `val` is not (run it on fake tensors to get one). The plain graph keeps no
    constant tensor (`_tensor_constant0`, a get_attr): with `constants_as_inputs`, each get_attr with a tensor `val`
    becomes an input of the same name (a fake run makes it from its val).

    Raises:
        NotRunnable: a node agdb cannot rebuild (named in the message). Call targets are checked first, so a
            higher-order op is named rather than the `get_attr` of its subgraph.
    """
    for n in graph.nodes:
        if n.op == "call_function":
            resolve(n.target, n.name)
    tg = torch.fx.Graph()
    nodes: dict[str, torch.fx.Node] = {}
    for n in graph.nodes:
        if n.op == "placeholder" or n.op == "get_attr" and constants_as_inputs and _is_tensor_val(n.meta.get("val")):
            made = tg.placeholder(n.name)
        elif n.op == "call_function":
            made = tg.create_node("call_function", resolve(n.target, n.name), _arg(n.args, nodes, n),
                                  _arg(n.kwargs, nodes, n), name=n.name)
        elif n.op == "output":
            made = tg.output(_arg(n.args[0], nodes, n))
        else:
            raise NotRunnable(f"node {n.name} ({n.op} {n.target}) reads a tensor or submodule of the GraphModule, "
                              "whose value the plain graph does not keep, so agdb cannot run this graph")
        made.meta.update({k: n.meta[k] for k in _KEPT_META if k in n.meta})
        nodes[n.name] = made
    return torch.fx.GraphModule(torch.nn.Module(), tg), nodes


def _is_tensor_val(val: Any) -> bool:
    return isinstance(val, dict) and "shape" in val


def run_nodes(nodes: list[torch.fx.Node], env: dict[torch.fx.Node, Any], names: dict[torch.fx.Node, str]) -> dict:
    """Run call nodes in order, arguments from `env` (which gets each result).

    Raises:
        NotRunnable: torch raised on a node (named, with torch's first line).
    """
    for n in nodes:
        args = torch.fx.node.map_arg(n.args, env.__getitem__)
        kwargs = torch.fx.node.map_arg(n.kwargs, env.__getitem__)
        try:
            env[n] = n.target(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - torch's error, said in one line with the node
            text = str(e).strip().splitlines()
            raise NotRunnable(f"torch raised {type(e).__name__} running node {names[n]} ({n.target}): "
                              f"{text[0] if text else ''}") from None
    return env


def fake_input(val: Any, name: str) -> Any:
    """A fake tensor with a placeholder's recorded shape, stride and dtype (call under a FakeTensorMode); a
    recorded Python scalar as itself.

    Raises:
        NotRunnable: no val, or a symbolic size.
    """
    if isinstance(val, (bool, int, float)):
        return val
    if not isinstance(val, dict) or "shape" not in val:
        raise NotRunnable(f"placeholder {name} has no meta['val'] to make an input from")
    shape, stride = list(val["shape"]), val.get("stride")
    if not all(isinstance(s, int) for s in shape + list(stride or [])):
        raise NotRunnable(f"placeholder {name} has a symbolic size ({shape}): agdb runs graphs with static shapes "
                          "only")
    dtype = getattr(torch, str(val.get("dtype", "float32")), None)
    if not isinstance(dtype, torch.dtype):
        raise NotRunnable(f"placeholder {name} has dtype {val.get('dtype')!r}, which this torch lacks")
    if stride is None or len(stride) != len(shape):
        return torch.empty(shape, dtype=dtype)
    return torch.empty_strided(shape, stride, dtype=dtype)


def summary(value: Any, storages: dict[int, int]) -> Any:
    """A tensor's {shape, stride, dtype, storage} (storages numbered in order of appearance; a list for several)."""
    if isinstance(value, torch.Tensor):
        key = value.untyped_storage()._cdata  # the values stay alive in the run's env meanwhile
        return ValueSummary(shape=list(value.shape), stride=list(value.stride()),
                            dtype=_DTYPES.get(value.dtype) or str(value.dtype).removeprefix("torch."),
                            storage=storages.setdefault(key, len(storages)))
    if isinstance(value, (list, tuple)):
        return [summary(v, storages) for v in value]
    return None


class TorchRunner:
    """check_pass's runner for graphs of aten ops: fake tensors made from the placeholders' `val` of the graph
    given (by name; a placeholder a pass added gets its own `val`), one FakeTensorMode per run."""

    def __init__(self, graph: Graph) -> None:
        self.vals = {n.name: n.meta.get("val") for n in graph.nodes if n.op == "placeholder"}
        self._mutating: dict[str, bool] = {}

    def run(self, graph: Graph) -> Values:
        """Each placeholder's and call node's value summary, computed on fake tensors.

        Raises:
            NotRunnable: a node agdb cannot rebuild or torch cannot run on fake tensors (named).
        """
        from torch._subclasses.fake_tensor import FakeTensorMode

        gm, nodes = to_graph_module(graph, constants_as_inputs=True)
        names = {t: name for name, t in nodes.items()}
        with FakeTensorMode(allow_non_fake_inputs=False):
            env: dict[torch.fx.Node, Any] = {}
            for n in graph.nodes:
                if n.op == "placeholder":
                    env[nodes[n.name]] = fake_input(self.vals.get(n.name, n.meta.get("val")), n.name)
                elif n.op == "get_attr":  # a constant tensor: its value does not matter on fake tensors
                    env[nodes[n.name]] = fake_input(n.meta.get("val"), n.name)
            calls = [nodes[n.name] for n in graph.nodes if n.op == "call_function"]
            run_nodes(calls, env, names)
            storages: dict[int, int] = {}
            return {names[t]: summary(v, storages) for t, v in env.items()}

    def mutates(self, node: Node) -> bool:
        """Whether the op's schema writes into an argument (`Tensor(a!)`: in-place and out= ops, `copy_`);
        a target without a schema (getitem) by its name."""
        if node.target not in self._mutating:
            try:
                op = resolve(node.target)
            except NotRunnable:
                op = None
            if isinstance(op, torch._ops.OpOverload):
                self._mutating[node.target] = any(a.alias_info is not None and a.alias_info.is_write
                                                  for a in op._schema.arguments)
            else:
                self._mutating[node.target] = is_inplace(node)
        return self._mutating[node.target]


__all__ = ["NotRunnable", "TorchRunner", "fake_input", "resolve", "run_nodes", "summary", "to_graph_module"]
