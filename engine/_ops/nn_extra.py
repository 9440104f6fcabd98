"""The ops behind engine.nn: gelu, layer_norm, embedding, dropout, nll_loss, binary_cross_entropy_with_logits,
l1_loss, with the backward nodes PyTorch 2.13 records on CPU (checked by tests/engine/test_nn_parity.py).

Nodes live here too (not in engine/_functions.py): GeluBackward0, NativeLayerNormBackward0, EmbeddingBackward0,
NllLossBackward0, BinaryCrossEntropyWithLogitsBackward0 and the nodes their derivative formulas record under
create_graph (GeluBackwardBackward0, NativeLayerNormBackwardBackward0, EmbeddingDenseBackwardBackward0,
NllLossBackwardBackward0). The second-order nodes compute values in numpy: a third-order graph through them
(create_graph while running them) is refused with NotImplementedError rather than recorded wrongly.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .. import _observer
from .._dispatch import public
from .._dtype import cpp_type_name, from_numpy_dtype, scalar_type_name
from .._functions import _Generated, _written
from .._layout import tensor_iterator_layout
from .._node import UNDEFINED_INPUT, InputMetadata
from .._state import tls
from .._tensor import Tensor, make_tensor
from .._version import node_saved_versions
from ._common import (
    _float_data,
    _out,
    broadcast_shape,
    collect_next_edges,
    common_device,
    keep_outputs_unowned,
    needs_grad,
    record,
    result_dtype,
    save_inputs,
    with_original_self,
)
from ._erf import erf as _erf
from .arith import add, add_scalar, compare, div, div_scalar, mul, mul_scalar, neg, sub
from .dropout import check_dropout_p
from .layer_norm_double import layer_norm_double_backward
from .nn import _REDUCTIONS, log_softmax, masked_fill
from .pointwise import abs as abs_
from .pointwise import sigmoid
from .reduce import mean, sum
from .shape import expand, view

_SQRT_2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_K = 0.044715


def reduction_enum(reduction: str) -> int:
    """torch.nn._reduction.get_enum: 'none' 0, 'mean' 1, 'sum' 2; anything else is a ValueError."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


def _no_third_order(name: str, *tensors: Tensor | None) -> None:
    if needs_grad(*tensors):
        raise NotImplementedError(f"agdb's engine does not record the derivative of {name} (a third-order graph); "
                                  "take this grad without create_graph=True")


def _record_many(node: Any, inputs: tuple, outs: list) -> None:
    """record() for a node with several outputs (None for an undefined one)."""
    node.set_next_edges(collect_next_edges(inputs))
    node._input_metadata = [UNDEFINED_INPUT if o is None else InputMetadata(
        o._data.shape, from_numpy_dtype(o._data.dtype), o._device) for o in outs]
    for i, o in enumerate(outs):
        if o is not None:
            o.grad_fn, o._output_nr, o._requires_grad = node, i, True
    if node._saved_tensor_names:
        node._saved_versions = keep_outputs_unowned(node, node_saved_versions(node))
    if _observer.observers:
        _observer.notify("node_created", node)


