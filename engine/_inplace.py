"""In-place ops: add_, sub_, mul_, div_, zero_, fill_, copy_, and +=, -=, *=, /=.

Each op computes its out-of-place result, writes it into the tensor's own memory (which its views and
`detach()`es share), and bumps the memory's version (engine/_version.py): a node that saved the old
value then refuses to run backward, with PyTorch's error.

When autograd records the op (grad mode on, and the tensor or an operand requires grad), the out-of-place
op's node becomes the tensor's grad_fn. This is PyTorch's rebase_history for a tensor that is not a view
(engine-semantics §1.9: `f.mul_(2)` makes one MulBackward0 and takes one seq_nr). The node is computed on a copy of
the old value that carries the tensor's old history, so what it saves is the value before the write.

zero_, fill_ and copy_ record ZeroBackward0, FillBackward2 (a number), FillBackward3 (a 0-dim tensor) and
CopyBackwards, as PyTorch does. On a view, the op's node goes inside a CopySlices on the base (engine/_views.py).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from . import _functions as fn
from . import _observer, _ops, _version, _views
from ._dispatch import public
from ._dtype import c_type_name, cpp_type_name, legacy_type_name, scalar_type_name
from ._layout import is_non_overlapping_and_dense
from ._node import InputMetadata
from ._ops._common import broadcast_shape, collect_next_edges, needs_grad, record, save_inputs, with_original_self
from ._ops.pointwise import clamp_entry
from ._state import tls
from ._tensor import ERR_ZEROTENSOR_IMMUTABLE, Tensor, gradient_edge, make_tensor

ERR_LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
ERR_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
               "location. Please clone() the tensor before performing the operation.")
_NUMBER = (int, float, bool, np.number)


def _records(self: Tensor, operands: tuple) -> bool:
    """Whether autograd records this in-place op; raises where PyTorch does, or where agdb cannot yet."""
    if not needs_grad(self, *[o for o in operands if isinstance(o, Tensor)]):
        return False
    check_inplace(self)
    return True


def check_inplace(self: Tensor) -> None:
    """PyTorch's check_inplace for an op with history: views made so that they may not be written, then leaves
    that require grad (and views of them)."""
    info = self._view
    if info is not None:
        _views.check_view_inplace(self)
        if info.base._grad_fn is None and self.requires_grad:  # torch asks the view, and whether its base is a leaf
            raise RuntimeError(ERR_VIEW_LEAF)
    if self._grad_fn is None and self.requires_grad:  # torch's is_leaf() reads the stored grad_fn: a stale view
        raise RuntimeError(ERR_LEAF)  # of a base that got history since is a leaf until its grad_fn is read


ERR_PARTIAL_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                       "single memory location. Please clone() the tensor before performing the operation.")


def _check_no_partial_overlap(self: Tensor, sources: tuple) -> None:
    """torch's assert_no_partial_overlap: an operand that shares some but not all of the written memory (or all of
    it in another order) is refused; one that is the same memory, laid out the same, is fine. Only dense,
    non-overlapping tensors are compared (torch gives up on the others: TOO_HARD)."""
    out = self._data
    for src in sources:
        data = src._data if isinstance(src, Tensor) else None
        if data is None or data is out or not out.size or not data.size or not np.may_share_memory(out, data):
            continue
        if not (is_non_overlapping_and_dense(out) and is_non_overlapping_and_dense(data)):
            continue
        a0, b0 = out.__array_interface__["data"][0], data.__array_interface__["data"][0]
        a1, b1 = a0 + out.nbytes, b0 + data.nbytes
        if (a0, a1) == (b0, b1) and out.strides == data.strides and out.shape == data.shape:
            continue
        raise RuntimeError(ERR_PARTIAL_OVERLAP)


def _write(self: Tensor, value: np.ndarray, sources: tuple = (), fills: bool = False) -> None:
    """Write `value` into the tensor's memory, with PyTorch's checks, and count the write. `sources`: the
    op's tensor operands, checked for partial overlap with the written memory; `fills`: fill_ and zero_, which
    write even an expanded tensor."""
    if sources:
        _check_no_partial_overlap(self, sources)
    if self._zerotensor:
        raise RuntimeError(ERR_ZEROTENSOR_IMMUTABLE)
    if value.shape != self._data.shape:
        raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                           f"{list(value.shape)}")
    if not np.can_cast(value.dtype, self._data.dtype, casting="same_kind"):
        raise RuntimeError(f"result type {scalar_type_name(value)} can't be cast to the desired output type "
                           f"{scalar_type_name(self)}")
    if has_internal_overlap(self._data):
        if not fills:  # fill_, zero_, masked_fill_ and index_put_ skip torch's check
            raise RuntimeError(ERR_OVERLAP)
        # elements share memory: write only those the op changed (index_put_ of one index changes the others
        # that alias it, as torch's kernel does), not the whole result, whose untouched copies would win
        np.copyto(_writable(self._data), value, casting="unsafe", where=value != self._data)
    else:
        np.copyto(_writable(self._data), value, casting="unsafe")
    _version.bump_tensor(self)


def _arithmetic(compute: Callable[[Tensor, Any], Tensor], saves_self: bool = False) -> Callable[..., Tensor]:
    """An in-place form of `compute(self, other)`.

    `saves_self`: the grad of `other` needs the value of self from before the write (mul_, div_). PyTorch
    then saves `self.clone()`, made after the op's node: a CloneBackward0, and one more seq_nr, when self
    requires grad. Checked against torch 2.13: f.mul_(w) takes 2 seq_nrs, f.mul_(2) and f.add_(w) take 1.
    """
    def method(self: Tensor, other: Any, **kwargs: Any) -> Tensor:
        if not _records(self, (other,)):
            if isinstance(other, Tensor):  # the kernel's check, before it computes
                _check_no_partial_overlap(self, (other,))
            _write(self, compute(self, other, **kwargs)._data)
            return self
        stale_at = tls.seq_nr if _views.is_stale(self) else None
        old = _old(self)
        # PyTorch's original_self: a node that saves self saves a clone of it (a CloneBackward0, one more seq_nr),
        # which create_graph then differentiates through.
        result = with_original_self(old, compute, other, **kwargs) if saves_self else compute(old, other, **kwargs)
        return _rebase_refusable(self, result, (other,), stale_at)
    return method


def _rebase_refusable(self: Tensor, result: Tensor, sources: tuple, stale_at: int | None) -> Tensor:
    """_rebase, for an op whose kernel may refuse the write (an expanded or overlapping tensor).

    torch makes the op's node, then collects its edges, which regenerates a stale view's AsStridedBackward0; the
    engine read the old value's grad_fn first, so the two took their seq_nrs the other way round (`stale_at`:
    the counter before, when self was a stale view). The op's node is dropped when the kernel refuses, but the
    view keeps its new grad_fn, whose seq_nr shows: it gets torch's (one after the op's node)."""
    try:
        return _rebase(self, result, sources)
    except RuntimeError:
        view_node, node = self._grad_fn, result._grad_fn
        if stale_at is not None and view_node._seq == stale_at and node is not None and node._seq == stale_at + 1:
            view_node._seq, node._seq = stale_at + 1, stale_at
        raise


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


def _rebase(self: Tensor, result: Tensor, sources: tuple = (), fills: bool = False) -> Tensor:
    """Write `result` into the tensor, whose grad_fn becomes result's node (rebase_history); `fills` as _write's."""
    _write(self, result._data, sources, fills)
    if self._view is not None:
        _rebase_view(self, result._grad_fn)
    else:
        _set_history(self, result._grad_fn, result._output_nr)
    return self


def _set_history(self: Tensor, node: Any, output_nr: int) -> None:
    """Make `node` the tensor's grad_fn.

    As in PyTorch (checked on torch 2.13): tensor hooks registered so far stay on the old grad_fn and see the
    grad of the old value, hooks registered later go on the new one; retain_grad moves to the new grad_fn
    (engine-semantics §7.4), so `.grad` is the grad of the new value.
    """
    old_fn, old_nr = self._grad_fn, self._output_nr
    self._grad_fn, self._output_nr, self._requires_grad = node, output_nr, True
    self._backward_hooks = None  # the old dict stays registered on the old node
    if self._retains_grad and old_fn is not None:
        old_fn._retains_grad_hooks.pop(old_nr, None)
        self._retains_grad = False
        self.retain_grad()


def _rebase_view(view: Tensor, node: Any) -> None:
    """rebase_history for a view: the op's node goes inside a CopySlices that becomes the base's grad_fn, and
    the view's own grad_fn is regenerated at once (AsStridedBackward0 onto the CopySlices)."""
    base = view._view.base
    copy_slices = fn.CopySlices()
    copy_slices.base_geometry = _views.geometry(base, base)
    copy_slices.view_geometry = _views.geometry(view, base)
    copy_slices.fn = node
    edges = [gradient_edge(base)] + list(node.next_edges[1:])
    copy_slices.set_next_edges(edges)
    copy_slices._input_metadata = [InputMetadata(base._data.shape, base.dtype, base._device)]
    if _observer.observers:
        _observer.notify("node_created", copy_slices)
    _set_history(base, copy_slices, 0)
    view.grad_fn  # noqa: B018 - reading it regenerates it, as rebase_history does


