"""smooth_l1_loss, huber_loss and binary_cross_entropy, with the nodes torch 2.13 records on CPU:
SmoothL1LossBackward0, HuberLossBackward0 and BinaryCrossEntropyBackward0, and under create_graph the nodes of
their backward ops (SmoothL1LossBackwardBackward0, HuberLossBackwardBackward0,
BinaryCrossEntropyBackwardBackward0; for the target of binary_cross_entropy, torch's composite formula:
LogitBackward0, NegBackward0, MulBackward0, DivBackward1).

The second-order nodes compute in numpy: a third-order graph through them is refused (NotImplementedError).
"""
from __future__ import annotations

import numpy as np

from .._dtype import scalar_type_name
from .._functions import _Generated, _written
from .._tensor import Tensor
from ._common import _float_data, _out, broadcast_shape, needs_grad, quietly, record, result_dtype, save_inputs
from .nn_extra import _no_third_order, _not_differentiable
from .shape import expand

_EPSILON = 1e-12  # binary_cross_entropy_backward's floor under (1 - x) * x


def _norm(reduction: int, like: np.ndarray) -> float:
    return 1.0 / like.size if reduction == 1 and like.size else 1.0


def _reduce(loss: np.ndarray, reduction: int) -> np.ndarray:
    if reduction == 0:
        return loss
    return np.asarray(loss.mean() if reduction == 1 else loss.sum(), dtype=loss.dtype)


