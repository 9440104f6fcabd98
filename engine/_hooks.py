"""Running hooks as the engine does: tensor, retains_grad, Node pre- and post-hooks (engine-semantics §7.1, §7.2)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _observer
from ._dtype import cpp_type_name
from ._node import Node, hook_name
from ._ops import add, clone
from ._tensor import Tensor

if TYPE_CHECKING:
    from ._graph_task import GraphTask


def check_single_result(original: Any, result: Any, hook: Any) -> None:
    """Refuse a hook result that changes a grad's presence, type, device or size (python_hook.cpp)."""
    if result is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if original._data.dtype != result._data.dtype:
        was, got = cpp_type_name(original.dtype, original._device), cpp_type_name(result.dtype, result._device)
        raise RuntimeError(f"hook '{hook_name(hook)}' has changed the type of value (was {was} got {got})")
    if original._device != result._device:
        was_cuda = original._device.startswith("cuda")
        raise RuntimeError(f"hook '{hook_name(hook)}' has changed the type of value "
                           f"{'(was CUDA tensor got CPU tensor)' if was_cuda else '(was CPU tensor got CUDA tensor)'}")
    if original._data.shape != result._data.shape:
        raise RuntimeError(f"hook '{hook_name(hook)}' has changed the size of value")


def _check_tuple_result(prev: tuple, result: Any, hook: Any) -> None:
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(prev) != len(result):
        raise RuntimeError(f"hook '{hook_name(hook)}' has returned an incorrect number of values (got "
                           f"{len(result)}, but expected {len(prev)})")
    for p, r in zip(prev, result, strict=True):
        check_single_result(p, r, hook)


def call_tensor_pre_hooks(fn: Node, inputs: list, graph_task: GraphTask | None) -> list:
    """Tensor hooks, then retains_grad hooks, in that order (engine-semantics §7.1 steps 3a-3b)."""
    observed = bool(_observer.observers)
    for hooks, slot in fn.tensor_pre_hooks():
        value = inputs[slot]
        changed = False
        for hook in list(hooks.values()):
            res = hook(value)
            if observed:
                _observer.notify("hook_ran", graph_task, fn, "tensor_pre", hook)
            if res is None or res is value:
                continue
            check_single_result(value, res, hook)
            value, changed = res, True
        if changed:
            inputs = list(inputs)
            inputs[slot] = value
    retains = fn._retains_grad_hooks
    if retains:
        for slot, tensor_ref in list(retains.items()):
            _retain_grad(tensor_ref(), inputs[slot])
            if observed:
                _observer.notify("hook_ran", graph_task, fn, "retains_grad", tensor_ref)
    return inputs


def _retain_grad(var: Any, grad: Any) -> None:
    """The retains_grad hook: clone on the first write, out-of-place sum afterwards (engine-semantics §7.4)."""
    if var is None or grad is None:
        return
    var._grad = clone(grad) if var._grad is None else add(var._grad, grad)  # the engine's op, not the user's


def _call_tuple_hooks(fn: Node, hooks: dict, values: tuple, extra: tuple, kind: str,
                      graph_task: GraphTask | None) -> tuple:
    """Run Node hooks in registration order; a returned tuple replaces `values` (python_hook.cpp)."""
    for hook in list(hooks.values()):
        res = hook(values, *extra)
        if _observer.observers:
            _observer.notify("hook_ran", graph_task, fn, kind, hook)
        if res is None or res is values:
            continue
        _check_tuple_result(values, res, hook)
        values = res
    return values


def call_pre_hooks(fn: Node, inputs: list, graph_task: GraphTask | None) -> list:
    """Node pre-hooks `hook(grad_outputs)`; a returned tuple replaces the inputs."""
    hooks = fn._pre_hooks
    if not hooks:
        return inputs
    return list(_call_tuple_hooks(fn, hooks, tuple(inputs), (), "pre", graph_task))


def call_post_hooks(fn: Node, outputs: list, inputs: list, had_post_hooks: bool,
                    graph_task: GraphTask | None) -> list:
    """Node post-hooks `hook(grad_inputs=outputs, grad_outputs=inputs)`; a tuple replaces the outputs.

    A hook added while the node ran (none existed when it started) gets empty grad_outputs, as in PyTorch.
    """
    hooks = fn._post_hooks
    if not hooks:
        return outputs
    ins = tuple(inputs) if had_post_hooks else ()
    return list(_call_tuple_hooks(fn, hooks, tuple(outputs), (ins,), "post", graph_task))