def _recorded(self: Tensor, node: Any, inputs: tuple, value: np.ndarray, sources: tuple = (),
              fills: bool = False) -> Tensor:
    """Record `node` over `inputs` for a result holding `value`, then rebase the tensor onto it."""
    result = make_tensor(value, device=self._device)
    record(node, inputs, result)
    return _rebase(self, result, sources, fills)


@public("fill_", tensor=True)
def _fill_value(self: Tensor, value: Any) -> Tensor:
    """fill_: every element becomes `value` (a number or a 0-dim tensor)."""
    data = value._data if isinstance(value, Tensor) else np.asarray(value)
    if data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {data.ndim} "
                           "dimensions.")
    filled = np.full(self._data.shape, data, dtype=self._data.dtype)
    fills = not isinstance(value, Tensor)  # fill_(Tensor) is a copy_ in torch, with copy_'s overlap check
    if not _records(self, (value,)):
        _write(self, filled, fills=fills)
        return self
    if isinstance(value, Tensor):
        return _recorded(self, fn.FillBackward3(), (_old(self), value), filled, fills=fills)
    return _recorded(self, fn.FillBackward2(), (_old(self),), filled, fills=fills)


@public("zero_", tensor=True)
def zero_(self: Tensor) -> Tensor:
    """Fill with zeros in place."""
    zeros = np.zeros_like(self._data)
    if not _records(self, ()):
        _write(self, zeros, fills=True)
        return self
    return _recorded(self, fn.ZeroBackward0(), (_old(self),), zeros, fills=True)