def broadcast_pair(a: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """torch.broadcast_tensors(input, target), expanding only what needs it."""
    shape = broadcast_shape(a, target)
    return (a if a._data.shape == shape else expand(a, shape),
            target if target._data.shape == shape else expand(target, shape))


# -- smooth_l1_loss and huber_loss --------------------------------------------------------------------------
def _piecewise(d: np.ndarray, width: float, huber: bool) -> np.ndarray:
    """d/dx of the loss per element, before grad and reduction: smooth L1 d/beta inside, sign outside; Huber d
    inside, ±delta outside."""
    if huber:
        return np.where(d < -width, -width, np.where(d > width, width, d))
    return np.where(d < -width, -1.0, np.where(d > width, 1.0, d / width if width else 0.0))


class _LossBackward(_Generated):
    """SmoothL1LossBackward0 / HuberLossBackward0: slots (self, target)."""
    __slots__ = ("self", "target", "reduction")
    _saved_tensor_names = ("self", "target")
    _huber = False

    def formulas(self, grad, out):
        width = self._width()
        if self.should_compute_output(0):
            out[0] = loss_backward(grad, self.self, self.target, self.reduction, width, self._huber)
        if self.should_compute_output(1):
            out[1] = loss_backward(grad, self.target, self.self, self.reduction, width, self._huber)


class SmoothL1LossBackward0(_LossBackward):
    __slots__ = ("beta",)
    _saved_values = ("beta", "reduction")
    _saved_int64 = ("reduction",)

    def _width(self) -> float:
        return self.beta


class HuberLossBackward0(_LossBackward):
    __slots__ = ("delta",)
    _saved_values = ("delta", "reduction")
    _saved_int64 = ("reduction",)
    _huber = True

    def _width(self) -> float:
        return self.delta


class _LossBackwardBackward(_Generated):
    """The second order of smooth_l1/huber, in numpy: slots (grad_output, self, target)."""
    __slots__ = ("grad_output", "self", "target", "reduction")
    _saved_tensor_names = ("grad_output", "self", "target")
    _huber = False

    def formulas(self, grad, out):
        name = "huber_loss_backward" if self._huber else "smooth_l1_loss_backward"
        _no_third_order(name, grad, self.grad_output, self.self, self.target)
        width = self._width()
        x, t = self.self._data, self.target._data
        d = x - t
        norm = _norm(self.reduction, d)
        g, go = grad._data, self.grad_output._data
        if self.should_compute_output(0):
            out[0] = _out(_sum_like(_piecewise(d, width, self._huber) * g * norm, go.shape).astype(go.dtype), grad)
        # torch's huber_loss_double_backward / smooth_l1_loss_double_backward: grad * (d < width) (/ beta), then
        # `grad_input /= numel` in place under mean (one version; smooth_l1's beta=0 returns zeros before it);
        # target's is the negation of another such call, a fresh tensor
        slope = (1.0 if self._huber else 1.0 / width if width else 0.0) * (np.abs(d) < width)
        second = (slope * g * go * norm).astype(x.dtype)
        writes = 1 if self.reduction == 1 and (self._huber or width) else 0
        if self.should_compute_output(1):
            out[1] = _written(_out(second, grad), writes)
        if self.should_compute_output(2):
            out[2] = _out(-second, grad)


def _sum_like(g: np.ndarray, shape: tuple) -> np.ndarray:
    """`g` summed down to a grad_output of `shape` (a reduced loss's grad_output is 0-dim)."""
    return np.asarray(g.sum()) if shape == () and g.shape != () else g


class SmoothL1LossBackwardBackward0(_LossBackwardBackward):
    __slots__ = ("beta",)
    _saved_values = ("beta", "reduction")
    _saved_int64 = ("reduction",)

    def _width(self) -> float:
        return self.beta


class HuberLossBackwardBackward0(_LossBackwardBackward):
    __slots__ = ("delta",)
    _saved_values = ("delta", "reduction")
    _saved_int64 = ("reduction",)
    _huber = True

    def _width(self) -> float:
        return self.delta


def loss_backward(grad: Tensor, a: Tensor, target: Tensor, reduction: int, width: float, huber: bool) -> Tensor:
    """smooth_l1_loss_backward / huber_loss_backward → their BackwardBackward0 node (grad_output, self, target)."""
    node_cls = HuberLossBackwardBackward0 if huber else SmoothL1LossBackwardBackward0
    node = None
    if needs_grad(grad, a, target):
        node = save_inputs(node_cls(), grad_output=grad, self=a, target=target, reduction=reduction)
        setattr(node, "delta" if huber else "beta", width)
    d = a._data - target._data
    res = (_piecewise(d, width, huber) * grad._data * _norm(reduction, d)).astype(a._data.dtype)
    out = _out(np.broadcast_to(res, d.shape).copy(), a)
    if node is not None:
        record(node, (grad, a, target), out)
    return out


def smooth_l1_loss(a: Tensor, target: Tensor, reduction: int, beta: float, huber: bool = False) -> Tensor:
    """The elementwise smooth L1 (or Huber) loss of two tensors of one shape, reduced → its node."""
    node_cls = HuberLossBackward0 if huber else SmoothL1LossBackward0
    node = None
    if needs_grad(a, target):
        node = save_inputs(node_cls(), self=a, target=target, reduction=reduction)
        setattr(node, "delta" if huber else "beta", beta)
    if huber and beta <= 0:  # the kernel's checks, after the node took its seq_nr
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if not huber and beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    dt = result_dtype(a, target)
    d = np.abs(a._data.astype(dt) - target._data.astype(dt))
    if huber:
        loss = np.where(d < beta, 0.5 * d * d, beta * (d - 0.5 * beta))
    else:
        loss = np.where(d < beta, 0.5 * d * d / beta if beta else d, d - 0.5 * beta)
    out = _out(_reduce(loss.astype(dt), reduction), a)
    if node is not None:
        record(node, (a, target), out)
    return out


# -- binary_cross_entropy -----------------------------------------------------------------------------------
class BinaryCrossEntropyBackward0(_Generated):
    __slots__ = ("self", "target", "weight", "reduction")
    _saved_tensor_names = ("self", "target", "weight")
    _saved_values = ("reduction",)
    _saved_int64 = ("reduction",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = bce_backward(grad, self.self, self.target, self.weight, self.reduction)
        if self.should_compute_output(1):
            out[1] = _bce_target_backward(grad, self.self, self.target, self.weight, self.reduction)


class BinaryCrossEntropyBackwardBackward0(_Generated):
    """The second order of binary_cross_entropy, in numpy: slots (grad_output, self, target)."""
    __slots__ = ("grad_output", "self", "target", "weight", "reduction")
    _saved_tensor_names = ("grad_output", "self", "target", "weight")
    _saved_values = ("reduction",)
    _saved_int64 = ("reduction",)

    def formulas(self, grad, out):
        _no_third_order("binary_cross_entropy_backward", grad, self.grad_output, self.self, self.target)
        x, t = self.self._data, self.target._data
        g, go = grad._data, self.grad_output._data
        scale = _norm(self.reduction, x) * (1.0 if self.weight is None else self.weight._data)
        with np.errstate(all="ignore"):
            if self.should_compute_output(0):
                first = (x - t) / np.maximum((1 - x) * x, _EPSILON) * scale * g
                out[0] = _out(_sum_like(first, go.shape).astype(go.dtype), grad)
            if self.should_compute_output(1):
                second = (x * x - 2 * x * t + t) / ((x + _EPSILON) ** 2) / ((1 - x + _EPSILON) ** 2) * g * go * scale
                out[1] = _out(np.asarray(second, dtype=x.dtype), grad)
            if self.should_compute_output(2):
                third = -g * go * scale / np.maximum((1 - x) * x, _EPSILON)
                out[2] = _out(np.asarray(third, dtype=x.dtype), grad)


class LogitBackward0(_Generated):
    """logit with eps None (binary_cross_entropy's target formula), its grad in numpy."""
    __slots__ = ("self", "eps")
    _saved_tensor_names = ("self",)
    _saved_values = ("eps",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            _no_third_order("logit_backward", grad, self.self)
            x = self.self._data
            with np.errstate(all="ignore"):
                res = np.where((x < 0) | (x > 1), np.nan, grad._data / (x * (1 - x)))
            out[0] = _out(np.asarray(res, dtype=x.dtype), grad)


def _logit(a: Tensor) -> Tensor:
    node = save_inputs(LogitBackward0(), self=a, eps=None) if needs_grad(a) else None
    x = a._data
    out = _out(quietly(lambda v: np.log(v / (1 - v)), x), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _bce_target_backward(grad: Tensor, a: Tensor, target: Tensor, weight: Tensor | None, reduction: int) -> Tensor:
    """torch's binary_cross_entropy_target_backward: logit(self).neg_().mul_(grad), times weight, divided by the
    numel for a mean, each an in-place op on the first result (their nodes, and its version, counted so)."""
    from .arith import div_scalar, mul, neg

    g = mul(neg(_logit(a)), grad)
    writes = 2
    if weight is not None:
        g = mul(g, weight)
        writes += 1
    if reduction == 1:
        g = div_scalar(g, target._data.size)
        writes += 1
    return _written(g, writes)


def bce_backward(grad: Tensor, a: Tensor, target: Tensor, weight: Tensor | None, reduction: int) -> Tensor:
    """binary_cross_entropy_backward → BinaryCrossEntropyBackwardBackward0 (grad_output, self, target)."""
    node = save_inputs(BinaryCrossEntropyBackwardBackward0(), grad_output=grad, self=a, target=target,
                       weight=weight, reduction=reduction) if needs_grad(grad, a, target) else None
    x, t = a._data, target._data
    with np.errstate(all="ignore"):
        res = grad._data * (x - t) / np.maximum((1 - x) * x, _EPSILON)
    if weight is not None:
        res = res * weight._data
    res = np.broadcast_to(res * _norm(reduction, x), x.shape).astype(x.dtype)
    out = _out(res, a)
    if node is not None:
        record(node, (grad, a, target), out)
    return out


def binary_cross_entropy(a: Tensor, target: Tensor, weight: Tensor | None, reduction: int) -> Tensor:
    """-(t * log(x) + (1 - t) * log(1 - x)), each log floored at -100, times weight, reduced →
    BinaryCrossEntropyBackward0 (slots self, target; weight has no grad)."""
    _not_differentiable("binary_cross_entropy", "weight", weight)
    node = save_inputs(BinaryCrossEntropyBackward0(), self=a, target=target, weight=weight, reduction=reduction) \
        if needs_grad(a, target) else None
    for other in (target, weight):
        if other is not None and other._data.dtype != a._data.dtype:
            raise RuntimeError(f"Found dtype {scalar_type_name(other)} but expected {scalar_type_name(a)}")
    x, t = _float_data(a), target._data
    if ((x < 0) | (x > 1)).any() or np.isnan(x).any():
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(all="ignore"):
        loss = (t - 1) * np.maximum(np.log(1 - x), -100) - t * np.maximum(np.log(x), -100)
    if weight is not None:
        loss = loss * weight._data
    out = _out(_reduce(np.asarray(loss, dtype=x.dtype), reduction), a)
    if node is not None:
        record(node, (a, target), out)
    return out


__all__ = ["smooth_l1_loss", "binary_cross_entropy", "broadcast_pair"]
