"""The in-place tensor ops the optimizers need, done on the tensors' numpy data (private to engine.optim).

PyTorch's single-tensor optimizers (foreach=False, the default on CPU) run `add_`, `mul_`, `lerp_`,
`addcmul_`, `addcdiv_` and `maximum(..., out=)` under no_grad. Each of these writes the tensor once and
bumps its version once, as engine/_inplace.py does; the arithmetic follows ATen's CPU kernels (a Python
number is cast to the tensor's dtype first; lerp switches formula at weight 0.5). Going straight to the
data, these calls are not reported to op observers: under no_grad they make no node.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _version
from .._tensor import Tensor, make_tensor


def _scalar(t: Tensor, value: float) -> Any:
    return t._data.dtype.type(value)


def _write(t: Tensor, value: np.ndarray) -> Tensor:
    from .._inplace import ERR_OVERLAP, _writable, has_internal_overlap

    if has_internal_overlap(t._data):  # an expand()ed parameter: torch's in-place kernels refuse it
        raise RuntimeError(ERR_OVERLAP)
    np.copyto(_writable(t._data), value, casting="unsafe")
    _version.bump_tensor(t)  # an inference tensor (state made under inference_mode) refuses, as in torch
    return t


def add_(t: Tensor, other: np.ndarray, alpha: float = 1) -> Tensor:
    """t.add_(other, alpha=alpha): t + alpha * other."""
    if alpha == 1:
        return _write(t, t._data + other)
    return _write(t, t._data + _scalar(t, alpha) * other)


def mul_(t: Tensor, value: float) -> Tensor:
    """t.mul_(value) for a number."""
    return _write(t, t._data * _scalar(t, value))


def lerp_(t: Tensor, end: np.ndarray, weight: float) -> Tensor:
    """t.lerp_(end, weight) for a number weight, with ATen's two formulas."""
    w = _scalar(t, weight)
    a = t._data
    if abs(weight) < 0.5:
        return _write(t, a + w * (end - a))
    return _write(t, end - (end - a) * (_scalar(t, 1) - w))


def addcmul_(t: Tensor, t1: np.ndarray, t2: np.ndarray, value: float = 1) -> Tensor:
    """t.addcmul_(t1, t2, value=value): t + value * t1 * t2."""
    return _write(t, t._data + _scalar(t, value) * t1 * t2)


def addcdiv_(t: Tensor, t1: np.ndarray, t2: np.ndarray, value: float = 1) -> Tensor:
    """t.addcdiv_(t1, t2, value=value): t + value * t1 / t2."""
    return _write(t, t._data + _scalar(t, value) * t1 / t2)


def maximum_(t: Tensor, other: np.ndarray) -> Tensor:
    """torch.maximum(t, other, out=t) (NaN wins, as in torch)."""
    return _write(t, np.maximum(t._data, other))


def clone(t: Tensor, data: np.ndarray) -> Tensor:
    """A new tensor (no history, version 0) holding a copy of `data`, on `t`'s device."""
    return make_tensor(np.array(data, copy=True), device=t._device)
