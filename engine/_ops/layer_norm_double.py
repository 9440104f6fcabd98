"""layer_norm's double backward (NativeLayerNormBackwardBackward0): torch's values, and the tensors its composite
`layer_norm_double_backward` (FunctionsManual.cpp) hands on.

torch builds each grad from ops and ends with `reshape_as`, so every grad is a view whose base holds its memory:
an InputBuffer never sums into it in place (the storage has two owners), and its version counts the in-place
ops that built it (`div_`, `add_`). The values are computed in numpy; only the tensors are shaped as torch's.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._tensor import Tensor
from .._version import bump
from ._common import _out
from .shape import expand, reshape


def _ln_axes(a: Tensor, normalized_shape: tuple) -> tuple[int, ...]:
    nd = a._data.ndim
    return tuple(range(nd - len(normalized_shape), nd))


def _written(values: np.ndarray, shape: tuple, writes: int, like: Tensor) -> Tensor:
    """A new tensor of `values` laid out as `shape`, written in place `writes` times (each bumps its version)."""
    base = _out(np.ascontiguousarray(values.astype(like._data.dtype)).reshape(shape), like)
    for _ in range(writes):
        bump(base._data)
    return base


def layer_norm_double_backward(node: Any, grads: list) -> list:
    """The grads w.r.t. (grad_out, input, weight) given the grads of (dx, dw, db), as torch's composite makes them:
    gI a view (reshape_as) of an (M, N) tensor written 3 times for ggI (div_, add_, add_) and 2 for ggG (2 add_s,
    and one more to add it to ggI's); gG a view of the (N,) sum; ggO the (M, N) expand of a tensor written once
    per later term (ggG's, ggB's), or, for ggB alone, ggB itself expanded over the batch."""
    ns, a = node.normalized_shape, node.input
    axes = _ln_axes(a, ns)
    batch = tuple(range(a._data.ndim - len(ns)))
    n = math.prod(ns)
    m = a._data.size // n if n else 0
    x = a._data.astype(np.float64)
    go = node.grad_out._data.astype(np.float64)
    r = node.rstd._data.astype(np.float64)
    xhat = (x - node.mean._data) * r
    w = node.weight._data.astype(np.float64) if node.weight is not None else np.ones(ns)
    has_u, has_p, has_q = (g is not None for g in grads)
    u = grads[0]._data if has_u else np.zeros_like(x)
    p = grads[1]._data if has_p else np.zeros(ns)
    q = grads[2]._data if has_q else np.zeros(ns)
    g = go * w

    def rowsum(v):
        return v.sum(axis=axes, keepdims=True)
    h = (r / n) * (n * u - rowsum(u) - xhat * rowsum(u * xhat))  # d/dg of sum(u * dx)
    dx = (r / n) * (n * g - rowsum(g) - xhat * rowsum(g * xhat))
    g_xhat = (r / n) * (-u * rowsum(g * xhat) - rowsum(u * xhat) * g) + p * go
    g_r = rowsum(u * dx) / r + rowsum(g_xhat * xhat) / r
    gx = r * (g_xhat - g_xhat.mean(axis=axes, keepdims=True)) - g_r * r * r * xhat / n
    shape = a._data.shape
    # a grad is undefined when no defined incoming grad reaches it, as in layer_norm_double_backward
    gi = None
    if has_u or has_p:
        gi = reshape(_written(gx, (m, n), 3 * has_u + (1 if has_u else 2) * has_p, a), *shape)
    gw = reshape(_written(np.asarray((h * go).sum(axis=batch)), (n,), 0, a), *ns) if has_u else None
    if has_u or has_p:
        ggo = _written(h * w + p * xhat + q, (m, n), (has_u and has_p) + ((has_u or has_p) and has_q), a)
    else:  # ggB alone: ggB.reshape({1, N}).expand({M, N}), no copy
        ggo = expand(reshape(grads[2], 1, n), m, n)
    return [reshape(ggo, *shape), gi, gw]
