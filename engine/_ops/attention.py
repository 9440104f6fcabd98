"""F.scaled_dot_product_attention as PyTorch 2.13 runs it on CPU: for 4-d query, key and value of one dtype, equal
batch and head sizes and head dims, a mask that requires no grad and no dropout, torch picks its fused kernel
(_scaled_dot_product_flash_attention_for_cpu) in float32 and float64 alike: one
ScaledDotProductFlashAttentionForCpuBackward0 node (slots query, key, value) that saves the inputs, the mask (a bool
mask as 0/-inf), the output and the rows' logsumexp. Under create_graph its grads hang off a NotImplemented node, as
torch's backward op has no derivative.

Elsewhere torch takes its math path (scaled matmuls, _safe_softmax, dropout, bmm: about sixteen nodes), and so does
the engine (attention_math.py); enable_gqa=True is refused.

Also here: baddbmm and Tensor.unflatten, which nn.MultiheadAttention's forward calls.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dispatch import public
from .._dtype import c_type_name
from .._functions import _Generated
from .._layout import empty_preserving
from .._node import Error
from .._tensor import Tensor, _wrap_dim
from ._common import _out, has_edge, needs_grad, quietly, record, save_inputs
from .nn_extra import _record_many


def _scores(q: np.ndarray, k: np.ndarray, mask: np.ndarray | None, is_causal: bool, scale: float) -> np.ndarray:
    """scale * q @ k^T, plus the mask, with the causal (top-left aligned) -inf above the diagonal; float64."""
    s = np.matmul(q.astype(np.float64), np.swapaxes(k.astype(np.float64), -1, -2)) * scale
    if mask is not None:
        s = s + mask.astype(np.float64)
    if is_causal:
        rows, cols = s.shape[-2:]
        s = np.where(np.triu(np.ones((rows, cols), dtype=bool), 1), -np.inf, s)
    return s


def _probs(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """softmax over the last dim and its logsumexp; a row masked out entirely gives zeros and a logsumexp of 0, as
    torch's kernel does."""
    top = s.max(axis=-1, keepdims=True)
    dead = np.isneginf(top)
    top = np.where(dead, 0.0, top)
    e = np.exp(s - top)
    total = e.sum(axis=-1, keepdims=True)
    lse = np.where(dead, 0.0, np.log(np.where(dead, 1.0, total)) + top)
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, total))
    return p, lse[..., 0]


class ScaledDotProductFlashAttentionForCpuBackward0(_Generated):
    __slots__ = ("attn_mask", "query", "key", "value", "output", "logsumexp", "dropout_p", "is_causal", "scale")
    _saved_tensor_names = ("attn_mask", "key", "query", "value", "logsumexp", "output")  # torch packs by name
    _saved_values = ("dropout_p", "is_causal", "scale")

    def formulas(self, grad, out):
        mask = [self.should_compute_output(i) for i in range(3)]
        if not any(mask):
            return
        q, k, v = self.query._data, self.key._data, self.value._data
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        attn = None if self.attn_mask is None else self.attn_mask._data
        p = quietly(lambda: _probs(_scores(q, k, attn, self.is_causal, scale))[0])
        g = grad._data.astype(np.float64)
        o = self.output._data.astype(np.float64)
        dp = np.matmul(g, np.swapaxes(v.astype(np.float64), -1, -2))
        ds = p * (dp - (g * o).sum(axis=-1, keepdims=True))
        results = (lambda: np.matmul(ds, k.astype(np.float64)) * scale,
                   lambda: np.matmul(np.swapaxes(ds, -1, -2), q.astype(np.float64)) * scale,
                   lambda: np.matmul(np.swapaxes(p, -1, -2), g))
        for i, (compute, like) in enumerate(zip(results, (self.query, self.key, self.value), strict=True)):
            if mask[i]:
                out[i] = _out(np.ascontiguousarray(compute(), dtype=like._data.dtype), like)
        inputs = (grad, self.query, self.key, self.value, self.output)
        if needs_grad(*inputs):  # create_graph: torch's backward op has no derivative, its grads a NotImplemented
            node = NotImplemented("derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not "
                                  "implemented")
            _record_many(node, tuple(t for t in inputs if has_edge(t)), out)


class NotImplemented(Error):  # noqa: A001 - torch's name
    """The grad_fn of what a backward op without a derivative returns under create_graph: raises when run."""

    __slots__ = ()
    _name = "torch::autograd::NotImplemented"


def _fused(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float, enable_gqa: bool) -> bool:
    """Whether torch 2.13's CPU backend selection picks the fused kernel for these arguments."""
    qs, ks, vs = q._data.shape, k._data.shape, v._data.shape
    if not (len(qs) == len(ks) == len(vs) == 4) or dropout_p > 0.0 or enable_gqa:
        return False
    if attn_mask is not None and needs_grad(attn_mask):
        return False
    if any(t._data.strides[-1] != t._data.itemsize and t._data.shape[-1] > 1 for t in (q, k, v)):
        return False  # torch's check_last_dim_stride_equals_1
    return qs[:2] == ks[:2] == vs[:2] and qs[-1] == ks[-1] == vs[-1] and ks[2] == vs[2]