# -- gelu -----------------------------------------------------------------------------------------------
def _gelu_parts(x: np.ndarray, approximate: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """gelu(x), gelu'(x), gelu''(x) in float64."""
    x = x.astype(np.float64)
    if approximate == "tanh":
        u = _SQRT_2_OVER_PI * (x + _K * x ** 3)
        du = _SQRT_2_OVER_PI * (1 + 3 * _K * x * x)
        ddu = _SQRT_2_OVER_PI * 6 * _K * x
        t = np.tanh(u)
        s = 1 - t * t
        y = 0.5 * x * (1 + t)
        d1 = 0.5 * (1 + t) + 0.5 * x * s * du
        d2 = s * du + 0.5 * x * (-2 * t * s * du * du + s * ddu)
        return y, d1, d2
    cdf = 0.5 * (1 + _erf(x / _SQRT_2))
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
    return x * cdf, cdf + x * pdf, pdf * (2 - x * x)


def _check_approximate(approximate: str) -> None:
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")


class GeluBackward0(_Generated):
    __slots__ = ("self", "approximate")
    _saved_tensor_names = ("self",)
    _saved_values = ("approximate",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = gelu_backward(grad, self.self, self.approximate)


class GeluBackwardBackward0(_Generated):
    __slots__ = ("grad_output", "self", "approximate")
    _saved_tensor_names = ("grad_output", "self")
    _saved_values = ("approximate",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = gelu_backward(grad, self.self, self.approximate)
        if self.should_compute_output(1):
            _no_third_order("gelu_backward", grad, self.grad_output, self.self)
            d2 = _gelu_parts(self.self._data, self.approximate)[2]
            data = (grad._data * self.grad_output._data * d2).astype(self.self._data.dtype)
            out[1] = _out(data, self.self)


def gelu(a: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) or tanh-approximated → GeluBackward0."""
    # Takes its seq_nr, and saves self, before the kernel's checks.
    node = save_inputs(GeluBackward0(), self=a, approximate=approximate) if needs_grad(a) else None
    _check_approximate(approximate)
    if a._data.dtype.kind != "f":
        raise NotImplementedError(f"\"GeluKernelImpl\" not implemented for '{scalar_type_name(a)}'")
    out = _out(_gelu_parts(a._data, approximate)[0].astype(a._data.dtype), a)
    if node is not None:
        record(node, (a,), out)
    return out


def gelu_backward(grad: Tensor, self: Tensor, approximate: str) -> Tensor:
    """grad * gelu'(self) → GeluBackwardBackward0 (slots grad_output, self)."""
    node = save_inputs(GeluBackwardBackward0(), grad_output=grad, self=self, approximate=approximate) \
        if needs_grad(grad, self) else None
    d1 = _gelu_parts(self._data, approximate)[1]
    out = _out(tensor_iterator_layout((grad._data * d1).astype(self._data.dtype), (grad._data, self._data)), self)
    if node is not None:
        record(node, (grad, self), out)
    return out


# -- layer_norm -----------------------------------------------------------------------------------------
def _shape_list(shape: tuple) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


class NativeLayerNormBackward0(_Generated):
    __slots__ = ("input", "normalized_shape", "weight", "bias", "result1", "result2")
    _saved_tensor_names = ("bias", "input", "weight", "result1", "result2")  # inputs by name, then outputs
    _saved_values = ("normalized_shape",)
    _saved_int64 = ("normalized_shape",)

    def formulas(self, grad, out):
        mask = [self.should_compute_output(i) for i in range(3)]
        if any(mask):
            res = native_layer_norm_backward(grad, self.input, self.normalized_shape, self.result1, self.result2,
                                             self.weight, self.bias, mask)
            for i in range(3):
                if mask[i]:
                    out[i] = res[i]


class NativeLayerNormBackwardBackward0(_Generated):
    __slots__ = ("grad_out", "input", "mean", "rstd", "weight", "normalized_shape")
    _saved_tensor_names = ("grad_out", "input", "mean", "rstd", "weight")
    _saved_values = ("normalized_shape",)
    _saved_int64 = ("normalized_shape",)

    def apply(self, grads: list) -> list:
        self.check_saved()
        out: list = [None] * 6
        if all(g is None for g in grads):
            return out
        mask = [self.should_compute_output(i) for i in (0, 1, 4)]
        if not any(mask):
            return out
        _no_third_order("native_layer_norm_backward", *grads, self.grad_out, self.input, self.weight)
        res = layer_norm_double_backward(self, grads)
        for slot, m, r in zip((0, 1, 4), mask, res, strict=True):
            if m:
                out[slot] = r
        return out


def _ln_axes(a: Tensor, normalized_shape: tuple) -> tuple[int, ...]:
    nd = a._data.ndim
    return tuple(range(nd - len(normalized_shape), nd))


def layer_norm(a: Tensor, normalized_shape: Any, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the last dims → NativeLayerNormBackward0 with slots (input, weight, bias)."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    # Made, and saving its inputs, before the kernel's checks.
    node = save_inputs(NativeLayerNormBackward0(), input=a, normalized_shape=ns, weight=weight, bias=bias) \
        if needs_grad(a, weight, bias) else None
    shape = a._data.shape
    if len(ns) == 0 or len(shape) < len(ns) or tuple(shape[len(shape) - len(ns):]) != ns:
        raise RuntimeError(f"Given normalized_shape={_shape_list(ns)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in ns)}], but got input of size{_shape_list(shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t._data.shape) != ns:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{_shape_list(t._data.shape)} and normalized_shape = {_shape_list(ns)}")
    if a._data.dtype.kind != "f":
        raise NotImplementedError(f"\"LayerNormKernelImpl\" not implemented for '{scalar_type_name(a)}'")
    common_device(a, weight, bias)
    x = a._data
    axes = _ln_axes(a, ns)
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mu) * rstd
    if weight is not None:
        y = y * weight._data
    if bias is not None:
        y = y + bias._data
    out = _out(np.asarray(y, dtype=x.dtype, order="C"), a)  # torch normalises a contiguous copy of the input
    if node is not None:
        node.result1 = _out(mu.astype(x.dtype), a)
        node.result2 = _out(rstd.astype(x.dtype), a)
        record(node, (a, weight, bias), out)
    return out


def native_layer_norm_backward(grad: Tensor, a: Tensor, ns: tuple, mu: Tensor, rstd: Tensor,
                               weight: Tensor | None, bias: Tensor | None, mask: list) -> list:
    """(grad_input, grad_weight, grad_bias), each None unless asked for → NativeLayerNormBackwardBackward0."""
    node = save_inputs(NativeLayerNormBackwardBackward0(), grad_out=grad, input=a, mean=mu, rstd=rstd, weight=weight,
                       normalized_shape=ns) if needs_grad(grad, a, weight) else None
    axes = _ln_axes(a, ns)
    batch = tuple(range(a._data.ndim - len(ns)))
    x, g, r = a._data, grad._data, rstd._data
    xhat = (x - mu._data) * r
    res: list = [None, None, None]
    if mask[0]:
        gx = g * weight._data if weight is not None else g
        n = math.prod(ns)
        dx = (r / n) * (n * gx - gx.sum(axis=axes, keepdims=True) - xhat * (gx * xhat).sum(axis=axes, keepdims=True))
        res[0] = _out(dx.astype(x.dtype), a)
    if mask[1] and weight is not None:
        res[1] = _out(np.asarray((g * xhat).sum(axis=batch)).astype(x.dtype), a)
    if mask[2] and bias is not None:
        res[2] = _out(np.asarray(g.sum(axis=batch)).astype(x.dtype), a)
    if node is not None:
        _record_many(node, (grad, a, None, None, weight, bias), res)
    return res


# -- embedding ------------------------------------------------------------------------------------------
class EmbeddingBackward0(_Generated):
    __slots__ = ("indices", "weight_sym_argsize_0", "padding_idx", "scale_grad_by_freq", "sparse")
    _saved_tensor_names = ("indices",)
    _saved_values = ("padding_idx", "scale_grad_by_freq", "sparse", "weight_sym_argsize_0")
    _saved_int64 = ("padding_idx",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = embedding_dense_backward(grad, self.indices, self.weight_sym_argsize_0, self.padding_idx)


class EmbeddingDenseBackwardBackward0(_Generated):
    __slots__ = ("indices", "padding_idx")
    _saved_tensor_names = ("indices",)
    _saved_values = ("padding_idx",)
    _saved_int64 = ("padding_idx",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            _no_third_order("embedding_dense_backward", grad)
            rows = grad._data[self.indices._data]
            if self.padding_idx >= 0:
                rows = np.where((self.indices._data == self.padding_idx)[..., None], 0, rows)
            out[0] = _out(rows.astype(grad._data.dtype), grad)


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1) -> Tensor:
    """weight[indices] → EmbeddingBackward0 (one slot: weight)."""
    if weight._data.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    # Made, and saving indices, before the kernel's checks.
    node = save_inputs(EmbeddingBackward0(), indices=indices, weight_sym_argsize_0=weight._data.shape[0],
                       padding_idx=padding_idx, scale_grad_by_freq=False, sparse=False) if needs_grad(weight) else None
    if indices._data.dtype != np.int64:
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {cpp_type_name(indices.dtype, indices._device)} instead (while "
                           "checking arguments for embedding)")
    num = weight._data.shape[0]
    idx = indices._data
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    out = _out(weight._data[idx], weight)
    if node is not None:
        record(node, (weight,), out)
    return out


def embedding_dense_backward(grad: Tensor, indices: Tensor, num_weights: int, padding_idx: int) -> Tensor:
    """Sum grad rows into a (num_weights, dim) zero matrix → EmbeddingDenseBackwardBackward0."""
    node = save_inputs(EmbeddingDenseBackwardBackward0(), indices=indices, padding_idx=padding_idx) \
        if needs_grad(grad) else None
    dim = grad._data.shape[-1]
    idx = indices._data.reshape(-1)
    rows = grad._data.reshape(-1, dim)
    res = np.zeros((num_weights, dim), dtype=grad._data.dtype)
    keep = idx != padding_idx
    np.add.at(res, idx[keep], rows[keep])
    out = _out(res, grad)
    if node is not None:
        record(node, (grad,), out)
    return out


# -- dropout --------------------------------------------------------------------------------------------
def dropout(a: Tensor, p: float, train: bool, rng: Any) -> Tensor:
    """at::dropout on CPU: the input itself (p == 0, eval, empty), else input * noise → MulBackward0."""
    check_dropout_p(p)
    if not isinstance(a, Tensor):  # the parser's check, after the Python-level one on p
        raise TypeError(f"dropout(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}")
    if p == 0 or not train or a._data.size == 0:
        return a
    if a._device != "cpu":
        raise NotImplementedError("agdb's engine implements dropout on CPU only (on CUDA PyTorch records "
                                  "NativeDropoutBackward0); move the tensor to 'cpu'")
    if p == 1:
        return mul(a, make_tensor(np.zeros((), dtype=a._data.dtype), device=a._device))
    keep = rng.random(a._data.shape) >= p
    noise = make_tensor((keep / (1.0 - p)).astype(a._data.dtype), device=a._device)
    return mul(a, noise)


# -- losses ---------------------------------------------------------------------------------------------
class NllLossBackward0(_Generated):
    __slots__ = ("self", "target", "weight", "reduction", "ignore_index", "total_weight")
    _saved_tensor_names = ("self", "target", "weight", "total_weight")
    _saved_values = ("ignore_index", "reduction")
    _saved_int64 = ("ignore_index", "reduction")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = nll_loss_backward(grad, self.self, self.target, self.reduction, self.ignore_index,
                                       self.total_weight, self.weight)


class NllLossBackwardBackward0(_Generated):
    __slots__ = ("target", "weight", "reduction", "ignore_index", "self")
    _saved_tensor_names = ("target", "weight")
    _saved_values = ("ignore_index", "reduction")
    _saved_int64 = ("ignore_index", "reduction")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            _no_third_order("nll_loss_backward", grad)
            out[0] = nll_loss(grad, self.target, self.reduction, self.ignore_index, self.weight)
        if self.should_compute_output(1):
            out[1] = _out(np.zeros_like(grad._data), grad)


class NllLoss2DBackward0(NllLossBackward0):
    """nll_loss2d's node: made only to take its seq_nr and pack its inputs before the kernel refuses them."""

    __slots__ = ()


def _nll_check(a: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int) -> None:
    """nll_loss_nd's checks, made before the node is created (so before it takes a seq_nr). Inputs of more than 2
    dims get torch's checks, then the engine's refusal (it has no nll_loss2d kernel)."""
    nd, shape = a._data.ndim, a._data.shape
    if nd == 0:
        raise ValueError(f"Expected 1 or more dimensions (got {nd})")
    batch = target._data.shape[0] if target._data.ndim else 0  # torch reads sizes()[0] of a 0-dim target as 0
    if nd != 1 and batch != shape[0]:
        raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size ({batch}).")
    if nd <= 2:
        return
    if nd == 4:  # straight to nll_loss2d: its node first, then check_inputs_nll_loss2d
        if needs_grad(a):
            save_inputs(NllLoss2DBackward0(), self=a, target=target, weight=weight, reduction=reduction,
                        ignore_index=ignore_index)
        if target._data.ndim != 3:
            raise RuntimeError(f"only batches of spatial targets supported (3D tensors) but got targets of "
                               f"dimension: {target._data.ndim}")
    elif target._data.shape[1:] != shape[2:]:
        raise RuntimeError(f"Expected target size {_shape_list((shape[0],) + shape[2:])}, got "
                           f"{_shape_list(target._data.shape)}")
    raise NotImplementedError("agdb's engine implements nll_loss and cross_entropy for (C,) and (N, C) inputs "
                              "only: run the program on real torch with `agdb torch SCRIPT`")


def _not_differentiable(op: str, name: str, t: Tensor | None) -> None:
    """The autograd kernel's refusal of an input that has no derivative formula (a loss's class weights)."""
    if t is not None and needs_grad(t):
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument '{name}'. This "
                           f"input cannot have requires_grad True.")


def _nll_kernel_check(a: Tensor, target: Tensor, weight: Tensor | None) -> None:
    """The kernel's checks, made after the node took its seq_nr, as in PyTorch."""
    if target._data.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target._data.dtype != np.int64:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {scalar_type_name(target)}")
    if weight is None:
        return
    classes = a._data.shape[-1]
    if weight._data.ndim != 1 or weight._data.size != classes:
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes or no classes but "
                           f"got weight tensor of shape: {_shape_list(weight._data.shape)}")
    if weight._data.dtype != a._data.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(a)} but found {scalar_type_name(weight)}")


def _nll_rows(a: Tensor, target: Tensor, ignore_index: int,
              weight: Tensor | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(2-D input view, 1-D targets, mask of counted rows, each row's class weight, 0 where ignored); raises
    for targets out of range."""
    x = a._data.reshape(1, -1) if a._data.ndim == 1 else a._data
    t = target._data.reshape(-1)
    keep = t != ignore_index
    classes = x.shape[1]
    for v in t[keep]:
        if v < 0 or v >= classes:
            raise IndexError(f"Target {v} is out of bounds.")
    safe = np.where(keep, t, 0)
    w = np.ones(len(t), dtype=x.dtype) if weight is None else weight._data[safe].astype(x.dtype)
    return x, t, keep, np.where(keep, w, 0).astype(x.dtype)


def nll_loss(a: Tensor, target: Tensor, reduction: int = 1, ignore_index: int = -100,
             weight: Tensor | None = None) -> Tensor:
    """-weight[target[i]] * input[i, target[i]], reduced (the mean divides by the weights' sum) →
    NllLossBackward0 (one slot: self; the weights have no grad)."""
    _nll_check(a, target, weight, reduction, ignore_index)
    _not_differentiable("nll_loss_forward", "weight", weight)
    node = save_inputs(NllLossBackward0(), self=a, target=target, weight=weight, reduction=reduction,
                       ignore_index=ignore_index) if needs_grad(a) else None
    _nll_kernel_check(a, target, weight)
    x, t, keep, w = _nll_rows(a, target, ignore_index, weight)
    picked = np.where(keep, -x[np.arange(len(t)), np.where(keep, t, 0)] * w, 0).astype(x.dtype)
    total = np.asarray(w.sum(), dtype=x.dtype)
    if reduction == 0 and a._data.ndim == 2:
        data = picked
        total = np.zeros((), dtype=x.dtype)  # the unreduced kernel leaves total_weight at 0
    elif reduction == 2 or reduction == 0:
        data = picked.sum()
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            data = picked.sum() / total
    out = _out(np.asarray(data, dtype=x.dtype), a)
    if node is not None:
        node.total_weight = _out(total, a)
        record(node, (a,), out)
    return out


def nll_loss_backward(grad: Tensor, a: Tensor, target: Tensor, reduction: int, ignore_index: int,
                      total_weight: Tensor, weight: Tensor | None = None) -> Tensor:
    """Scatter -grad * weight at the targets → NllLossBackwardBackward0 (slots grad_output, self)."""
    node = save_inputs(NllLossBackwardBackward0(), target=target, weight=weight, reduction=reduction,
                       ignore_index=ignore_index) if needs_grad(grad, a) else None
    x, t, keep, w = _nll_rows(a, target, ignore_index, weight)
    g = grad._data
    rows = np.arange(len(t))
    res = np.zeros_like(x)
    if g.ndim == 1:
        scale = g
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.full(len(t), g / total_weight._data if reduction == 1 else g)
    res[rows[keep], t[keep]] = -(scale * w)[keep]
    out = _out(res.reshape(a._data.shape), a)
    if node is not None:
        record(node, (grad, a), out)
    return out


def cross_entropy(a: Tensor, target: Tensor, reduction: int = 1, ignore_index: int = -100,
                  weight: Tensor | None = None, label_smoothing: float = 0.0) -> Tensor:
    """nll_loss(log_softmax(input, class dim)) → NllLossBackward0 over LogSoftmaxBackward0; label smoothing
    adds torch's composite: (1 - ls) * nll + ls / C * (the weighted sum of -log_softmax over the classes)."""
    if target._data.shape == a._data.shape:  # torch's cross_entropy_loss takes equal shapes for class probabilities
        if target._data.dtype.kind != "f":
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{scalar_type_name(target)}")
        raise NotImplementedError("agdb's engine implements cross_entropy with class-index targets only "
                                  "(not class probabilities)")
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing:g}")
    nd = a._data.ndim
    if nd == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    class_dim = 0 if nd == 1 else 1
    logp = log_softmax(a, class_dim, None)
    nll = nll_loss(logp, target, reduction, ignore_index, weight)
    if label_smoothing <= 0.0:
        return nll
    smooth = _smooth_loss(logp, target, reduction, ignore_index, weight, class_dim)
    right = mul_scalar(smooth, label_smoothing / logp._data.shape[class_dim])  # C++ evaluates `a + b` right first
    return add(mul_scalar(nll, 1 - label_smoothing), right)


def _smooth_loss(logp: Tensor, target: Tensor, reduction: int, ignore_index: int, weight: Tensor | None,
                 class_dim: int) -> Tensor:
    """The label-smoothing term: -(log_softmax * weight) summed over the classes, 0 where ignored, reduced
    (the mean divides by the kept targets' weights, or their count)."""
    ignore = compare(np.equal, target, ignore_index)
    if weight is not None:
        shape = [1] * logp._data.ndim
        shape[class_dim] = weight._data.shape[0]
        smooth = neg(sum(mul(logp, view(weight, tuple(shape))), class_dim))
    else:
        smooth = neg(sum(logp, class_dim))
    smooth = masked_fill(smooth, ignore, 0.0)
    if reduction == 0:
        return smooth
    total = sum(smooth)
    if reduction == 2:
        return total
    kept = target._data.reshape(-1)[~ignore._data.reshape(-1)]
    if weight is not None:
        divisor = make_tensor(np.asarray(weight._data[kept].sum(), dtype=weight._data.dtype), device=logp._device)
    else:
        divisor = make_tensor(np.asarray(kept.size, dtype=np.int64), device=logp._device)
    return div(total, divisor)


class BinaryCrossEntropyWithLogitsBackward0(_Generated):
    __slots__ = ("self", "target", "weight", "pos_weight", "reduction")
    _saved_tensor_names = ("pos_weight", "self", "target", "weight")  # by name, as torch's generated code
    _saved_values = ("reduction",)
    _saved_int64 = ("reduction",)

    def formulas(self, grad, out):
        x, t, pw = self.self, self.target, self.pos_weight
        if self.should_compute_output(0):  # binary_cross_entropy_with_logits_backward
            if pw is not None:  # (pos_weight * target + 1 - target) * sigmoid(self) - pos_weight * target
                pt = mul(pw, t)
                g = sub(mul(sub(add_scalar(pt, 1), t), sigmoid(x)), pt)
            else:  # self.sigmoid() - target
                g = sub(sigmoid(x), t)
            # torch writes its grad in place: without grad mode sub_ (or sub_, mul_, sub_) and mul_(grad); then
            # mul_(weight) and div_(numel) in any mode. The engine's ops make new tensors: count them at the end.
            writes = 0 if tls.grad_enabled else 2 if pw is None else 4
            writes += (self.weight is not None) + (self.reduction == 1)
            out[0] = _written(self._weighted(mul(g, grad), x), writes)
        if self.should_compute_output(1):  # ..._target_backward
            if pw is not None:  # (log_sigmoid(-self) - log_sigmoid(self) * pos_weight) * grad, in place in torch:
                diff = sub(log_sigmoid(neg(x)), mul(log_sigmoid(x), pw))
                g = with_original_self(diff, mul, grad)  # mul_ saves a clone of its self for grad's own grad
            else:  # -self * grad
                g = mul(neg(x), grad)
            out[1] = self._weighted(g, t)

    def _weighted(self, g: Tensor, like: Tensor) -> Tensor:
        if self.weight is not None:
            g = mul(g, self.weight)
        return div_scalar(g, like._data.size) if self.reduction == 1 else g


def binary_cross_entropy_with_logits(a: Tensor, target: Tensor, reduction: int = 1, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None) -> Tensor:
    """(1 - t) * x - (1 + (pos_weight - 1) * t) * log(sigmoid(x)), times weight, reduced →
    BinaryCrossEntropyWithLogitsBackward0 (slots self, target; the weights have no grad)."""
    if a._data.shape != target._data.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({a.shape})")
    _not_differentiable("binary_cross_entropy_with_logits", "weight", weight)
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    # Made, and saving its inputs, before the kernel's checks.
    node = save_inputs(BinaryCrossEntropyWithLogitsBackward0(), self=a, target=target, weight=weight,
                       pos_weight=pos_weight, reduction=reduction) if needs_grad(a, target) else None
    dt = result_dtype(a, target)
    if target._data.dtype.kind != "f":
        raise RuntimeError(f"result type {scalar_type_name(dt)} can't be cast to the desired output type "
                           f"{scalar_type_name(target)}")
    common_device(a, target)
    x = _float_data(a).astype(np.float64)
    t = target._data.astype(np.float64)
    log_sig = -np.logaddexp(0.0, -x)
    if pos_weight is not None:  # (pos_weight - 1) * target + 1, multiplied into log_sigmoid(input) in place
        broadcast_shape(pos_weight, target)
        log_sig = log_sig * _in_place_operand(log_sig, (pos_weight._data - 1) * t + 1)
    loss = (1 - t) * x - log_sig
    if weight is not None:
        loss = loss * _in_place_operand(loss, weight._data, weight)
    data = loss if reduction == 0 else (loss.mean() if reduction == 1 else loss.sum())
    out = _out(np.asarray(data).astype(dt), a)
    if node is not None:
        record(node, (a, target), out)
    return out


def _in_place_operand(into: np.ndarray, value: np.ndarray, tensor: Tensor | None = None) -> np.ndarray:
    """`value` as the operand of an in-place op on `into`: it must broadcast to `into`'s shape exactly."""
    if tensor is not None:
        broadcast_shape(make_tensor(into), tensor)  # TensorIterator's message, the loss as tensor a
    shape = np.broadcast_shapes(into.shape, value.shape)
    if shape != into.shape:
        raise RuntimeError(f"output with shape {_shape_list(into.shape)} doesn't match the broadcast shape "
                           f"{_shape_list(shape)}")
    return value


# -- log_sigmoid (for the target's grad with pos_weight) ---------------------------------------------------
class LogSigmoidBackward0(_Generated):
    __slots__ = ("self", "buffer")
    _saved_tensor_names = ("self", "buffer")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = log_sigmoid_backward(grad, self.self, self.buffer)


class LogSigmoidBackwardBackward0(_Generated):
    """Second order of log_sigmoid, in numpy: a third-order graph through it is refused."""
    __slots__ = ("buffer", "grad_output", "self")
    _saved_tensor_names = ("buffer", "grad_output", "self")

    def formulas(self, grad, out):
        _no_third_order("log_sigmoid_backward", grad, self.self, self.grad_output)
        x = self.self._data
        sig = 1.0 / (1.0 + np.exp(-x))
        if self.should_compute_output(0):  # d/d grad_output of grad_output * sigmoid(-x)
            out[0] = _out((grad._data * (1 - sig)).astype(x.dtype), grad)
        if self.should_compute_output(1):  # d/dx: -grad_output * sigmoid(x) * sigmoid(-x)
            out[1] = _out((-grad._data * self.grad_output._data * sig * (1 - sig)).astype(x.dtype), grad)


@public("logsigmoid", functional=True)
def log_sigmoid(a: Tensor) -> Tensor:
    """log(sigmoid(a)), computed stably → LogSigmoidBackward0."""
    node = save_inputs(LogSigmoidBackward0(), self=a) if needs_grad(a) else None
    x = _float_data(a)
    out = _out(np.asarray(-np.logaddexp(0.0, -x), dtype=x.dtype, order="C"), a)  # contiguous, as torch's
    if node is not None:
        node.buffer = _out(np.exp(-np.abs(x)).astype(x.dtype), a)
        record(node, (a,), out)
    return out


def log_sigmoid_backward(grad: Tensor, a: Tensor, buffer: Tensor) -> Tensor:
    """grad * sigmoid(-a) → LogSigmoidBackwardBackward0 (slots grad_output, self)."""
    node = save_inputs(LogSigmoidBackwardBackward0(), buffer=buffer, grad_output=grad, self=a) \
        if needs_grad(grad, a) else None
    x = a._data
    res = (grad._data / (1.0 + np.exp(x))).astype(np.result_type(grad._data, x))
    out = _out(tensor_iterator_layout(res, (grad._data, x)), grad)  # laid out by grad first, as measured
    if node is not None:
        record(node, (grad, a), out)
    return out


def _size_warning(a: Tensor, target: Tensor) -> None:
    if a._data.shape != target._data.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({a.shape}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=4)


def l1_loss(a: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """|input - target|, reduced: SubBackward0, AbsBackward0, then MeanBackward0 / SumBackward0 (composite)."""
    _size_warning(a, target)
    shape = broadcast_shape(a, target)  # torch.broadcast_tensors: expands only what needs it
    if a._data.shape != shape:
        a = expand(a, shape)
    if target._data.shape != shape:
        target = expand(target, shape)
    reduction = reduction_enum(reduction)
    loss = abs_(sub(a, target))
    if reduction == 0:
        return loss
    return mean(loss) if reduction == 1 else sum(loss)
