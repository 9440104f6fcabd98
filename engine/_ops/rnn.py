"""The recurrent cells as PyTorch 2.13 runs them on CPU: at::lstm_cell's decomposition into linear, add,
unsafe_chunk (UnsafeSplitBackward0) and the gates' pointwise ops, node for node and in torch's order."""
from __future__ import annotations

import numpy as np

from .. import _functions as fn
from .._tensor import Tensor, _wrap_dim
from ._common import _out, needs_grad, record_outputs
from .arith import add, mul
from .linalg import linear
from .pointwise import sigmoid, tanh


class UnsafeSplitBackward0(fn.SplitBackward0):
    """unsafe_split's node: split's, with outputs that are not autograd views."""

    __slots__ = ()


def unsafe_chunk(a: Tensor, chunks: int, dim: int) -> tuple[Tensor, ...]:
    """`chunks` equal pieces along `dim` (the last smaller) → UnsafeSplitBackward0; the pieces share `a`'s memory
    but are not views to autograd (in-place ops on them are allowed)."""
    d = _wrap_dim(dim, a._data.ndim)
    size = a._data.shape[d]
    step = (size + chunks - 1) // chunks
    node = UnsafeSplitBackward0() if needs_grad(a) else None
    sizes = [min(step, size - i) for i in range(0, size, step)] if step else [0]
    starts = np.cumsum([0] + sizes[:-1])
    outs = tuple(_out(a._data[(slice(None),) * d + (slice(int(s), int(s) + n),)], a)
                 for s, n in zip(starts, sizes, strict=True))
    if node is not None:
        node.dim, node.sizes, node.self_sym_sizes, node.split_size = dim, sizes, a._data.shape, step
        record_outputs(node, (a,), outs)
    return outs


def _size(t: Tensor, i: int) -> int:
    return t._data.shape[i]


def lstm_cell(x: Tensor, hx: tuple, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
              b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
    """at::lstm_cell on CPU: gates = linear(h, w_hh, b_hh) + linear(x, w_ih, b_ih); i, f, g, o = chunks (sigmoid,
    sigmoid, tanh, sigmoid); c' = f * c + i * g; h' = o * tanh(c')."""
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    if _size(x, 1) != _size(w_ih, 1):
        raise RuntimeError(f"input has inconsistent input_size: got {_size(x, 1)} expected {_size(w_ih, 1)}")
    for label, h in enumerate(hx):
        if _size(x, 0) != _size(h, 0):
            raise RuntimeError(f"Input batch size {_size(x, 0)} doesn't match hidden{label} batch size {_size(h, 0)}")
        if _size(h, 1) != _size(w_hh, 1):
            raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {_size(h, 1)}, expected "
                               f"{_size(w_hh, 1)}")
    h, c = hx
    gates = add(linear(h, w_hh, b_hh), linear(x, w_ih, b_ih))
    i, f, g, o = unsafe_chunk(gates, 4, 1)
    i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
    cy = add(mul(f, c), mul(i, g))
    return mul(o, tanh(cy)), cy
