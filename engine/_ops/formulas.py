"""Ops PyTorch only records inside derivative formulas (tanh_backward, sum_to, ...)."""
from __future__ import annotations

import numpy as np

from .. import _functions as fn
from .._tensor import Tensor, _wrap_dim, make_tensor
from .._version import bump
from ._common import _out, needs_grad, record, save_inputs
from .reduce import sum
from .shape import view


def _binary_node(node_cls, np_fn, inputs: tuple, saved: dict, like: Tensor) -> Tensor:
    node = save_inputs(node_cls(), **saved) if needs_grad(*inputs) else None
    with np.errstate(all="ignore"):
        out = _out(np_fn(), like)
    if node is not None:
        record(node, inputs, out)
    return out


def tanh_backward(grad: Tensor, output: Tensor) -> Tensor:
    """grad * (1 - output**2) → TanhBackwardBackward0."""
    return _binary_node(fn.TanhBackwardBackward0, lambda: grad._data * (1 - output._data * output._data),
                        (grad, output), {"grad_output": grad, "output": output}, grad)


def sigmoid_backward(grad: Tensor, output: Tensor) -> Tensor:
    """grad * output * (1 - output) → SigmoidBackwardBackward0."""
    return _binary_node(fn.SigmoidBackwardBackward0, lambda: grad._data * output._data * (1 - output._data),
                        (grad, output), {"grad_output": grad, "output": output}, grad)


def threshold_backward(grad: Tensor, self: Tensor, threshold: float) -> Tensor:
    """grad where self > threshold, else 0 → ThresholdBackwardBackward0."""
    return _binary_node(
        fn.ThresholdBackwardBackward0,
        lambda: np.where(self._data > threshold, grad._data, np.zeros((), grad._data.dtype)),
        (grad, self), {"self": self, "threshold": threshold}, grad)


