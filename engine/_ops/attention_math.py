"""scaled_dot_product_attention's math path (at::_scaled_dot_product_attention_math), which torch 2.13 takes on CPU
where its fused kernel does not apply: dropout_p > 0 above all (nn.MultiheadAttention in training), an attn_mask
that requires grad, inputs that are not 4-d with equal batch and head sizes.

It is torch's composite code, op by op, so the engine records the nodes torch records: query and the transposed key
each scaled by sqrt(scale) (MulBackward1), their matmul, the mask added (AddBackward0), _safe_softmax
(SafeSoftmaxBackward0: softmax, zero for a row masked out entirely), at::dropout (MulBackward0) and the matmul with
value.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _random
from .._functions import _Generated
from .._tensor import Tensor
from ._common import _float_data, _out, needs_grad, record


class SafeSoftmaxBackward0(_Generated):
    __slots__ = ("dim", "result")
    _saved_tensor_names = ("result",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            from .formulas import softmax_backward_data
            out[0] = softmax_backward_data(grad, self.result, self.dim)


def safe_softmax(a: Tensor, dim: int) -> Tensor:
    """at::_safe_softmax: softmax along `dim`, with zeros for a row whose every entry is -inf →
    SafeSoftmaxBackward0."""
    node = SafeSoftmaxBackward0() if needs_grad(a) else None
    x = _float_data(a)
    d = dim % max(x.ndim, 1)
    dead = np.isneginf(x).all(axis=d, keepdims=True)
    with np.errstate(invalid="ignore"):
        top = np.where(dead, 0, x.max(axis=d, keepdims=True))
        e = np.exp(x - top)
        values = np.where(dead, 0, e / e.sum(axis=d, keepdims=True))
    out = _out(np.ascontiguousarray(values, dtype=x.dtype), a)
    if node is not None:
        node.dim, node.result = dim, out
        record(node, (a,), out)
    return out


def _boolean_to_float(mask: Tensor, like: Tensor) -> Tensor:
    """convert_boolean_attn_mask: -inf where the bool mask is False, 0 where True (a new tensor, no node)."""
    return _out(np.where(mask._data, 0.0, -np.inf).astype(like._data.dtype), like)


def sdpa_math(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
              scale: float | None) -> Tensor:
    """at::_scaled_dot_product_attention_math's first output, op by op."""
    from .arith import add, mul_scalar
    from .linalg import matmul
    from .nn_extra import dropout
    from .shape import transpose

    negative = scale is not None and scale < 0.0
    softmax_scale = abs(scale) if negative else (scale if scale is not None else 1.0 / math.sqrt(q._data.shape[-1]))
    factor = math.sqrt(softmax_scale)
    query = mul_scalar(q, 0.0 - factor if negative else factor)
    if is_causal:
        rows, cols = q._data.shape[-2], k._data.shape[-2]
        attn_mask = _out(np.where(np.tril(np.ones((rows, cols), dtype=bool)), 0.0, -np.inf).astype(q._data.dtype),
                         q)
    elif attn_mask is not None and attn_mask._data.dtype == np.bool_:
        attn_mask = _boolean_to_float(attn_mask, q)
    attn = matmul(query, mul_scalar(transpose(k, -2, -1), factor))
    if attn_mask is not None:
        attn = add(attn, attn_mask)
    attn = safe_softmax(attn, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True, _random.rng("dropout", None))
    return matmul(attn, v)
