"""validate_outputs: check and conform the grads a node returns (engine-semantics §5.2)."""
from __future__ import annotations

from typing import Any

from ._node import Node
from ._ops import sum_to, to
from ._ops.formulas import sum_to_unrecorded
from ._state import tls
from ._tensor import Tensor

_sum_to = sum_to  # the engine's own, which tracer/fx's capture replaces to see it


def validate_outputs(edges: list, grads: list, fn: Node | None) -> None:
    """Check grads against the next nodes' input metadata; reduce broadcast grads (engine-semantics §5.2).

    Messages name `fn` ("Function XBackward0 returned an ...") when given; root grads pass None.
    """
    if len(grads) != len(edges):
        _validation_error(fn, f"invalid number of gradients - expected {len(edges)}, but got {len(grads)}")
    i = -1
    for nxt, input_nr in edges:
        i += 1
        if nxt is None:
            continue
        grad = grads[i]
        if grad is None:
            continue
        meta = nxt._input_metadata[input_nr]
        data = grad._data if grad.__class__ is Tensor else getattr(grad, "_data", None)
        dtype = meta.dtype
        if data is not None and data.shape == meta.shape and dtype is not None and data.dtype == dtype.np and \
                grad._device == meta.device:
            continue  # the common case: nothing to check further
        grads[i] = conform_grad(fn, i, grad, meta)


def conform_grad(fn: Node | None, i: int, grad: Any, meta: Any) -> Any:
    """Grad `i` of `fn`, a Tensor or not, that validate_outputs' common case does not pass, checked against `meta`
    and conformed: summed to its shape, cast to its dtype, moved to its device."""
    if not isinstance(grad, Tensor):
        raise TypeError(f"expected Tensor or None for gradient {i}, got {type(grad).__name__}")
    if not meta.is_defined:
        return grad
    shape = meta.shape
    if grad._data.shape != shape:
        if shape and not tls.grad_enabled and sum_to is _sum_to:
            # nothing records (no create_graph, and tracer/fx's capture does not wrap sum_to): summed directly, the
            # shape checked on the way
            summed = sum_to_unrecorded(grad, shape)
            if summed is None:
                _shape_error(fn, i, grad, shape)
            grad = summed
        else:
            if not _is_expandable_to(shape, grad._data.shape):
                _shape_error(fn, i, grad, shape)
            grad = sum_to(grad, shape)
    if meta.dtype is not None and grad._data.dtype != meta.dtype.np:
        grad = to(grad, meta.dtype)
    if grad._device != meta.device:
        if grad._data.ndim != 0:
            _validation_error(fn, f"invalid gradient at index {i} - expected device {meta.device} but got "
                                  f"{grad._device}")
        grad = to(grad, meta.device)
    return grad


def _shape_error(fn: Node | None, i: int, grad: Tensor, shape: tuple) -> None:
    _validation_error(fn, f"invalid gradient at index {i} - got {list(grad._data.shape)} but expected shape "
                          f"compatible with {list(shape)}")


def _validation_error(fn: Node | None, msg: str) -> None:
    raise RuntimeError(msg if fn is None else f"Function {fn.name()} returned an {msg}")


def _is_expandable_to(shape: tuple, desired: tuple) -> bool:
    nd, nt = len(shape), len(desired)
    if nd > nt:
        return False
    for i in range(nd):
        size, target = shape[nd - i - 1], desired[nt - i - 1]
        if size != target and size != 1:
            return False
    return True