@public("copy_", tensor=True)
def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """Copy `src` (broadcast to this shape, cast to this dtype) into this tensor's memory."""
    if isinstance(src, _NUMBER):  # torch takes a number too, as a 0-dim tensor
        src = make_tensor(np.asarray(src, dtype=self._data.dtype), device=self._device)
    elif not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' (position 1) must be Tensor, not {type(src).__name__}")
    records = _records(self, (src,))  # torch's in-place checks come before the kernel's
    node = fn.CopyBackwards() if records else None  # and its node (a seq_nr) before the kernel's checks
    shape = broadcast_shape(self, src)  # TensorIterator's errors for shapes that do not fit
    if tuple(shape) != self._data.shape:
        raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the broadcast shape "
                           f"{list(shape)}")
    copied = np.broadcast_to(src._data, self._data.shape).astype(self._data.dtype)
    if not records:
        _write(self, copied, (src,))
        return self
    node.src_dtype, node.src_device = src.dtype, src._device
    return _recorded(self, node, (_old(self), src), copied, (src,))


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
                                  f"sub_, mul_, div_, zero_, fill_, copy_, masked_fill_, index_put_ and the "
                                  f"clamp_ family); use the "
                                  f"out-of-place {name.rstrip('_')}")
    return method


for _op in ("pow_", "exp_", "neg_", "sigmoid_", "tanh_", "sqrt_", "abs_", "t_",
            "transpose_", "unsqueeze_", "squeeze_"):
    public(_op, tensor=True)(_not_inplace(_op))


