"""Ops PyTorch only records inside derivative formulas (tanh_backward, sum_to, ...)."""
from __future__ import annotations

import numpy as np

from .. import _functions as fn
from .. import _state
from .._layout import contiguous_strides, tensor_iterator_layout
from .._state import tls
from .._tensor import Tensor, _wrap_dim, make_tensor
from .._views import NO_GRAD_MODE, ViewInfo, creation_meta_now
from ._common import _out, needs_grad, quietly, record, save_inputs
from .reduce import sum
from .shape import _as_view, _view_data, view_exact


def _opmath(x: np.ndarray) -> np.ndarray:
    """The type torch's CPU kernels compute a half tensor in (float), rounding the result once."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _binary_node(node_cls, np_fn, inputs: tuple, saved: dict, like: Tensor, operands: tuple = ()) -> Tensor:
    """`operands`: the arrays torch's TensorIterator kernel takes, in its order, when the result is laid out by
    them (a transposed grad makes a transposed result)."""
    node = save_inputs(node_cls(), **saved) if needs_grad(*inputs) else None
    res = quietly(np_fn)
    out = _out(tensor_iterator_layout(res, operands) if operands else res, like)
    if node is not None:
        record(node, inputs, out)
    return out


def tanh_backward(grad: Tensor, output: Tensor) -> Tensor:
    """grad * (1 - output**2) → TanhBackwardBackward0."""
    if not tls.grad_enabled or not needs_grad(grad, output):  # the common case (no create_graph): no node
        g, o = grad._data, output._data
        if g.shape == o.shape and g.dtype == o.dtype and g.ndim and g.flags.c_contiguous and o.flags.c_contiguous \
                and g.dtype != np.float16:
            # TensorIterator's fast setup: the result is C-ordered as the operands, so the layout has nothing to
            # change; computed in one new array (the same operations, two temporaries fewer)
            return make_tensor(quietly(_tanh_grad_new, g, o), False, grad._device)
        res = quietly(_tanh_grad, g, o)
        if res.__class__ is not np.ndarray:  # numpy gives 0-dim operands a scalar
            res = np.asarray(res)
        # _out(res, grad) is make_tensor then: the result is new memory, so it takes the inference flag of the mode
        return make_tensor(tensor_iterator_layout(res, (g, o)) if res.ndim > 1 else res, False, grad._device)
    return _binary_node(fn.TanhBackwardBackward0, lambda: _tanh_grad(grad._data, output._data),
                        (grad, output), {"grad_output": grad, "output": output}, grad, (grad._data, output._data))


def _tanh_grad(g: np.ndarray, o: np.ndarray) -> np.ndarray:
    if g.dtype == np.float16 or o.dtype == np.float16:  # computed in float, rounded once (torch's half kernel)
        return (_opmath(g) * (1 - _opmath(o) * _opmath(o))).astype(np.result_type(g, o))
    return g * (1 - o * o)


def _tanh_grad_new(g: np.ndarray, o: np.ndarray) -> np.ndarray:
    """_tanh_grad of two arrays of one shape and dtype, one dim or more, with every step written into one array."""
    res = _multiply(o, o)
    _subtract(1, res, out=res)
    return _multiply(g, res, out=res)


_multiply = np.multiply
_subtract = np.subtract


def sigmoid_backward(grad: Tensor, output: Tensor) -> Tensor:
    """grad * output * (1 - output) → SigmoidBackwardBackward0."""
    return _binary_node(fn.SigmoidBackwardBackward0, lambda: _sigmoid_grad(grad._data, output._data),
                        (grad, output), {"grad_output": grad, "output": output}, grad, (grad._data, output._data))


def _sigmoid_grad(g: np.ndarray, o: np.ndarray) -> np.ndarray:
    if g.dtype == np.float16:  # torch's half kernel: c10::Half arithmetic, each step rounded, in this order
        return g * (1 - o) * o
    return g * o * (1 - o)


def threshold_backward(grad: Tensor, self: Tensor, threshold: float) -> Tensor:
    """grad where self > threshold, else 0 → ThresholdBackwardBackward0."""
    return _binary_node(
        fn.ThresholdBackwardBackward0,
        lambda: np.where(self._data <= threshold, np.zeros((), grad._data.dtype), grad._data),  # nan passes grad
        (grad, self), {"self": self, "threshold": threshold}, grad, (self._data, grad._data))


def softmax_backward_data(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """output * (grad - sum(grad * output, dim)) → SoftmaxBackwardDataBackward0."""
    def compute() -> np.ndarray:
        g, o = _opmath(grad._data), _opmath(output._data)
        res = o * (g - ((g * o).sum(axis=dim, keepdims=True) if o.ndim else g * o))  # 0-dim: nan for nan, inf
        return res.astype(np.result_type(grad._data, output._data), copy=False)

    return _binary_node(fn.SoftmaxBackwardDataBackward0, compute, (grad, output),
                        {"grad_output": grad, "output": output, "dim": dim}, grad)


def log_softmax_backward_data(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """grad - exp(output) * sum(grad, dim) → LogSoftmaxBackwardDataBackward0."""
    def compute() -> np.ndarray:
        g, o = _opmath(grad._data), _opmath(output._data)
        res = g - np.exp(o) * (g.sum(axis=dim, keepdims=True) if o.ndim else g)
        return res.astype(np.result_type(grad._data, output._data), copy=False)

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
    if leading >= 0 and not needs_grad(grad):
        return _sum_to_unrecorded(grad, shape, reduce, leading)
    if reduce:
        grad = sum(grad, tuple(reduce), keepdim=True)
    return view_exact(grad, shape) if leading > 0 else grad


def sum_to_unrecorded(grad: Tensor, shape: tuple[int, ...]) -> Tensor | None:
    """sum_to(grad, shape) for a `shape` of one dim or more, when nothing records (grad mode off), with the dims
    to sum found in the same pass as the test that `shape` expands to the grad's sizes: None when it does not
    (validate_outputs' error)."""
    sizes = grad._data.shape
    leading = len(sizes) - len(shape)
    if leading < 0:
        return None
    reduce = list(range(leading))
    i = leading
    for size in shape:
        if size != sizes[i]:
            if size != 1:
                return None
            reduce.append(i)
        i += 1
    return _sum_to_unrecorded(grad, shape, reduce, leading)


def _sum_to_unrecorded(grad: Tensor, shape: tuple[int, ...], reduce: list, leading: int) -> Tensor:
    """sum_to's sum and view when neither records a node (every broadcast grad of a backward without
    create_graph): the same tensors, a contiguous sum and a view of it, without the ops' argument handling."""
    if not reduce:
        return _view_data(grad, shape, None) if leading > 0 else grad
    data = grad._data
    data = contiguous_strides(
        _add_reduce(data, tuple(reduce), np.int64 if data.dtype.kind in "bi" else None, keepdims=True))
    device = grad._device
    summed = make_tensor(data, False, device)
    if leading == 0:
        return summed
    # a sum with keepdim: its leading ones always view away; without a size-1 dim left, indexing them away gives
    # the view's strides (torch's view rule only picks strides for size-1 dims)
    out = make_tensor(_as_view(data, shape) if 1 in shape else data[(0,) * leading], False, device)
    # _view_out(view, summed), inline: summed is a new plain tensor, so the view's base is summed, at version 0 (new
    # memory); made under no_grad (validate_outputs' sum, without create_graph) unless an inference mode was seen
    info = _new_object(ViewInfo)
    info.base = summed
    info.creation_meta = NO_GRAD_MODE if not tls.grad_enabled and not _state.inference_seen else creation_meta_now()
    info.attr_version = 0
    out._view = info
    return out


_new_object = object.__new__


_add_reduce = np.add.reduce  # what ndarray.sum calls, with the same arguments


def zeros_like_data(t: Tensor) -> Tensor:
    """Zeros shaped like `t`, recording nothing."""
    return make_tensor(np.zeros(t._data.shape, dtype=t._data.dtype), device=t._device)


def zeros_scalar(like: Tensor) -> Tensor:
    """at::zeros({}, grad.options()): a 0-dim zero that joins type promotion as a tensor."""
    return make_tensor(np.zeros((), dtype=like._data.dtype), device=like._device)


def empty_like_geometry(like: Tensor, geometry: tuple) -> Tensor:
    """An uninitialised tensor with `like`'s dtype and device and the sizes and strides of `geometry` (sizes,
    strides, offset): what CopySlices copies the base's grad into (torch's new_empty_strided with the base's
    strides, which the view's geometry is relative to; a base that is not dense gets C order). Records nothing."""
    from .._layout import empty_strided, non_overlapping_and_dense

    sizes, strides = geometry[0], geometry[1]
    if non_overlapping_and_dense(tuple(sizes), tuple(strides)):
        return make_tensor(empty_strided(tuple(sizes), tuple(strides), like._data.dtype), device=like._device)
    return make_tensor(np.empty(sizes, dtype=like._data.dtype), device=like._device)


def as_strided_backward(grad: Tensor, input_geometry: tuple, sizes: tuple, strides: tuple, offset: int) -> Tensor:
    """The grad w.r.t. an as_strided input, by torch's algorithm, in engine ops so that create_graph records its
    nodes: the view's size-1 dims are squeezed out of `grad` and its stride-0 dims summed out; the rest is
    scattered into zeros standing for the storage (copy_ into a view of them: CopySlices; index_add when
    the view may read an element twice); where the input reads an element twice its grad is divided by the
    count; the input's geometry is then read from the storage (AsStridedBackward0)."""
    from .._inplace import copy_  # it imports the ops
    from .shape import as_strided, squeeze

    in_sizes, in_strides, in_offset = input_geometry
    out_sizes: list = []
    out_strides: list = []
    for i in range(len(sizes) - 1, -1, -1):
        if sizes[i] == 0:
            return make_tensor(np.zeros(in_sizes, dtype=grad._data.dtype), device=grad._device)
        if sizes[i] == 1:
            grad = squeeze(grad, i)
        elif strides[i] == 0:
            grad = sum(grad, i)
        else:
            out_sizes.insert(0, sizes[i])
            out_strides.insert(0, strides[i])
    if any(n == 0 for n in in_sizes):
        return make_tensor(np.zeros(in_sizes, dtype=grad._data.dtype), device=grad._device)
    inp = [(n, st) for n, st in zip(in_sizes, in_strides, strict=True) if n != 1]
    inp_sizes, inp_strides = [n for n, _ in inp], [st for _, st in inp]
    shared = min(in_offset, offset)
    inp_offset, out_offset = in_offset - shared, offset - shared
    size = max(_extent(inp_sizes, inp_strides, inp_offset), _extent(out_sizes, out_strides, out_offset))
    storage = make_tensor(np.zeros(size, dtype=grad._data.dtype), device=grad._device)
    if _maybe_overlapping(out_sizes, out_strides):  # storage.index_add_(0, indices, grad.reshape(-1))
        storage = _index_add_in_place(storage, _storage_indices(size, out_sizes, out_strides, out_offset),
                                      _reshape_flat(grad))
    else:
        copy_(as_strided(storage, tuple(out_sizes), tuple(out_strides), out_offset), grad)
    if _maybe_overlapping(inp_sizes, inp_strides):  # storage.div_(count of each element's reads)
        from .arith import div

        index = _storage_indices(size, inp_sizes, inp_strides, inp_offset)
        count = make_tensor(np.bincount(index._data, minlength=size).astype(grad._data.dtype), device=grad._device)
        storage = fn._written(div(storage, count), 1)  # torch's storage.div_(count)
    return as_strided(storage, in_sizes, in_strides, inp_offset)


def _maybe_overlapping(sizes: list, strides: list) -> bool:
    """torch's _maybe_overlapping_memory: by increasing stride, each stride must pass the furthest element the
    smaller ones reach; otherwise the geometry may read an element twice."""
    furthest = 0
    for st, n in sorted(zip(strides, sizes, strict=True)):
        if st <= furthest:
            return True
        furthest += st * (n - 1)
    return False


def _storage_indices(size: int, sizes: list, strides: list, offset: int) -> Tensor:
    """arange(size).as_strided(sizes, strides, offset).reshape(-1): which storage element each one reads."""
    from .. import _views

    index = _views.strided_indices(tuple(sizes), tuple(strides), offset).reshape(-1)
    return make_tensor(np.ascontiguousarray(index, dtype=np.int64), device="cpu")


def _reshape_flat(grad: Tensor) -> Tensor:
    from .shape import reshape

    return reshape(grad, (-1,))


def _index_add_in_place(storage: Tensor, index: Tensor, source: Tensor) -> Tensor:
    from .shape import index_add

    return fn._written(index_add(storage, 0, index, source), 1)  # torch's index_add_ writes the zeros in place


def _extent(sizes: tuple, strides: tuple, offset: int) -> int:
    """How many storage elements a geometry needs: one past its furthest element (0 when it is empty)."""
    if any(n == 0 for n in sizes):
        return 0
    return offset + 1 + int(np.dot(np.subtract(sizes, 1), strides))
