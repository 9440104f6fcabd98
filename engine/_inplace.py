"""In-place ops: add_, sub_, mul_, div_, zero_, fill_, copy_, and +=, -=, *=, /=.

Each op computes its out-of-place result, writes it into the tensor's own memory (which its views and
`detach()`es share), and bumps the memory's version (engine/_version.py): a node that saved the old
value then refuses to run backward, with PyTorch's error.

When autograd records the op (grad mode on, and the tensor or an operand requires grad), the out-of-place
op's node becomes the tensor's grad_fn. This is PyTorch's rebase_history for a tensor that is not a view
(engine-semantics §1.9: `f.mul_(2)` makes one MulBackward0 and takes one seq_nr). The node is computed on a copy of
the old value that carries the tensor's old history, so what it saves is the value before the write.

zero_, fill_ and copy_ record ZeroBackward0, FillBackward2 (a number), FillBackward3 (a 0-dim tensor) and
CopyBackwards, as PyTorch does. Not recorded yet, with a clear error instead: in-place ops on views
(PyTorch's CopySlices).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import _functions as fn
from . import _ops, _version
from ._dispatch import public
from ._node import _TYPE_NAMES
from ._ops._common import needs_grad, record
from ._tensor import Tensor, make_tensor

ERR_LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
ERR_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation.")
_NUMBER = (int, float, bool, np.number)
_TYPE = {dtype: name.removesuffix("Tensor") for dtype, name in _TYPE_NAMES.items()}  # "float32" -> "Float"


def _records(self: Tensor, operands: tuple) -> bool:
    """Whether autograd records this in-place op; raises where PyTorch does, or where agdb cannot yet."""
    if not needs_grad(self, *[o for o in operands if isinstance(o, Tensor)]):
        return False
    if self.grad_fn is None and self._requires_grad:
        raise RuntimeError(ERR_LEAF)
    if not self._data.flags.owndata:
        raise NotImplementedError("agdb's engine does not record in-place ops on views yet (PyTorch's "
                                  "CopySlices); use the out-of-place form, or clone() the view first")
    return True


def _write(self: Tensor, value: np.ndarray) -> None:
    """Write `value` into the tensor's memory, with PyTorch's checks, and count the write."""
    if value.shape != self._data.shape:
        raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                           f"{list(value.shape)}")
    if not np.can_cast(value.dtype, self._data.dtype, casting="same_kind"):
        raise RuntimeError(f"result type {_TYPE.get(str(value.dtype), value.dtype)} can't be cast to the desired "
                           f"output type {_TYPE.get(str(self._data.dtype), self._data.dtype)}")
    if not self._data.flags.writeable:  # an expand()ed tensor: many elements share one memory location
        raise RuntimeError(ERR_OVERLAP)
    np.copyto(self._data, value, casting="unsafe")
    _version.bump(self._data)


def _arithmetic(compute: Callable[[Tensor, Any], Tensor], saves_self: bool = False) -> Callable[..., Tensor]:
    """An in-place form of `compute(self, other)`.

    `saves_self`: the grad of `other` needs the value of self from before the write (mul_, div_). PyTorch
    then saves `self.clone()`, made after the op's node: a CloneBackward0, and one more seq_nr, when self
    requires grad. Checked against torch 2.13: f.mul_(w) takes 2 seq_nrs, f.mul_(2) and f.add_(w) take 1.
    """
    def method(self: Tensor, other: Any, **kwargs: Any) -> Tensor:
        if not _records(self, (other,)):
            _write(self, compute(self, other, **kwargs)._data)
            return self
        old = _old(self)
        result = compute(old, other, **kwargs)
        if saves_self and isinstance(other, Tensor) and other._requires_grad:
            _ops.clone(old)  # PyTorch's original_self: its node is made and dropped, its seq_nr stays taken
        return _rebase(self, result)
    return method


def _operator(inplace: Callable[..., Tensor]) -> Callable[[Tensor, Any], Any]:
    """`t += x` and friends: in place for tensors and numbers, else Python's fallback (NotImplemented)."""
    def method(self: Tensor, other: Any) -> Any:
        if not isinstance(other, (Tensor,) + _NUMBER):
            return NotImplemented
        return inplace(self, other)
    return method