def _like_query(q: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The output laid out as torch's kernel lays it out: empty_like(query) (its strides, when dense)."""
    out = empty_preserving(q, q.dtype)
    out[...] = values
    return out


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None, dropout_p: float,
                                 is_causal: bool, scale: float | None, enable_gqa: bool) -> Tensor:
    """softmax(q @ k^T * scale + mask) @ v → ScaledDotProductFlashAttentionForCpuBackward0."""
    if attn_mask is not None:
        kind = attn_mask._data.dtype
        if kind != np.bool_ and kind.kind != "f" and kind != q._data.dtype:
            raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                               f"attn_mask.dtype: {c_type_name(kind)} and  query.dtype: {c_type_name(q)} instead.")
    dtypes = (q._data.dtype, k._data.dtype, v._data.dtype)
    if len(set(dtypes)) != 1:
        names = [c_type_name(d) for d in dtypes]
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{names[0]} key.dtype: {names[1]} and value.dtype: {names[2]} instead.")
    if enable_gqa:
        raise NotImplementedError("agdb's engine does not implement scaled_dot_product_attention with "
                                  "enable_gqa=True; run the program on real torch with `agdb torch SCRIPT`")
    if not _fused(q, k, v, attn_mask, dropout_p, enable_gqa):
        from .attention_math import sdpa_math
        return sdpa_math(q, k, v, attn_mask, dropout_p, is_causal, scale)
    mask = attn_mask
    if mask is not None and mask._data.dtype == np.bool_:
        from .attention_math import _boolean_to_float
        mask = _boolean_to_float(mask, q)
    if mask is not None:
        target = q._data.shape[:-1] + (k._data.shape[-2],)
        try:
            np.broadcast_shapes(mask._data.shape, target)
        except ValueError:
            raise NotImplementedError("agdb's engine does not implement scaled_dot_product_attention with an "
                                      f"attn_mask of shape {list(mask._data.shape)} that does not broadcast to "
                                      f"{list(target)} (torch fails inside its math path)") from None
    node = None
    if needs_grad(q, k, v):
        node = save_inputs(ScaledDotProductFlashAttentionForCpuBackward0(), attn_mask=mask, query=q, key=k,
                           value=v, dropout_p=float(dropout_p), is_causal=bool(is_causal), scale=scale)
    used = scale if scale is not None else 1.0 / math.sqrt(q._data.shape[-1])
    p, lse = quietly(lambda: _probs(_scores(q._data, k._data, None if mask is None else mask._data, is_causal,
                                            used)))
    dtype = q._data.dtype
    result = _out(_like_query(q._data, np.matmul(p, v._data.astype(np.float64))), q)
    if node is not None:
        node.output = result
        node.logsumexp = _out(np.ascontiguousarray(lse, dtype=dtype), q)
        _record_many(node, (q, k, v), [result])
    return result


# -- the ops nn.MultiheadAttention's Python forward calls that the rest of the engine lacks -------------------
class BaddbmmBackward0(_Generated):
    __slots__ = ("batch1", "batch2", "alpha", "beta")
    _saved_tensor_names = ("batch1", "batch2")
    _saved_values = ("alpha", "beta")

    def formulas(self, grad, out):
        from .arith import mul_scalar
        from .linalg import bmm
        from .shape import transpose
        if self.should_compute_output(0):  # maybe_multiply(grad, beta)
            out[0] = grad if self.beta == 1 else mul_scalar(grad, self.beta)
        if self.should_compute_output(1):  # grad.bmm(batch2.transpose(1, 2)) * alpha
            g = bmm(grad, transpose(self.batch2, 1, 2))
            out[1] = g if self.alpha == 1 else mul_scalar(g, self.alpha)
        if self.should_compute_output(2):  # batch1.transpose(1, 2).bmm(grad) * alpha
            g = bmm(transpose(self.batch1, 1, 2), grad)
            out[2] = g if self.alpha == 1 else mul_scalar(g, self.alpha)


@public("baddbmm", torch=True, tensor=True)
def baddbmm(a: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """beta * a + alpha * (batch1 @ batch2), batch by batch → BaddbmmBackward0 (edges self, batch1, batch2)."""
    node = BaddbmmBackward0() if needs_grad(a, batch1, batch2) else None
    if node is not None:
        has_edge(a)
        e1, e2 = has_edge(batch1), has_edge(batch2)
        save_inputs(node, batch1=batch1 if e2 else None, batch2=batch2 if e1 else None, alpha=alpha, beta=beta)
    for name, m in (("batch1", batch1), ("batch2", batch2)):
        if m._data.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    s1, s2 = batch1._data.shape, batch2._data.shape
    if s2[0] != s1[0] or s2[1] != s1[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{s1[0]}, {s1[2]}] but "
                           f"got: [{s2[0]}, {s2[1]}].")
    prod = np.matmul(batch1._data, batch2._data)
    base = np.broadcast_to(a._data, prod.shape)
    data = base + prod if beta == 1 and alpha == 1 else beta * base + alpha * prod
    out = _out(np.ascontiguousarray(data, dtype=prod.dtype), batch1)
    if node is not None:
        record(node, (a, batch1, batch2), out)
    return out


@public("unflatten", torch=True, tensor=True)
def unflatten(a: Tensor, dim: int, sizes: Any) -> Tensor:
    """Split dim `dim` into `sizes` (one may be -1) → a view (ViewBackward0)."""
    from .shape import view
    shape = a._data.shape
    d = _wrap_dim(dim, len(shape))
    return view(a, tuple(shape[:d]) + tuple(int(s) for s in sizes) + tuple(shape[d + 1:]))