# -- clamp_, clip_, clamp_min_, clamp_max_ -----------------------------------------------------------------
_CLAMPS = {"clamp": _ops.clamp, "clip": _ops.clamp, "clamp_min": _ops.clamp_min, "clamp_max": _ops.clamp_max}


def _clamp_inplace(compute: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """The in-place form of a clamp: its formulas read self, so torch saves `self.clone()`, made after the
    node (one more seq_nr when self requires grad; checked on torch 2.13)."""
    def method(self: Tensor, *bounds: Any) -> Tensor:
        if not _records(self, tuple(b for b in bounds if isinstance(b, Tensor))):
            _write(self, compute(self, *bounds)._data)
            return self
        stale_at = tls.seq_nr if _views.is_stale(self) else None
        return _rebase_refusable(self, with_original_self(_old(self), compute, *bounds), (), stale_at)
    return method


for _name, _compute in _CLAMPS.items():
    _op_name = "clamp_" if _name == "clip" else _name + "_"
    public(_op_name, tensor=_name + "_")(clamp_entry(_name, True, _clamp_inplace(_compute), inplace=True))
    public(_op_name, torch=_name + "_")(clamp_entry(_name, False, _clamp_inplace(_compute), inplace=True))


# -- masked_fill_, index_put_ and `t[key] = value` ----------------------------------------------------------
WARN_MASKED_FILL_EXPANDED = (
    "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
    "operation. This also applies to advanced indexing e.g. tensor[mask] = scalar")


def has_internal_overlap(arr: np.ndarray) -> bool:
    """torch's has_internal_overlap answering YES: some dim of more than one element has stride 0 (an
    expand()ed tensor, which numpy makes read-only, or an as_strided one, which it does not, such as CopySlices'
    slice of a grad for an expanded view). Its TOO_HARD cases are let through, as torch does. An empty tensor is
    non-overlapping and dense to torch, whatever numpy's strides for it."""
    return 0 in arr.strides and arr.size > 0 and any(
        s == 0 and n > 1 for s, n in zip(arr.strides, arr.shape, strict=True))


def _writable(arr: np.ndarray) -> np.ndarray:
    """`arr`, or when it is an expand()ed (read-only) array, a writable alias of it: index_put_ and masked_fill_
    write expanded tensors in torch (fill_ too, see _write), unlike the other in-place ops."""
    return arr if arr.flags.writeable else _version.writable_alias(arr)


ERR_VIEW_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."


@public("masked_fill_", tensor=True)
def masked_fill_(self: Tensor, mask: Tensor, value: Any) -> Tensor:
    """Fill where `mask` (broadcast to this shape) with a number (MaskedFillBackward0) or a 0-dim tensor
    (MaskedFillBackward1)."""
    records = _records(self, (value,))
    try:
        if isinstance(value, Tensor) and value._data.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
        if mask._data.dtype != np.bool_:
            raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                               f"{c_type_name(mask)}")
        broadcast_shape(self, mask)  # TensorIterator's error for a mask that does not broadcast
    except RuntimeError:
        if records:  # the node took its seq_nr, collected its edges and saved the mask before the kernel's checks
            node = (fn.MaskedFillBackward1 if isinstance(value, Tensor) else fn.MaskedFillBackward0)()
            collect_next_edges((self, value) if isinstance(value, Tensor) else (self,))
            save_inputs(node, mask=mask)
        raise
    if has_internal_overlap(self._data):
        warnings.warn(WARN_MASKED_FILL_EXPANDED, UserWarning, stacklevel=2)
    if not records:
        _write(self, _ops.masked_fill(self, mask, value)._data, fills=True)
        return self
    return _rebase(self, _ops.masked_fill(_old(self), mask, value), fills=True)


