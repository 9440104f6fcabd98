"""torch.batch_norm on CPU: _batch_norm_impl_index's checks, then native_batch_norm → NativeBatchNormBackward0 (slots
input, weight, bias), as PyTorch 2.13 records it.

In training the batch statistics normalise the input and the running statistics, when given, are updated in place
by the kernel (momentum-weighted, the variance unbiased) without a version bump, as torch's kernel writes them. In
evaluation the running statistics normalise, and the node's saved result1/result2 are empty, as torch's CPU kernel
returns them. Under create_graph torch's formula records NativeBatchNormBackwardBackward0; the engine refuses that
graph with NotImplementedError rather than record it wrongly.
"""
from __future__ import annotations

import numpy as np

from .._functions import _Generated
from .._tensor import Tensor
from ._common import _out, needs_grad, save_inputs
from .nn_extra import _record_many


def _axes(x: np.ndarray) -> tuple:
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


class NativeBatchNormBackward0(_Generated):
    __slots__ = ("input", "weight", "running_mean", "running_var", "training", "eps", "result1", "result2")
    _saved_tensor_names = ("input", "running_mean", "running_var", "weight", "result1", "result2")
    _saved_values = ("eps", "training")

    def formulas(self, grad, out):
        mask = [self.should_compute_output(i) for i in range(3)]
        if not any(mask):
            return
        if needs_grad(grad, self.input, self.weight):
            raise NotImplementedError("agdb's engine does not record native_batch_norm_backward's graph "
                                      "(NativeBatchNormBackwardBackward0); take this grad without create_graph=True")
        x, g = self.input._data, grad._data
        nd = x.ndim
        axes = _axes(x)
        if self.training:
            mean, invstd = self.result1._data, self.result2._data
        else:
            mean = self.running_mean._data
            invstd = 1.0 / np.sqrt(self.running_var._data + self.eps)
        xhat = (x - _per_channel(mean, nd)) * _per_channel(invstd, nd)
        w = self.weight._data if self.weight is not None else np.ones_like(invstd)
        if mask[0]:
            scale = _per_channel(w * invstd, nd)
            if self.training:
                gi = scale * (g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True))
            else:
                gi = g * scale
            out[0] = _out(np.ascontiguousarray(gi, dtype=x.dtype), self.input)
        if mask[1]:
            out[1] = _out(np.asarray((g * xhat).sum(axis=axes), dtype=x.dtype), self.input)
        if mask[2]:
            out[2] = _out(np.asarray(g.sum(axis=axes), dtype=x.dtype), self.input)


def _check_features(name: str, expected: int, t: Tensor) -> None:
    if t._data.size != expected:
        raise RuntimeError(f"{name} should contain {expected} elements not {t._data.size}")


def batch_norm(a: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, training: bool, momentum: float, eps: float) -> Tensor:
    """torch.batch_norm → NativeBatchNormBackward0."""
    shape = a._data.shape
    if len(shape) < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], but "
                         "got 1)")
    c = shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None:
            _check_features(name, c, t)
        elif not training:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _check_features(name, c, t)
    if a._data.size == 0:
        raise NotImplementedError("agdb's engine does not implement batch_norm of an empty input")
    node = save_inputs(NativeBatchNormBackward0(), input=a, weight=weight, running_mean=running_mean,
                       running_var=running_var, training=training, eps=eps) if needs_grad(a, weight, bias) else None
    x = a._data
    nd = x.ndim
    axes = _axes(x)
    if training:
        mean = x.mean(axis=axes)
        var = ((x - _per_channel(mean, nd)) ** 2).mean(axis=axes)
        invstd = 1.0 / np.sqrt(var + eps)
        n = x.size // c
        if running_mean is not None:
            running_mean._data[...] = momentum * mean + (1 - momentum) * running_mean._data
        if running_var is not None:
            unbiased = var * n / (n - 1) if n > 1 else np.full_like(var, np.inf)
            running_var._data[...] = momentum * unbiased + (1 - momentum) * running_var._data
        use_mean, use_invstd = mean, invstd
        save_mean, save_invstd = mean.astype(x.dtype), invstd.astype(x.dtype)
    else:
        use_mean = running_mean._data
        use_invstd = 1.0 / np.sqrt(running_var._data + eps)
        save_mean = save_invstd = np.zeros((0,), dtype=x.dtype)
    y = (x - _per_channel(use_mean, nd)) * _per_channel(use_invstd, nd)
    if weight is not None:
        y = y * _per_channel(weight._data, nd)
    if bias is not None:
        y = y + _per_channel(bias._data, nd)
    out = _out(np.ascontiguousarray(y, dtype=x.dtype), a)
    if node is not None:
        node.result1 = _out(save_mean, a)
        node.result2 = _out(save_invstd, a)
        _record_many(node, (a, weight, bias), [out])
    return out
