"""Views and shape ops: t, permute, transpose, view, reshape, squeeze, expand, indexing, cat, stack, clone, to."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from .. import _functions as fn
from .._args import int_arg, size_arg
from .._dispatch import public
from .._dtype import as_dtype, bool_, cpp_type_name, float16, float32, float64, int32, int64
from .._layout import _strides as _layout_strides
from .._layout import contiguous_strides, empty_preserving, empty_strided
from .._node import Node
from .._state import INT64_MAX
from .._tensor import Tensor, _wrap_dim, make_tensor
from .._version import bump, version_of
from .._views import creation_meta_now, geometry, mark_view, strided_data
from ._common import (
    _out,
    check_same_device,
    has_edge,
    needs_grad,
    record,
    record_outputs,
    save_inputs,
)


def _view_out(data: np.ndarray, a: Tensor, multi_output: bool = False) -> Tensor:
    """Wrap `data`, a numpy view of `a`'s memory, as a view of `a` (engine/_views.py)."""
    out = _out(data, a)
    if not a._inference:  # torch tracks no views of inference tensors: _is_view() is False, no creation meta
        mark_view(out, a, creation_meta_now(multi_output), version_of(a._data))
    if a._zerotensor:
        out._zerotensor = True
    return out


@public("as_strided", torch=True, tensor=True)
def as_strided(a: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None) -> Tensor:
    """A view of `a`'s storage with the given sizes, strides (in elements) and offset → AsStridedBackward0."""
    node = fn.AsStridedBackward0() if needs_grad(a) else None
    base = a if a._view is None else a._view.base
    size, stride = tuple(int(n) for n in size), tuple(int(st) for st in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    given = None if storage_offset is None else int(storage_offset)
    offset = geometry(a, base)[2] if given is None else given
    out = _view_out(strided_data(base._data, size, stride, offset), a)
    if node is not None:
        node.size, node.stride, node.storage_offset = size, stride, given  # the offset as given (None: a's own)
        node.self_geometry = geometry(a, base)
        record(node, (a,), out)
    return out


@public("t", torch=True, tensor=True)
def t(a: Tensor) -> Tensor:
    """Transpose of a tensor with at most 2 dims → TBackward0."""
    node = fn.TBackward0() if needs_grad(a) else None
    if a._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a._data.ndim}D")
    out = _view_out(a._data.T, a)
    if node is not None:
        record(node, (a,), out)
    return out


def permute(a: Tensor, dims: Sequence[int]) -> Tensor:
    """Reorder dims → PermuteBackward0."""
    node = fn.PermuteBackward0() if needs_grad(a) else None
    nd = a._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal "
                           f"to len(dims) = {len(dims)}")
    given = tuple(int(d) for d in dims)
    out = _view_out(np.transpose(a._data, tuple(_wrap_dim(d, nd) for d in given)), a)
    if node is not None:
        node.dims = given  # as given: the node saves the argument (`_saved_dims`), not the wrapped dims
        record(node, (a,), out)
    return out