def _index_key(self: Tensor, indices: Any) -> tuple:
    """index_put_'s `indices` (a tuple or list of index tensors, bool masks among them) as a numpy key."""
    from ._ops.index_put import check_index_put  # noqa: F401 - the module must be loaded for its node
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put_(): argument 'indices' (position 1) must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    key: list = []
    for i, k in enumerate(indices):
        if not isinstance(k, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(k).__name__}")
        key.append(k)
    return _advanced_key(self._data.shape, key)


def _advanced_key(shape: tuple, tensors: list) -> tuple:
    """A numpy key from index tensors (bool masks become their nonzero() indices); None is a full slice."""
    width = sum(1 if k is None else k._data.ndim if k._data.dtype == np.bool_ else 1 for k in tensors)
    if width > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)} (got {width})")
    key: list = []
    for k in tensors:
        if k is None:
            key.append(slice(None))
        elif k._data.dtype == np.bool_:
            _check_mask_shape(shape, k, len(key))
            key.extend(np.nonzero(k._data))
        elif k._data.dtype.kind == "i":
            key.append(k._data)
        else:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    while key and isinstance(key[-1], slice):
        key.pop()
    return tuple(key)


def _check_mask_shape(shape: tuple, mask: Tensor, dim: int) -> None:
    for j, n in enumerate(mask._data.shape):
        if n != shape[dim + j]:
            raise IndexError(f"The shape of the mask {list(mask._data.shape)} at index {j} does not match the shape "
                             f"of the indexed tensor {list(shape)} at index {dim + j}")