def _old(self: Tensor) -> Tensor:
    """A copy of the tensor's value that carries its history: what a recorded in-place op reads and saves."""
    old = make_tensor(self._data.copy(), device=self._device)
    old.grad_fn, old._output_nr, old._requires_grad = self.grad_fn, self._output_nr, self._requires_grad
    return old


def _rebase(self: Tensor, result: Tensor) -> Tensor:
    """Write `result` into the tensor, whose grad_fn becomes result's node (rebase_history).

    As in PyTorch (checked on torch 2.13): tensor hooks registered so far stay on the old grad_fn and see the
    grad of the old value, hooks registered later go on the new one; retain_grad moves to the new grad_fn
    (engine-semantics §7.4), so `.grad` is the grad of the new value.
    """
    _write(self, result._data)
    old_fn, old_nr = self.grad_fn, self._output_nr
    self.grad_fn, self._output_nr, self._requires_grad = result.grad_fn, result._output_nr, True
    self._backward_hooks = None  # the old dict stays registered on the old node
    if self._retains_grad and old_fn is not None:
        old_fn._retains_grad_hooks.pop(old_nr, None)
        self._retains_grad = False
        self.retain_grad()
    return self


def _recorded(self: Tensor, node: Any, inputs: tuple, value: np.ndarray) -> Tensor:
    """Record `node` over `inputs` for a result holding `value`, then rebase the tensor onto it."""
    result = make_tensor(value, device=self._device)
    record(node, inputs, result)
    return _rebase(self, result)


@public("fill_", tensor=True)
def _fill_value(self: Tensor, value: Any) -> Tensor:
    """fill_: every element becomes `value` (a number or a 0-dim tensor)."""
    data = value._data if isinstance(value, Tensor) else np.asarray(value)
    if data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {data.ndim} "
                           "dimensions.")
    filled = np.full(self._data.shape, data, dtype=self._data.dtype)
    if not _records(self, (value,)):
        _write(self, filled)
        return self
    if isinstance(value, Tensor):
        return _recorded(self, fn.FillBackward3(), (_old(self), value), filled)
    return _recorded(self, fn.FillBackward2(), (_old(self),), filled)


@public("zero_", tensor=True)
def zero_(self: Tensor) -> Tensor:
    """Fill with zeros in place."""
    zeros = np.zeros_like(self._data)
    if not _records(self, ()):
        _write(self, zeros)
        return self
    return _recorded(self, fn.ZeroBackward0(), (_old(self),), zeros)


@public("copy_", tensor=True)
def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """Copy `src` (broadcast to this shape, cast to this dtype) into this tensor's memory."""
    if isinstance(src, _NUMBER):  # torch takes a number too, as a 0-dim tensor
        src = make_tensor(np.asarray(src, dtype=self._data.dtype), device=self._device)
    elif not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' (position 1) must be Tensor, not {type(src).__name__}")
    copied = np.broadcast_to(src._data, self._data.shape).astype(self._data.dtype)
    if not _records(self, (src,)):
        _write(self, copied)
        return self
    node = fn.CopyBackwards()
    node.src_dtype, node.src_device = src.dtype, src._device
    return _recorded(self, node, (_old(self), src), copied)


add_ = _arithmetic(_ops.add)
sub_ = _arithmetic(_ops.sub)
mul_ = _arithmetic(_ops.mul, saves_self=True)
div_ = _arithmetic(_ops.div, saves_self=True)

for _op, _method in (("add_", add_), ("sub_", sub_), ("mul_", mul_), ("div_", div_)):
    public(_op, tensor=True)(_method)
public("add_", tensor="__iadd__")(_operator(add_))
public("sub_", tensor="__isub__")(_operator(sub_))
public("mul_", tensor="__imul__")(_operator(mul_))
public("div_", tensor="__itruediv__")(_operator(div_))


def _not_inplace(name: str):
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        raise NotImplementedError(f"agdb's engine does not implement Tensor.{name} (its in-place ops are add_, "
                                  f"sub_, mul_, div_, zero_, fill_ and copy_); use the out-of-place "
                                  f"{name.rstrip('_')}")
    return method


for _op in ("pow_", "exp_", "neg_", "clamp_", "masked_fill_", "relu_", "sigmoid_", "tanh_", "sqrt_", "abs_", "t_",
            "transpose_", "unsqueeze_", "squeeze_"):
    public(_op, tensor=True)(_not_inplace(_op))