def softmax_backward_data(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """output * (grad - sum(grad * output, dim)) → SoftmaxBackwardDataBackward0."""
    def compute() -> np.ndarray:
        g, o = grad._data, output._data
        return o * (g - (g * o).sum(axis=dim, keepdims=True)) if o.ndim else np.zeros_like(o)

    return _binary_node(fn.SoftmaxBackwardDataBackward0, compute, (grad, output),
                        {"grad_output": grad, "output": output, "dim": dim}, grad)


def log_softmax_backward_data(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """grad - exp(output) * sum(grad, dim) → LogSoftmaxBackwardDataBackward0."""
    def compute() -> np.ndarray:
        g, o = grad._data, output._data
        return g - np.exp(o) * g.sum(axis=dim, keepdims=True) if o.ndim else np.zeros_like(o)

    return _binary_node(fn.LogSoftmaxBackwardDataBackward0, compute, (grad, output),
                        {"grad_output": grad, "output": output, "dim": dim}, grad)


def mse_loss_backward(grad: Tensor, self: Tensor, target: Tensor, reduction: int) -> Tensor:
    """2 * (self - target) * grad (/ numel for mean) → MseLossBackwardBackward0."""
    def compute() -> np.ndarray:
        norm = 2.0 / self._data.size if reduction == 1 else 2.0
        return (norm * (self._data - target._data) * grad._data).astype(self._data.dtype)

    return _binary_node(fn.MseLossBackwardBackward0, compute, (grad, self, target),
                        {"grad_output": grad, "self": self, "target": target, "reduction": reduction}, self)


def select_backward(grad: Tensor, sizes: tuple, dim: int, index: int) -> Tensor:
    """Scatter `grad` into zeros of `sizes` at `index` along `dim` → SelectBackwardBackward0."""
    def compute() -> np.ndarray:  # dim and index come as the forward got them (maybe negative)
        res = np.zeros(sizes, dtype=grad._data.dtype)
        res[(slice(None),) * _wrap_dim(dim, len(sizes)) + (index,)] = grad._data
        return res

    return _binary_node(fn.SelectBackwardBackward0, compute, (grad,), {"dim": dim, "index": index}, grad)


def slice_backward(grad: Tensor, sizes: tuple, dim: int, start: int, end: int, step: int) -> Tensor:
    """Place `grad` into zeros of `sizes` at the slice → SliceBackwardBackward0."""
    def compute() -> np.ndarray:  # the slice's arguments as given (negative, or INT64_MAX for an open end)
        res = np.zeros(sizes, dtype=grad._data.dtype)
        res[(slice(None),) * _wrap_dim(dim, len(sizes)) + (slice(start, end, step),)] = grad._data
        return res

    return _binary_node(fn.SliceBackwardBackward0, compute, (grad,),
                        {"dim": dim, "start": start, "end": end, "step": step}, grad)


def sum_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """at::sum_to: sum the broadcast dims (SumBackward1, keepdim) and view away leading ones."""
    if len(shape) == 0:
        return sum(grad)
    sizes = grad._data.shape
    leading = len(sizes) - len(shape)
    reduce = list(range(leading))
    for i in range(leading, len(sizes)):
        if shape[i - leading] == 1 and sizes[i] != 1:
            reduce.append(i)
    if reduce:
        grad = sum(grad, tuple(reduce), keepdim=True)
    return view(grad, shape) if leading > 0 else grad


def zeros_like_data(t: Tensor) -> Tensor:
    """Zeros shaped like `t`, recording nothing."""
    return make_tensor(np.zeros(t._data.shape, dtype=t._data.dtype), device=t._device)


def zeros_scalar(like: Tensor) -> Tensor:
    """at::zeros({}, grad.options()): a 0-dim zero that joins type promotion as a tensor."""
    return make_tensor(np.zeros((), dtype=like._data.dtype), device=like._device)


def empty_like_geometry(like: Tensor, geometry: tuple) -> Tensor:
    """An uninitialised tensor with `like`'s dtype and device and the sizes of `geometry` (sizes, strides,
    offset), C-contiguous: what CopySlices copies the base's grad into. Records nothing."""
    return make_tensor(np.empty(geometry[0], dtype=like._data.dtype), device=like._device)


def as_strided_backward(grad: Tensor, input_geometry: tuple, sizes: tuple, strides: tuple, offset: int) -> Tensor:
    """The grad w.r.t. an as_strided input: scatter `grad` into zeros of the input's storage at the view's
    elements, then read the input's geometry from it. In engine ops (a copy_ into a view of the zeros, then
    as_strided), so create_graph records CopySlices and AsStridedBackward0 as PyTorch's formula does."""
    from .. import _views
    from .._inplace import copy_  # it imports the ops
    from .shape import as_strided

    in_sizes, in_strides, in_offset = input_geometry
    numel = max(_extent(sizes, strides, offset), _extent(in_sizes, in_strides, in_offset))
    storage = make_tensor(np.zeros(numel, dtype=grad._data.dtype), device=grad._device)
    index = _views.strided_indices(sizes, strides, offset)
    if np.unique(index).size == index.size:
        copy_(as_strided(storage, sizes, strides, offset), grad)
    else:  # the view reads some element twice: its grads add up, by storage.index_add_(0, indices, grad.reshape(-1))
        from .shape import index_add, reshape

        indices = make_tensor(np.ascontiguousarray(index.reshape(-1), dtype=np.int64), device=grad._device)
        storage = index_add(storage, 0, indices, reshape(grad, (-1,)))
        bump(storage._data)  # torch's index_add_ writes the zeros in place
    return as_strided(storage, in_sizes, in_strides, in_offset)


def _extent(sizes: tuple, strides: tuple, offset: int) -> int:
    """How many storage elements a geometry needs: one past its furthest element (0 when it is empty)."""
    if any(n == 0 for n in sizes):
        return 0
    return offset + 1 + int(np.dot(np.subtract(sizes, 1), strides))