@public("index_put_", tensor=True)
def index_put_(self: Tensor, indices: Any, values: Tensor, accumulate: bool = False) -> Tensor:
    """Write (or, with accumulate, add) `values` at `indices` → IndexPutBackward0."""
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put_(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    return _index_put(self, _index_key(self, indices), values, accumulate, tuple(indices))


def _index_put(self: Tensor, key: tuple, values: Tensor, accumulate: bool, indices: tuple) -> Tensor:
    """`indices`: the index tensors as given (None where a dim is taken whole), which the node saves."""
    from ._ops.index_put import index_put, put_checked
    same_dtype = not _to_masked_fill(self, indices, values, accumulate)
    if not _records(self, (values,)):
        put_checked(_writable(self._data), key, values, accumulate, same_dtype)
        _version.bump_tensor(self)
        return self
    return _rebase(self, index_put(_old(self), key, values, accumulate, indices, same_dtype), fills=True)


def _to_masked_fill(self: Tensor, indices: Any, values: Tensor, accumulate: bool) -> bool:
    """torch's canDispatchToMaskedFill: index_put_ of one value (on the CPU) through a single bool mask (the other
    indices None) is masked_fill_(mask, value.item()), which casts the value to the tensor's dtype. (A uint8 mask
    goes there too, and is refused by masked_fill_: the engine has no uint8.)"""
    if accumulate or values._data.size != 1 or values._device != "cpu":
        return False
    masks = [i for i in indices if i is not None]
    return (len(masks) == 1 and isinstance(masks[0], Tensor) and masks[0]._data.dtype == np.bool_
            and masks[0]._device == self._device)


@public("__setitem__", tensor=True)
def setitem(self: Tensor, key: Any, value: Any) -> None:
    """`t[key] = value`, as PyTorch's set_item: basic indexing makes a view that value is copied into,
    index tensors (and bool masks) then go to index_put_ (IndexPutBackward0).

    With autograd recording, a write through a view (ints, slices that are not full, None) makes the view with
    view ops, then the write is an in-place op on that view: PyTorch's CopySlices (engine/_views.py).
    """
    if key is False:
        return
    if isinstance(value, _NUMBER):
        value = make_tensor(np.asarray(value, dtype=self._data.dtype), device=self._device)
    elif not isinstance(value, Tensor):
        raise TypeError(f"can't assign a {type(value).__name__} to a {legacy_type_name(self.dtype, self._device)}")
    view, tensors, is_view = _basic(self, key)
    records = needs_grad(self, value)
    if records and is_view:  # PyTorch slices with view ops (their nodes and seq_nrs), then writes into that view;
        self = _basic_view(self, key)  # a leaf's write is refused by the in-place op, after those and the value's
    if tensors is None:
        _copy_to(self, view, value, records)
        return
    stripped = _strip_leading_ones(value._data.shape)
    if stripped != value._data.shape:
        value = _ops.view(value, *stripped) if stripped else _ops.view(value, ())
    if self._zerotensor:  # torch's ZeroTensor fallback refuses index_put_ before its kernel reads a mask or index
        raise RuntimeError(ERR_ZEROTENSOR_IMMUTABLE)
    try:
        adv = _advanced_key(view.shape, tensors)
    except IndexError:
        if records:  # torch's index_put_ checks the in-place write, makes its node, and only then the index
            from ._ops._common import save_inputs
            from ._ops.index_put import IndexPutBackward0
            check_inplace(self)
            save_inputs(IndexPutBackward0(), key=(), indices=tuple(tensors), accumulate=False)  # packs the indices
        raise
    if not records:
        from ._ops.index_put import put_checked
        put_checked(_writable(view), adv, value, False, not _to_masked_fill(self, tensors, value, False))
        _version.bump_tensor(self)
        return
    _index_put(self, adv, value, False, tuple(tensors))


def _scalar_mask_index(mask: Tensor) -> Tensor:
    """The index torch makes of a 0-dim bool mask over the dim of size 1 it adds: [0] for True, [] for False."""
    return make_tensor(np.zeros(1 if bool(mask._data) else 0, dtype=np.int64), device=mask._device)


def _basic_view(self: Tensor, key: Any) -> Tensor:
    """The view `t[key]` selects before any index tensor applies, made with the view ops (select, slice,
    unsqueeze): each index tensor or mask of `key` stands for full slices over the dims it indexes."""
    from ._ops.shape import getitem

    if not isinstance(key, tuple):
        key = (key,)
    basic: list = []
    for k in (_list_index(k) for k in key):
        if isinstance(k, Tensor) and k._data.dtype == np.bool_ and k._data.ndim == 0:
            basic.append(None)  # a 0-dim mask: a new dim of size 1 (then masked by index_put_)
        elif isinstance(k, Tensor) and (k._data.dtype == np.bool_ or k._data.ndim > 0):
            basic += [slice(None)] * (k._data.ndim if k._data.dtype == np.bool_ else 1)
        else:
            basic.append(k)
    return getitem(self, tuple(basic))


def _strip_leading_ones(shape: tuple) -> tuple:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def _copy_to(self: Tensor, view: np.ndarray, value: Tensor, records: bool) -> None:
    """PyTorch's copy_to(dst, src): copy_ for equal shapes, fill_ for a 0-dim src, else view + expand + copy_."""
    if not records:
        src = value._data.reshape(_strip_leading_ones(value._data.shape))
        _check_expand(src.shape, view.shape, value)
        if has_internal_overlap(view):  # set_item copies (even a number): copy_'s check, unlike fill_
            raise RuntimeError(ERR_OVERLAP)
        np.copyto(_writable(view), np.broadcast_to(src, view.shape), casting="unsafe")
        _version.bump_tensor(self)
        return
    if value._data.shape == self._data.shape:
        copy_(self, value)
    elif value._data.ndim == 0:
        _fill_value(self, value)
    else:  # the value's view, then its expand, take their seq_nrs before a bad shape or a leaf is refused
        src = _ops.view(value, *_strip_leading_ones(value._data.shape))
        if src._data.shape != self._data.shape:
            src = _ops.expand(src, *self._data.shape)
        copy_(self, src)


def _check_expand(src: tuple, dst: tuple, value: Tensor) -> None:
    """expand_inplace's check: `src` (the shape of `value`, leading ones stripped) broadcasts to `dst`."""
    if len(src) > len(dst):
        kind = cpp_type_name(value.dtype, value._device)
        raise RuntimeError(f"expand({kind}{{{list(src)}}}, size={list(dst)}): the number of sizes provided "
                           f"({len(dst)}) must be greater or equal to the number of dimensions in the "
                           f"tensor ({len(src)})")
    for i in range(1, len(src) + 1):
        if src[-i] != 1 and src[-i] != dst[-i]:
            raise RuntimeError(f"The expanded size of the tensor ({dst[-i]}) must match the existing size "
                               f"({src[-i]}) at non-singleton dimension {len(dst) - i}.  Target sizes: "
                               f"{list(dst)}.  Tensor sizes: {list(src)}")


def _basic(self: Tensor, key: Any) -> tuple:
    """Apply the basic part of `key` (ints, slices, None, ...) to the tensor's memory.

    Returns the written-to numpy view, the index tensors left for index_put_ (None when there are none), and
    whether the view is not the whole tensor (PyTorch would write through a view: CopySlices).
    """
    if not isinstance(key, tuple):
        key = (key,)
    key = tuple(_list_index(k) for k in key)
    data = self._data
    n_specified = sum(k._data.ndim if isinstance(k, Tensor) and k._data.dtype == np.bool_ else 1
                      for k in key if k is not None and k is not Ellipsis and not isinstance(k, bool))
    if n_specified > data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {data.ndim}")
    view, dim, real, is_view = data, 0, 0, False  # real: the dim of the tensor itself, for errors
    positions: dict[int, Tensor] = {}  # dim of the view -> the index tensor there
    for k in key:
        if isinstance(k, Tensor) and k._data.dtype == np.bool_ and k._data.ndim == 0:
            # torch: a 0-dim mask adds a dim of size 1 (as None does) and masks it
            view = view[(slice(None),) * dim + (None,)]
            positions[dim] = _scalar_mask_index(k)
            dim, is_view = dim + 1, True
        elif isinstance(k, Tensor) and (k._data.dtype == np.bool_ or k._data.ndim > 0):
            if k._data.dtype != np.bool_ and k._data.dtype.kind != "i":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            positions[dim] = k
            dim += k._data.ndim if k._data.dtype == np.bool_ else 1
            real += k._data.ndim if k._data.dtype == np.bool_ else 1
        elif k is Ellipsis:
            dim += data.ndim - n_specified
            real += data.ndim - n_specified
        elif k is None or k is True:
            view = view[(slice(None),) * dim + (None,)]
            dim, is_view = dim + 1, True
        elif k is False:
            raise NotImplementedError("agdb's engine does not support False inside an index tuple")
        elif isinstance(k, (int, np.integer)) or (isinstance(k, Tensor) and k._data.ndim == 0
                                                   and k._data.dtype.kind == "i"):
            size = view.shape[dim]
            if not -size <= int(k) < size:
                raise IndexError(f"index {int(k)} is out of bounds for dimension {real} with size {size}")
            # The Ellipsis keeps a 0-dim result an array view: a bare int index would give a numpy scalar, a
            # copy that cannot be written to (t[0] = 5.0 on a 1-D tensor).
            view = view[(slice(None),) * dim + (int(k), Ellipsis)]
            real, is_view = real + 1, True
        elif isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            s, e, st = k.indices(view.shape[dim])
            if not (s == 0 and e >= view.shape[dim] and st == 1):
                view = view[(slice(None),) * dim + (k,)]
                is_view = True
            dim, real = dim + 1, real + 1
        else:
            raise NotImplementedError(f"engine supports `t[key] = v` with ints, slices, None, ..., index tensors "
                                      f"and bool masks; got {type(k).__name__}")
    if not positions:
        return view, None, is_view
    tensors: list = []
    d = 0
    while d <= max(positions):
        k = positions.get(d)
        tensors.append(k)
        d += 1 if k is None or k._data.dtype != np.bool_ else max(k._data.ndim, 1)
    return view, tensors, is_view


def _list_index(k: Any) -> Any:
    if isinstance(k, range):  # torch reads a range as the list of its ints
        k = list(k)
    if isinstance(k, list):
        return make_tensor(np.asarray(k, dtype=np.bool_ if k and all(isinstance(v, bool) for v in k) else np.int64))
    return k
