"""leaky_relu → LeakyReluBackward0 (saves self), leaky_relu_ → LeakyReluBackward1 (saves result), and relu_ →
ReluBackward0 (saves result), as PyTorch 2.13 records them on CPU.

An in-place op with history is recorded as engine/_inplace.py records the others: the out-of-place node over a copy
of the old value that carries its history, then rebase_history onto it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _functions as fn
from .._dispatch import public
from .._functions import _Generated
from .._node import ViewOwner
from .._tensor import Tensor
from .._version import version_of
from ._common import _out, _unowned, needs_grad, quietly, record, save_inputs
from .formulas import _binary_node


def _leaky(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x > 0, x, x * x.dtype.type(slope))


def leaky_relu_backward(grad: Tensor, self: Tensor, negative_slope: float, self_is_result: bool) -> Tensor:
    """grad where self > 0, else grad * negative_slope → LeakyReluBackwardBackward0."""
    def compute() -> np.ndarray:
        g = grad._data
        return np.where(self._data > 0, g, g * g.dtype.type(negative_slope))

    return _binary_node(LeakyReluBackwardBackward0, compute, (grad, self),
                        {"self": self, "negative_slope": negative_slope}, grad, (grad._data, self._data))


class LeakyReluBackward0(_Generated):
    __slots__ = ("self", "negative_slope")
    _saved_tensor_names = ("self",)
    _saved_values = ("negative_slope",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = leaky_relu_backward(grad, self.self, self.negative_slope, False)


class LeakyReluBackward1(_Generated):
    __slots__ = ("result", "negative_slope")
    _saved_tensor_names = ("result",)
    _saved_values = ("negative_slope",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            if self.negative_slope < 0:
                raise RuntimeError(ERR_NEGATIVE_SLOPE)
            out[0] = leaky_relu_backward(grad, self.result, self.negative_slope, True)


class LeakyReluBackwardBackward0(_Generated):
    __slots__ = ("self", "negative_slope")
    _saved_tensor_names = ("self",)
    _saved_values = ("negative_slope",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = leaky_relu_backward(grad, self.self, self.negative_slope, False)
        if self.should_compute_output(1):
            out[1] = fn.ops.zeros_like_data(grad)


ERR_NEGATIVE_SLOPE = (
    "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is "
    "caused by calling in-place forward function with a negative slope, please call out-of-place version instead. "
    "File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward "
    "calculation with negative slope")


def leaky_relu(a: Tensor, negative_slope: Any = 0.01) -> Tensor:
    """max(a, 0) + negative_slope * min(a, 0) → LeakyReluBackward0."""
    slope = float(negative_slope)
    node = save_inputs(LeakyReluBackward0(), self=a, negative_slope=slope) if needs_grad(a) else None
    out = _out(quietly(_leaky, a._data, slope), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _inplace(self: Tensor, node_cls: Any, value: np.ndarray, **saved: Any) -> Tensor:
    from .. import _inplace

    if not _inplace._records(self, ()):
        _inplace._write(self, value)
        return self
    old = _inplace._old(self)
    node = node_cls()
    for name, v in saved.items():
        setattr(node, name, v)
    if self._view is None:  # torch saves self itself, after the write: a later write to it fails the backward
        _inplace._write(self, value)
        _inplace._set_history(self, node, 0)
        node.result = self
        record(node, (old,), self)
        return self
    result = _out(value, old)  # a view's node goes inside a CopySlices
    node.result = result
    record(node, (old,), result)
    _inplace._rebase(self, result)
    if node._saved_versions.__class__ is tuple:  # not packed by saved-tensor hooks (they were given `result`)
        # torch saves the view itself after the write (is_inplace_on_view), so a later write to its memory fails
        # the backward; kept unowned, with this node as its grad_fn, as any saved output (keep_outputs_unowned),
        # and the view's grad_fn now, weakly, for the error's text
        alias = _unowned(self)
        object.__setattr__(node, "result", alias)
        node._saved_versions = ((alias, version_of(self._data), ViewOwner(self.grad_fn), 0),)
    return self


def leaky_relu_(a: Tensor, negative_slope: Any = 0.01) -> Tensor:
    """leaky_relu in place → LeakyReluBackward1."""
    slope = float(negative_slope)
    return _inplace(a, LeakyReluBackward1, quietly(_leaky, a._data, slope), negative_slope=slope)


@public("relu_", torch=True, tensor=True)
def relu_(a: Tensor) -> Tensor:
    """max(a, 0) in place → ReluBackward0."""
    return _inplace(a, fn.ReluBackward0, np.maximum(a._data, a._data.dtype.type(0)))