@public("transpose", torch=True, tensor=True)
def transpose(a: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims → TransposeBackward0."""
    node = fn.TransposeBackward0() if needs_grad(a) else None
    nd = a._data.ndim
    dim0, dim1 = int_arg("transpose", "dim0", 1, dim0), int_arg("transpose", "dim1", 2, dim1)
    d0, d1 = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
    out = _view_out(np.swapaxes(a._data, d0, d1) if nd else a._data, a)
    if node is not None:
        node.dim0, node.dim1 = dim0, dim1
        record(node, (a,), out)
    return out


def _infer_shape(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _as_view(data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A view of `data` with `shape`, or None when the strides do not allow one (torch's view rule). A size-1 dim,
    whose stride numpy picks freely, gets torch's (see _view_strides): saved strides (mm's) read it."""
    v = data.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    if 1 in shape and data.ndim and v.size:
        item = data.itemsize
        strides = _view_strides(data.shape, tuple(s // item for s in data.strides), shape)
        if strides is not None and tuple(s * item for s in strides) != v.strides:
            v = _restrided(v, strides)
    return v


def _unsqueezed(data: np.ndarray, d: int) -> np.ndarray:
    """`data` with a size-1 dim at `d`, the others keeping their strides (numpy may change those of size-1 dims),
    the new one torch's: the next dim's size times its stride (1 last)."""
    v = np.expand_dims(data, d)
    if v.size:
        strides = [s // data.itemsize for s in data.strides]
        strides.insert(d, strides[d] * data.shape[d] if d < data.ndim else 1)
        if tuple(s * data.itemsize for s in strides) != v.strides:
            v = _restrided(v, tuple(strides))
    return v


def _view_strides(old_shape: tuple, old_strides: tuple, shape: tuple) -> tuple | None:
    """The element strides torch gives a view of a tensor (`old_shape`, `old_strides`) as `shape`, or None.

    The old dims are taken from the last in runs that are contiguous with each other (a size-1 dim never ends a
    run); each run is viewed as a run of new dims with the run's innermost stride as unit, and a new size-1 dim
    met at the start of a run takes the stride the run has reached there."""
    new = [0] * len(shape)
    d = len(shape) - 1
    unit, run, done = old_strides[-1], 1, 1  # stride unit of the run, its elements, elements placed so far
    for i in range(len(old_shape) - 1, -1, -1):
        run *= old_shape[i]
        if i and (old_shape[i - 1] == 1 or old_strides[i - 1] == run * unit):
            continue  # the run goes on into dim i - 1
        while d >= 0 and (done < run or shape[d] == 1):
            new[d] = done * unit
            done *= shape[d]
            d -= 1
        if done != run:
            return None
        if i:
            unit, run, done = old_strides[i - 1], 1, 1
    return tuple(new) if d == -1 else None


def _restrided(v: np.ndarray, strides: tuple) -> np.ndarray:
    """`v` with other element strides (differing only on size-1 dims), still a view of the same memory."""
    owner = v
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if not owner.flags.c_contiguous:
        flat = owner.ravel(order="K")  # a 1-D view of memory laid out in another order (a buffer must be C-ordered)
        if not np.shares_memory(flat, owner):
            return v  # memory in no single block: keep numpy's strides (they differ only on size-1 dims)
        owner = flat
    start = v.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    out = np.ndarray(v.shape, dtype=v.dtype, buffer=owner, offset=start,
                     strides=tuple(s * v.itemsize for s in strides))
    if not v.flags.writeable:
        out.flags.writeable = False
    return out


@public("view", tensor=True)
def view(a: Tensor, *shape: Any) -> Tensor:
    """Reshape without copying → ViewBackward0; refuses incompatible strides like PyTorch."""
    size = _view_size(shape)
    node = fn.ViewBackward0() if needs_grad(a) else None  # taken before the kernel checks, as in torch
    return _view_data(a, _infer_shape(size, a._data.size), node)


def view_exact(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    """view(a, shape) for a `shape` of ints, none -1, with `a`'s number of elements (sum_to's): the same node and
    view, without parsing the arguments (derivative formulas call it once per broadcast grad)."""
    return _view_data(a, shape, fn.ViewBackward0() if needs_grad(a) else None)


def _view_data(a: Tensor, shape: tuple[int, ...], node: Node | None) -> Tensor:
    data = _as_view(a._data, shape)
    if data is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead.")
    return _view_of(a, data, node)


def _view_size(args: tuple) -> tuple[int, ...]:
    try:
        return size_arg("view", "size", args)
    except TypeError:
        bad = type(args[0] if len(args) == 1 else next(a for a in args if not isinstance(a, int))).__name__
        raise TypeError(
            f"view() received an invalid combination of arguments - got ({bad}), but expected one of:\n"
            f" * (torch.dtype dtype)\n      didn't match because some of the arguments have invalid types: (!{bad}!)\n"
            f" * (tuple of ints size)\n      didn't match because some of the arguments have invalid types: "
            f"(!{bad}!)\n") from None


def _view_of(a: Tensor, data: np.ndarray, node: Node | None) -> Tensor:
    out = _view_out(data, a)
    if node is not None:
        node.self_sym_sizes = a._data.shape
        record(node, (a,), out)
    return out


@public("reshape", torch=True, tensor=True)
def reshape(a: Tensor, *shape: Any) -> Tensor:
    """A view when the strides allow (ViewBackward0), else a clone then _unsafe_view."""
    size = size_arg("reshape", "shape", shape)
    try:
        shape = _infer_shape(size, a._data.size)
    except RuntimeError:
        # torch's reshape of a contiguous tensor is its view, whose node takes a seq_nr (and collects its edges:
        # a stale view regenerates) before the size check fails; any other tensor fails infer_size first.
        if a.is_contiguous() and needs_grad(a):
            fn.ViewBackward0()
            has_edge(a)
        raise
    data = _as_view(a._data, shape)
    if data is not None:
        if a._data.flags.c_contiguous:
            return _view_of(a, data, fn.ViewBackward0() if needs_grad(a) else None)
        # A non-contiguous input the strides still allow viewing goes through _reshape_alias.
        return _view_of(a, data, fn.ReshapeAliasBackward0() if needs_grad(a) else None)
    return _unsafe_view(clone(a, contiguous=True), shape)


def _unsafe_view(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    node = fn.UnsafeViewBackward0() if needs_grad(a) else None
    out = _out(np.ascontiguousarray(a._data).reshape(shape), a)
    if node is not None:
        node.self_sym_sizes = a._data.shape
        record(node, (a,), out)
    return out


@public("flatten", torch=True, tensor=True)
def flatten(a: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start..end into one (a reshape)."""
    nd = a._data.ndim
    if nd == 0:
        return reshape(a, (1,))
    s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
    if s == e:
        return a
    shape = a._data.shape
    return reshape(a, shape[:s] + (-1,) + shape[e + 1:])


@public("unsqueeze", torch=True, tensor=True)
def unsqueeze(a: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim → UnsqueezeBackward0."""
    node = fn.UnsqueezeBackward0() if needs_grad(a) else None
    dim = int_arg("unsqueeze", "dim", 1, dim)
    out = _view_out(_unsqueezed(a._data, _wrap_dim(dim, a._data.ndim + 1)), a)
    if node is not None:
        node.dim = dim
        record(node, (a,), out)
    return out


@public("squeeze", torch=True, tensor=True)
def squeeze(a: Tensor, dim: Any = None) -> Tensor:
    """Drop size-1 dims: all (SqueezeBackward0), one (SqueezeBackward1) or a tuple of them (SqueezeBackward2)."""
    if dim is None:
        node = fn.SqueezeBackward0() if needs_grad(a) else None
        out = _view_out(np.squeeze(a._data), a)
        if node is not None:
            node.self_sym_sizes = a._data.shape
            record(node, (a,), out)
        return out
    if isinstance(dim, (tuple, list)):
        return _squeeze(a, fn.SqueezeBackward2, tuple(int(d) for d in dim))
    return _squeeze(a, fn.SqueezeBackward1, dim)


def squeeze_dims(a: Tensor, dims: tuple[int, ...]) -> Tensor:
    """The in-place squeeze_(dim) of matmul's 1-D @ 2-D path, on a fresh tensor → SqueezeBackward4."""
    return _squeeze(a, fn.SqueezeBackward4, dims[0] if len(dims) == 1 else dims)


def _squeeze(a: Tensor, node_cls: type, dim: Any) -> Tensor:
    """Drop the size-1 dims among `dim` (an int or a tuple, kept as given on the node)."""
    nd = a._data.ndim
    node = node_cls() if needs_grad(a) else None
    dims = (dim,) if isinstance(dim, int) else dim
    keep = tuple(sorted({d for d in (_wrap_dim(d, nd) for d in dims) if nd and a._data.shape[d] == 1}))
    data = np.squeeze(a._data, keep) if keep else a._data.view()
    # squeeze_ (SqueezeBackward4) changes a fresh tensor in place: its result is that tensor, not a view
    out = _out(data, a) if node_cls is fn.SqueezeBackward4 else _view_out(data, a)
    if node is not None:
        node.self_sym_sizes, node.dim = a._data.shape, dim
        record(node, (a,), out)
    return out


@public("expand", tensor=True)
def expand(a: Tensor, *sizes: Any) -> Tensor:
    """Broadcast to `sizes` without copying → ExpandBackward0."""
    node = fn.ExpandBackward0() if needs_grad(a) else None
    sizes = size_arg("expand", "size", sizes)
    shape = expand_shape(a, sizes)
    lead = len(sizes) - a._data.ndim
    if all(s == 1 for s in shape[:lead]) and tuple(shape[lead:]) == a._data.shape:
        # nothing broadcast: no zero stride, so writable, as in torch (a[()] of a 0-dim array would be a copy)
        out = _view_out(a._data[(None,) * lead] if lead else a._data.view(), a)
    else:
        out = _view_out(np.broadcast_to(a._data, tuple(shape)), a)
    if node is not None:
        node.self_sym_sizes = a._data.shape
        record(node, (a,), out)
    return out


@public("select", tensor=True)
def select(a: Tensor, dim: int, index: int) -> Tensor:
    """a.select(dim, index), as `a[index]` does → SelectBackward0."""
    node = fn.SelectBackward0() if needs_grad(a) else None
    nd = a._data.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, nd)
    size = a._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    i = index + size if index < 0 else index
    out = _view_out(a._data[(slice(None),) * d + (i, Ellipsis)], a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.index = a._data.shape, dim, index  # as given
        record(node, (a,), out)
    return out


def slice_(a: Tensor, dim: int, start: int | None, end: int | None, step: int = 1) -> Tensor:
    """a.slice(dim, start, end, step) → SliceBackward0."""
    if step <= 0:
        raise ValueError("step must be greater than zero")
    d = _wrap_dim(dim, a._data.ndim)
    size = a._data.shape[d]
    s, e, _ = slice(start, end, step).indices(size)
    e = builtins.max(e, s)
    node = fn.SliceBackward0() if needs_grad(a) else None
    out = _view_out(a._data[(slice(None),) * d + (slice(s, e, step),)], a)
    if node is not None:  # the arguments as given; an open end is INT64_MAX, an open start 0, as torch's slice
        node.self_sym_sizes, node.dim, node.step = a._data.shape, dim, step
        node.start = 0 if start is None else start
        node.end = INT64_MAX if end is None else end
        record(node, (a,), out)
    return out


@public("__getitem__", tensor=True)
def getitem(a: Tensor, key: Any) -> Tensor:
    """Basic indexing with ints, slices, None and Ellipsis, applied dim by dim as PyTorch does."""
    if isinstance(key, slice):  # a lone slice is always sliced, full or not (torch: SliceBackward0 for x[:])
        if a._data.ndim == 0:
            if needs_grad(a):
                fn.SliceBackward0()  # torch's node takes its seq_nr before the kernel's check
            raise IndexError("slice() cannot be applied to a 0-dim tensor.")
        return slice_(a, 0, key.start, key.stop, key.step or 1)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and a._data.ndim == 0:
        if key != 0:  # torch's select of a 0-dim tensor checks the bounds (size 0) before the 0-dim test
            raise IndexError(f"index {int(key)} is out of bounds for dimension 0 with size 0")
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                         "C++ to convert a 0-dim tensor to a number")
    if not isinstance(key, tuple):
        key = (key,)
    key = tuple(_as_index_tensor(k) for k in key)
    n_specified = builtins.sum(_index_width(k) for k in key if k is not None and k is not Ellipsis)
    if n_specified > a._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {a._data.ndim}")
    out, dim = a, 0
    advanced: dict[int, np.ndarray] = {}  # dim of the result of the basic indexing -> index array
    indices: list = []  # the index tensors as torch passes them to index (and its node saves): None elsewhere
    masks: list = []  # (mask, dim): checked by index, after its node saved them
    for k in key:
        if isinstance(k, Tensor) and k._data.dtype == np.bool_ and k._data.ndim == 0:
            out = unsqueeze(out, dim)  # torch: a 0-dim mask adds a dim of size 1 and masks it (0 or 1 rows)
            indices.extend([None] * (dim + 1 - len(indices)))
            indices[dim] = make_tensor(np.zeros(1 if bool(k._data) else 0, dtype=np.int64), device=k._device)
            advanced[dim] = indices[dim]._data  # [0] for True, [] for False, as torch's index
            dim += 1
        elif isinstance(k, Tensor) and (k._data.dtype == np.bool_ or k._data.ndim > 0):
            indices.extend([None] * (dim + 1 - len(indices)))
            indices[dim] = k
            if k._data.dtype == np.bool_:
                masks.append((k, dim))
                for j, idx in enumerate(np.nonzero(k._data)):  # a mask is its nonzero() indices
                    advanced[dim + j] = idx
                dim += k._data.ndim
            else:
                if k._data.dtype.kind != "i":
                    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
                advanced[dim] = k._data
                dim += 1
        elif k is Ellipsis:
            dim += a._data.ndim - n_specified
        elif k is None:
            out = unsqueeze(out, dim)
            dim += 1
        elif isinstance(k, bool):
            raise NotImplementedError("engine does not support boolean scalar indexing")
        elif isinstance(k, (int, np.integer)) or (isinstance(k, Tensor) and k._data.ndim == 0
                                                   and k._data.dtype == np.int64):
            size = out._data.shape[dim]
            if not -size <= int(k) < size:  # checked before select, so no node and no seq_nr
                raise IndexError(f"index {int(k)} is out of bounds for dimension {dim} with size {size}")
            out = select(out, dim, int(k))
        elif isinstance(k, slice):
            size = out._data.shape[dim]
            s, e, st = k.indices(size)
            if not (s == 0 and e >= size and st == 1):  # a full slice is skipped, as in PyTorch
                out = slice_(out, dim, k.start, k.stop, k.step or 1)
            dim += 1
        else:
            raise NotImplementedError(
                f"engine supports indexing with ints, slices, None and ...; got {type(k).__name__}")
    if advanced:
        key = tuple(advanced.get(d, slice(None)) for d in range(builtins.max(advanced) + 1))
        return index(out, key, tuple(indices), masks)
    if out is a:
        out = alias(a)
    return out


def _as_index_tensor(k: Any) -> Any:
    """A list of ints or bools indexes like a tensor of them, as in torch."""
    if isinstance(k, range):  # torch reads a range as the list of its ints
        k = list(k)
    if isinstance(k, list):
        return make_tensor(np.asarray(k, dtype=np.bool_ if k and all(isinstance(v, bool) for v in k) else np.int64))
    return k


def _check_mask(a: Tensor, mask: Tensor, dim: int) -> None:
    for j, n in enumerate(mask._data.shape):
        size = a._data.shape[dim + j]
        if n != size:
            raise IndexError(f"The shape of the mask {list(mask._data.shape)} at index {j} does not match the shape "
                             f"of the indexed tensor {list(a._data.shape)} at index {dim + j}")


def _index_width(k: Any) -> int:
    return k._data.ndim if isinstance(k, Tensor) and k._data.dtype == np.bool_ else 1


def _check_index(a: Tensor, key: tuple) -> None:
    """The index kernel's bounds check: its message numbers the index tensors (j), not the dims they index."""
    j = 0
    for d, k in enumerate(key):
        if isinstance(k, np.ndarray):
            size = a._data.shape[d]
            bad = k[(k >= size) | (k < -size)] if k.size else k
            if bad.size:
                raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {j} with size {size}")
            j += 1


def index(a: Tensor, key: tuple, indices: tuple, masks: Sequence[tuple] = ()) -> Tensor:
    """Advanced indexing with index arrays (None-padded by full slices) → IndexBackward0, which saves `indices`
    (the index tensors as torch has them: bool masks as given, None where a dim is taken whole). The kernel's
    checks come after: `masks` (mask, dim) must match the shape they index, and indices be in range."""
    node = save_inputs(fn.IndexBackward0(), key=key, indices=indices, self_sym_sizes=a._data.shape) \
        if needs_grad(a) else None
    for mask, dim in masks:
        _check_mask(a, mask, dim)
    _check_index(a, key)
    data = _index_layout(a._data, key, a._data[key])
    out = _out(data, a)
    if node is not None:
        record(node, (a,), out)
    return out


def _index_layout(src: np.ndarray, key: tuple, data: np.ndarray) -> np.ndarray:
    """`data` (numpy's `src[key]`) laid out as torch's index kernel lays it out: TensorIterator orders the result's
    dims by the strides of `src` restrided to the result (0 across the index dims) and of the broadcast index
    tensors (0 across the other dims), skipping a pair of dims where an operand has stride 0."""
    adv = [d for d, k in enumerate(key) if isinstance(k, np.ndarray)]
    if data.ndim < 2 or not adv or any(key[d].dtype == np.bool_ for d in adv):
        return contiguous_strides(data) if data.ndim >= 2 and _c_ordered(src) else data
    if src.flags.c_contiguous and all(key[d].ndim <= 1 for d in adv):  # the common case: C order, as computed below
        return contiguous_strides(data)
    idx = np.broadcast_arrays(*[key[d] for d in adv])
    rest = [d for d in range(src.ndim) if d not in adv]
    at = adv[0] if adv == list(range(adv[0], adv[-1] + 1)) else 0  # not adjacent: torch moves them to the front
    before, after = [d for d in rest if d < at], [d for d in rest if d >= at]
    item = src.itemsize
    src_strides = tuple(src.strides[d] for d in before) + (0,) * idx[0].ndim + tuple(src.strides[d] for d in after)
    idx_item = idx[0].itemsize
    operands = [np.lib.stride_tricks.as_strided(src, data.shape, src_strides)]
    for i in idx:
        strides = (0,) * len(before) + tuple(s // idx_item * item for s in i.strides) + (0,) * len(after)
        operands.append(np.lib.stride_tricks.as_strided(src, data.shape, strides))
    strides = _layout_strides(data.shape, tuple(operands))
    if tuple(s * data.itemsize for s in strides) == data.strides:
        return data
    out = empty_strided(data.shape, strides, data.dtype)
    np.copyto(out, data)
    return out


def _c_ordered(x: np.ndarray) -> bool:
    """Whether `x`'s dims (of more than one element) go outermost first in memory, dense or not (an unbind()
    slice): torch's index then writes a C-contiguous result."""
    strides = [s for s, n in zip(x.strides, x.shape, strict=True) if n > 1]
    return all(a >= b for a, b in zip(strides, strides[1:], strict=False))


def index_key(a: Tensor, key: tuple, indices: tuple) -> Tensor:
    """`a[key]` for a numpy key inside a derivative formula (IndexBackward0)."""
    return index(a, key, indices)


def index_put_accumulate(a: Tensor, key: tuple, values: Tensor, indices: tuple) -> Tensor:
    """_index_put_impl_(a, indices, values, accumulate=True) on a fresh `a` → IndexPutImplBackward0."""
    node = save_inputs(fn.IndexPutImplBackward0(), key=key, indices=indices, accumulate=True) \
        if needs_grad(a, values) else None
    data = a._data.copy()
    np.add.at(data, key, values._data)
    out = _out(data, a)
    if node is not None:
        record(node, (a, values), out)
    return out


@public("unbind", torch=True, tensor=True)
def unbind(a: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of each slice along `dim` → one UnbindBackward0 shared by all outputs."""
    node = fn.UnbindBackward0() if needs_grad(a) else None
    if a._data.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, a._data.ndim)
    outs = tuple(_view_out(a._data[(slice(None),) * d + (i, Ellipsis)], a, multi_output=True)
                 for i in range(a._data.shape[d]))
    if node is not None:
        node.dim = dim
        record_outputs(node, (a,), outs)
    return outs


@public("split", torch=True, tensor=True)
def split(a: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces along `dim`: equal sizes (SplitBackward0) or given sizes (SplitWithSizesBackward0)."""
    nd = a._data.ndim
    if nd == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = _wrap_dim(dim, nd)
    size = a._data.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
        node = fn.SplitWithSizesBackward0() if needs_grad(a) else None
        if builtins.sum(sizes) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                               f"size at dimension {d}), but got split_sizes={sizes}")
    else:
        step = int(split_size_or_sections)
        node = fn.SplitBackward0() if needs_grad(a) else None
        if step < 0 or (step == 0 and size != 0):
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={step}")
        sizes = [builtins.min(step, size - i) for i in range(0, size, step)] if step else [0]
    starts = np.cumsum([0] + sizes[:-1])
    outs = tuple(_view_out(a._data[(slice(None),) * d + (slice(int(s), int(s) + n),)], a, multi_output=True)
                 for s, n in zip(starts, sizes, strict=True))
    if node is not None:
        node.dim, node.sizes, node.self_sym_sizes = dim, sizes, a._data.shape
        if isinstance(node, fn.SplitWithSizesBackward0):
            node.split_sizes = tuple(sizes)
        else:
            node.split_size = step
        record_outputs(node, (a,), outs)
    return outs


@public("chunk", torch=True, tensor=True)
def chunk(a: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """At most `chunks` equal pieces (the last smaller) → SplitBackward0, as torch splits."""
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: %d" % chunks)
    if a._data.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    size = a._data.shape[_wrap_dim(dim, a._data.ndim)]
    return split(a, (size + chunks - 1) // chunks, dim)


@public("index_select", torch=True, tensor=True)
def index_select(a: Tensor, dim: int, index: Tensor) -> Tensor:
    """Slices at `index` along `dim` → IndexSelectBackward0."""
    node = save_inputs(fn.IndexSelectBackward0(), dim=dim, index=index, self_sym_sizes=a._data.shape) \
        if needs_grad(a) else None
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index._data.dtype != np.int64:
        raise RuntimeError("index_select(): Expected dtype int32/int64 for index but got: "
                           f"{index.dtype}")
    d = _wrap_dim(dim, a._data.ndim)
    idx = index._data.reshape(-1)
    size = a._data.shape[d] if a._data.ndim else 1
    bad = idx[(idx >= size) | (idx < -size)]
    if bad.size:
        raise IndexError("index out of range in self")
    out = _out(np.take(a._data, idx, axis=d) if a._data.ndim else a._data.copy(), a)
    if node is not None:
        record(node, (a,), out)
    return out


def index_add(a: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """a.index_add_(dim, index, source) on a fresh `a` inside a formula → IndexAddBackward0."""
    node = save_inputs(fn.IndexAddBackward0(), dim=dim, index=index, source=source, alpha=1,
                       source_dim=source._data.ndim) if needs_grad(a, source) else None
    data = a._data.copy()
    key = (slice(None),) * _wrap_dim(dim, a._data.ndim) + (index._data.reshape(-1),)
    np.add.at(data, key, source._data)
    out = _out(data, a)
    if node is not None:
        record(node, (a, source), out)
    return out


def alias(a: Tensor) -> Tensor:
    """`a[:]` or `a[...]`: a view with no new node when nothing changes (AliasBackward0)."""
    node = fn.AliasBackward0() if needs_grad(a) else None
    out = _view_out(a._data.view(), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _tensor_list(tensors: Sequence[Tensor]) -> list[Tensor]:
    """cat's and stack's list, checked as torch's argument parser checks it."""
    tensors = list(tensors)
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(x).__name__}")
    return tensors


def expand_shape(a: Tensor, sizes: tuple[int, ...]) -> list[int]:
    """The shape `a.expand(*sizes)` has (-1 keeps a size), with infer_expand_geometry's errors: the dims are
    checked from the last one."""
    nd, n = a._data.ndim, len(sizes)
    if n < nd:
        raise RuntimeError(
            f"expand({cpp_type_name(a.dtype, a._device)}{{{list(a._data.shape)}}}, size={list(sizes)}): the number of "
            f"sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({nd})")
    shape = list(sizes)
    for i in reversed(range(n)):
        j = i - (n - nd)
        if shape[i] == -1:
            if j < 0:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            shape[i] = a._data.shape[j]
        elif j >= 0 and a._data.shape[j] != 1 and a._data.shape[j] != shape[i]:
            raise RuntimeError(expand_mismatch(i, sizes, a._data.shape))
    return shape


def expand_mismatch(i: int, sizes: Any, existing: tuple) -> str:
    """torch's error for expanding `existing` to `sizes` when dim `i` of the target does not fit."""
    return (f"The expanded size of the tensor ({sizes[i]}) must match the existing size "
            f"({existing[i - (len(sizes) - len(existing))]}) at non-singleton dimension {i}.  Target sizes: "
            f"{list(sizes)}.  Tensor sizes: {list(existing)}")


@public("cat", torch=True)
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along `dim` → CatBackward0 with one slot per tensor."""
    tensors = _tensor_list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    node = fn.CatBackward0() if needs_grad(*tensors) else None
    d = _wrap_dim(dim, tensors[0]._data.ndim)
    _check_cat_shapes(tensors, d)
    _check_list_device("cat", tensors)
    # contiguous: torch lays cat's result out by its inputs' suggested memory format (channels_last aside)
    data = np.asarray(np.concatenate([x._data for x in tensors], axis=d), order="C")
    out = _out(data, tensors[0])
    if node is not None:
        node.dim, node.sizes = dim, [x._data.shape for x in tensors]
        record(node, tensors, out)
    return out


def _check_list_device(op: str, tensors: list) -> None:
    check_same_device(op, *[("tensors", t) for t in tensors])  # every element under the one name


def _check_cat_shapes(tensors: list, d: int) -> None:
    first = tensors[0]._data.shape
    for i, x in enumerate(tensors[1:], start=1):
        shape = x._data.shape
        if len(shape) != len(first):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} and {len(shape)}")
        for k, (a, b) in enumerate(zip(first, shape, strict=True)):
            if k != d and a != b:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size {a} but "
                                   f"got size {b} for tensor number {i} in the list.")


@public("stack", torch=True)
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack along a new dim → StackBackward0 with one slot per tensor."""
    tensors = _tensor_list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    node = fn.StackBackward0() if needs_grad(*tensors) else None
    d = _wrap_dim(dim, tensors[0]._data.ndim + 1)
    shape0 = tensors[0]._data.shape
    for i, x in enumerate(tensors):
        if x._data.shape != shape0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shape0)} at entry 0 "
                               f"and {list(x._data.shape)} at entry {i}")
    _check_list_device("stack", tensors)
    out = _out(np.asarray(np.stack([x._data for x in tensors], axis=d), order="C"), tensors[0])  # as cat
    if node is not None:
        node.dim, node.n = dim, len(tensors)
        record(node, tensors, out)
    return out


@public("clone", torch=True)
def clone(a: Tensor, contiguous: bool = False) -> Tensor:
    """A copy with its own memory → CloneBackward0: laid out as `a` (torch's preserve_format), or C-contiguous."""
    node = fn.CloneBackward0() if needs_grad(a) else None
    if contiguous:
        data = np.array(a._data, copy=True, order="C")
    else:
        data = empty_preserving(a._data, a._data.dtype)
        np.copyto(data, a._data)
    out = _out(data, a)
    if node is not None:
        record(node, (a,), out)
    return out


@public("contiguous", tensor=True)
def contiguous(a: Tensor) -> Tensor:
    """`a` itself when contiguous, else a clone."""
    return a if a._data.flags.c_contiguous else clone(a, contiguous=True)


def copy_to_new(src: Tensor, like: Tensor) -> Tensor:
    """AccumulateGrad's clone under grad mode: `empty_strided(like's sizes and strides).copy_(src)` →
    CopyBackwards."""
    node = fn.CopyBackwards() if needs_grad(src) else None
    data = np.empty_like(like._data, dtype=src._data.dtype)  # order "K": like's strides (it is dense here)
    np.copyto(data, src._data)
    out = _out(data, src)
    bump(out._data)  # the copy_ into the new tensor counts as its first version
    if node is not None:
        node.src_dtype, node.src_device = src.dtype, src._device
        record(node, (None, src), out)
    return out


@public("to", tensor=True)
def to(a: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Convert dtype and/or device → ToCopyBackward0; returns `a` itself when nothing changes."""
    from .._device import canonical_device
    from .._device import device as device_cls

    dtype, dev = kwargs.pop("dtype", None), kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for arg in args:
        if isinstance(arg, Tensor):
            dtype, dev = arg.dtype, arg._device
        elif isinstance(arg, (str, device_cls)):
            dev = arg
        else:
            dtype = arg
    new_dtype = as_dtype(dtype).np if dtype is not None else a._data.dtype
    new_device = canonical_device(dev) if dev is not None else a._device
    if new_dtype == a._data.dtype and new_device == a._device and not copy:
        return a
    # An integer or bool result is not differentiable: torch makes no node and takes no seq_nr.
    node = fn.ToCopyBackward0() if new_dtype.kind == "f" and needs_grad(a) else None
    with np.errstate(over="ignore"):  # a float beyond half's range becomes inf, as torch's cast, without a warning
        out = make_tensor(a._data.astype(new_dtype, copy=True), device=new_device)
    if node is not None:
        node.self_dtype, node.self_device = a.dtype, a._device
        record(node, (a,), out)
    return out


def _size_args(args: tuple) -> tuple:
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


@public("permute", tensor=True)
def _permute_method(self: Tensor, *dims: Any) -> Tensor:
    """Tensor.permute: dims as separate ints or as one sequence."""
    return permute(self, _size_args(dims))


@public("numpy_T", tensor_property="T")
def _numpy_t(self: Tensor) -> Tensor:
    """The tensor with its dims reversed."""
    return permute(self, tuple(range(self._data.ndim - 1, -1, -1)))


@public("mT", tensor_property=True)
def _mt(self: Tensor) -> Tensor:
    """The tensor with its last two dims swapped."""
    if self._data.ndim == 0:
        return self  # torch warns and hands back the tensor itself
    if self._data.ndim == 1:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got "
                           f"{self._data.ndim}-D tensor.")
    return transpose(self, -2, -1)


@public("clone", tensor=True)
def _clone_method(self: Tensor, memory_format: Any = None) -> Tensor:
    """A copy with its own memory → CloneBackward0 (memory_format is accepted and ignored)."""
    return clone(self)


@public("expand_as", tensor=True)
def _expand_as(self: Tensor, other: Tensor) -> Tensor:
    """Tensor.expand_as: expand to other's shape."""
    return expand(self, other.shape)


@public("view_as", tensor=True)
def _view_as(self: Tensor, other: Tensor) -> Tensor:
    """Tensor.view_as: view with other's shape."""
    return view(self, other.shape)


@public("reshape_as", tensor=True)
def _reshape_as(self: Tensor, other: Tensor) -> Tensor:
    """Tensor.reshape_as: reshape to other's shape."""
    return reshape(self, other.shape)


@public("to", tensor="float")
def _float(self: Tensor) -> Tensor:
    """self.to(torch.float32)."""
    return to(self, dtype=float32)


@public("to", tensor="half")
def _half(self: Tensor) -> Tensor:
    """self.to(torch.float16)."""
    return to(self, dtype=float16)


@public("to", tensor="double")
def _double(self: Tensor) -> Tensor:
    """self.to(torch.float64)."""
    return to(self, dtype=float64)


@public("to", tensor="long")
def _long(self: Tensor) -> Tensor:
    """self.to(torch.int64)."""
    return to(self, dtype=int64)


@public("to", tensor="int")
def _int(self: Tensor) -> Tensor:
    """self.to(torch.int32)."""
    return to(self, dtype=int32)


@public("to", tensor="bool")
def _bool(self: Tensor) -> Tensor:
    """self.to(torch.bool)."""
    return to(self, dtype=bool_)


@public("to", tensor="cpu")
def _cpu(self: Tensor) -> Tensor:
    """self.to("cpu")."""
    return to(self, "cpu")


@public("to", tensor="cuda")
def _cuda(self: Tensor, device: Any = None) -> Tensor:
    """self.to a cuda device: cuda, an index N (cuda:N), or a device."""
    return to(self, "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))
