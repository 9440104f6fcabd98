"""Shared machinery of the ops: recording a node, wrapping Python numbers, type promotion."""
from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

import numpy as np

from .. import _observer, _state, _version, _views
from .._dtype import _BY_NP, from_numpy_dtype
from .._layout import tensor_iterator_layout
from .._node import InputMetadata, Node
from .._state import tls
from .._tensor import Tensor, _wrap_dim, grad_accumulator, gradient_edge, make_tensor
from .._version import OWNER, _owner, node_saved_versions, version_of

_KIND = {np.dtype(np.bool_): 0, np.dtype(np.int64): 1, np.dtype(np.int32): 1, np.dtype(np.float32): 2,
         np.dtype(np.float64): 2, np.dtype(np.float16): 2}


_DEFAULT_OF_KIND = {0: np.dtype(np.bool_), 1: np.dtype(np.int64), 2: np.dtype(np.float32)}


_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_FLOATS = (_F32, np.dtype(np.float64), _F16)


_NUMBER = (int, float, bool, np.number)
_OPERAND = (Tensor, *_NUMBER)


try:  # what np.errstate(all="ignore") sets, without its context manager object (about 1 µs a call)
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
except ImportError:  # another numpy layout: the public context manager
    _extobj_contextvar = None


def quietly(compute: Callable[..., Any], *args: Any) -> Any:
    """compute(*args) under np.errstate(all="ignore") (torch never warns of inf or nan), at the cost of one context
    variable set and reset: the hot pointwise ops and formulas run through here."""
    if _extobj_contextvar is None:
        with np.errstate(all="ignore"):
            return compute(*args)
    global _quiet_from, _quiet
    current = _extobj_contextvar.get()
    if current is not _quiet_from:  # _make_extobj copies the current state (bufsize, callback) but the flags
        _quiet_from, _quiet = current, _make_extobj(all="ignore")
    token = _extobj_contextvar.set(_quiet)
    try:
        return compute(*args)
    finally:
        _extobj_contextvar.reset(token)


_quiet_from = _quiet = None
"""The error state quietly() last set, and the state it was made from: made again only when the caller's state is
another (an errstate or seterr of the user's); both are immutable capsules."""


def needs_grad(*inputs: Tensor | None) -> bool:
    """compute_requires_grad: grad mode is on and some input requires grad."""
    if not tls.grad_enabled:
        return False
    for t in inputs:
        if t is not None and (t._requires_grad or (t._view is not None and t._view.base._requires_grad)):
            return True
    return False


def has_edge(t: Tensor) -> bool:
    """gradient_edge(t).is_valid(), which the generated code asks (should_compute_output) to decide what a node
    saves: a grad_fn or a leaf's accumulator. A view's grad_fn is read, so a stale one regenerates here, as it
    does when torch collects the node's edges: call it on an op's inputs in their order, after making the node.
    (A view made under no_grad requires grad but has no edge; one whose base got history since has one.)"""
    if t._view is None:
        return t._grad_fn is not None or t._requires_grad
    return t.grad_fn is not None or t._requires_grad  # a view made a leaf by requires_grad_() has an accumulator


def collect_next_edges(inputs: Sequence[Tensor | None]) -> list[tuple]:
    """One edge per input slot; (None, 0) for inputs that do not require grad."""
    return [gradient_edge(t) if t is not None else (None, 0) for t in inputs]


def save_inputs(node: Node, **inputs: Any) -> Node:
    """Save what `node` keeps of the op's inputs (tensors, and the other arguments) right after the node was made,
    before the op checks its arguments and runs its kernel, as torch's generated code does: under
    saved_tensors_hooks the tensors are packed now, in `_saved_tensor_names` order, so an op that then fails has
    packed them too. record() saves the rest (outputs) after the kernel. An in-place op's old value
    (tls.original_self, engine/_inplace.py) is saved as a clone of it, made here (torch's `original_self`)."""
    original = tls.original_self
    early = _state.saved_hooks_seen or _state.inference_seen  # packed, or refused, now
    if original is not None or early:
        # torch collects the next edges before it saves or clones: stale view inputs get their AsStridedBackward0
        # in input order first (saving reads grad_fn, which would regenerate them in `_saved_tensor_names` order)
        for value in inputs.values():
            if isinstance(value, Tensor) and value._view is not None:
                value.grad_fn  # noqa: B018 - reading regenerates it
    if original is not None:
        tls.original_self = None  # the op's own node takes it; nodes made while cloning do not
        copy = None
        for name, value in inputs.items():
            if value is original:
                if copy is None:
                    from .shape import clone
                    copy = clone(original)
                inputs[name] = copy
    for name, value in inputs.items():
        setattr(node, name, value)
    if early:
        from .._saved import save_early

        save_early(node, tuple(inputs))
    return node


def with_original_self(old: Tensor, compute: Callable[..., Tensor], *args: Any, **kwargs: Any) -> Tensor:
    """compute(old, ...) for an in-place op computed out of place on `old`, the value before the write: its node
    saves a clone of `old` where it would save `old` (save_inputs())."""
    tls.original_self = old
    try:
        return compute(old, *args, **kwargs)
    finally:
        tls.original_self = None


def record(node: Node, inputs: Sequence[Tensor | None], out: Tensor) -> Tensor:
    """Attach `node` as `out`'s grad_fn with one edge per input (set_next_edges + set_history)."""
    if node._has_parent:  # something read its topological_nr already: set_next_edges raises torch's error
        node.set_next_edges(collect_next_edges(inputs))
    else:  # node.set_next_edges(collect_next_edges(inputs)) in one loop, with no call per input
        edges = []
        topo = node._topo
        for t in inputs:
            if t is None:
                edges.append((None, 0))
                continue
            child = t._grad_fn if t._view is None else _views.view_grad_fn(t)  # gradient_edge(t), inline
            if child is not None:
                edges.append((child, t._output_nr))
            elif t._requires_grad:
                child = grad_accumulator(t)
                edges.append((child, 0))
            else:
                edges.append((None, 0))
                continue
            child._has_parent = True  # child._topological_nr(): reading it freezes the child
            if topo <= child._topo:
                topo = child._topo + 1
        node.next_edges = edges
        node._topo = topo
    data = out._data
    dt = _BY_NP.get(data.dtype)  # from_numpy_dtype's fast path, inline
    node._input_metadata = [InputMetadata(data.shape, dt if dt is not None else from_numpy_dtype(data.dtype),
                                          out._device)]
    out._grad_fn = node
    if out._view is not None:  # the version the view's grad_fn belongs to (engine/_views.py)
        out._view.attr_version = version_of(out._data)
    out._requires_grad = True
    if node._saved_tensor_names:  # what backward will check: the saved tensors' versions now
        node._saved_versions = _saved_records(node)
    if _observer.observers:
        _observer.notify("node_created", node)
    return out


def keep_outputs_unowned(node: Node, records: Any) -> Any:
    """Keep each output `node` saved as torch's SavedVariable keeps one: its memory, without the output tensor
    (whose grad_fn is `node`). The slot and the record take a new tensor on the same memory with no history, so
    that the node and its output do not hold each other: torch frees such a node, and the AccumulateGrads it
    points to, with the output's last reference, where a cycle would wait for Python's cycle collector (a later
    `backward(inputs=[leaf])` would then find the leaf's old accumulator where torch makes an Identity). Every
    reader gives the output back with this node as grad_fn (unpack_plain, Node._unpack_outputs), as torch's
    unpack does. Records packed by saved-tensor hooks are the hooks' to keep."""
    if records is None or records.__class__ is not tuple:
        return records
    kept = None
    for i, record in enumerate(records):
        t = record[0]
        if record[2] is OWNER and t._grad_fn is node:
            alias = _unowned(t)
            for key, value in node._saved_items():
                if value is t:
                    node._set_saved(key, alias)
            if kept is None:
                kept = list(records)
            kept[i] = (alias,) + record[1:]
    return records if kept is None else tuple(kept)


def _saved_records(node: Node) -> Any:
    """node_saved_versions(node), inline for the common case: nothing saved early, no saved-tensor hooks and no
    inference tensor ever, every saved value a Tensor or None."""
    if node._saved_versions is not None or _state.saved_hooks_seen or _state.inference_seen:
        return keep_outputs_unowned(node, node_saved_versions(node))
    records = []
    for name in node._saved_tensor_names:
        t = getattr(node, name, None)
        if t is None:
            continue
        if not isinstance(t, Tensor):  # a tuple of tensors (index's `indices`)
            return keep_outputs_unowned(node, node_saved_versions(node))
        grad_fn = t._grad_fn if t._view is None else t.grad_fn
        if grad_fn is node:  # its own output: kept unowned (keep_outputs_unowned; no inference tensor here)
            alias = _unowned(t)
            object.__setattr__(node, name, alias)
            records.append((alias, version_of(t._data) if _version._counters else 0, OWNER, t._output_nr))
        else:
            records.append((t, version_of(t._data) if _version._counters else 0, grad_fn, t._output_nr))
    return tuple(records) if records else None


def _unowned(t: Tensor) -> Tensor:
    """A new tensor on `t`'s memory with no history: how a node keeps its own saved output (keep_outputs_unowned)."""
    alias = make_tensor(t._data, device=t._device)
    alias._inference = t._inference
    if t._zerotensor:
        alias._zerotensor = True
    return alias


def _arr(x: Any) -> np.ndarray:
    return x if type(x) is np.ndarray else np.asarray(x)


def _out(arr: Any, like: Tensor | str) -> Tensor:
    """Wrap an op's result on `like`'s device (or on the device named by `like`).

    A result viewing `like`'s memory is an inference tensor iff `like` is one (see alias_tensor)."""
    if type(arr) is not np.ndarray:  # _arr(arr), inline
        arr = np.asarray(arr)
    if like.__class__ is str:
        return make_tensor(arr, device=like)
    t = make_tensor(arr, device=like._device)
    if _state.inference_seen and t._inference is not like._inference and _owner(t._data) is _owner(like._data):
        t._inference = like._inference
    return t


def result_device(a: Tensor, b: Tensor) -> str:
    """Where a binary op's result lives: the non-CPU operand's device, if any (checked by _binary)."""
    return a._device if a._device != "cpu" else b._device


def scalar_tensor(value: Any, like: Tensor) -> Tensor:
    """Wrap a Python number as a 0-dim tensor that does not drive type promotion (a wrapped number)."""
    cls = value.__class__
    if cls is float:  # the common cases first, as the general branches below would make them
        t = make_tensor(np.array(value), device=like._device)
        t._is_wrapped_number = True
        return t
    if cls is int:
        return _wrapped_number(np.array(value, dtype=np.int64), like)
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, np.bool_)):
        arr = np.array(bool(value))
    elif isinstance(value, (int, np.integer)):
        arr = np.array(int(value), dtype=np.int64)
    elif isinstance(value, (float, np.floating)):
        arr = np.array(float(value), dtype=np.float64)
    else:
        raise TypeError(f"unsupported operand type: expected a Tensor or a Python number, got {type(value).__name__}")
    return _wrapped_number(arr, like)


def _wrapped_number(arr: np.ndarray, like: Tensor) -> Tensor:
    t = make_tensor(arr, device=like._device)
    t._is_wrapped_number = True
    return t


def _tier(t: Tensor) -> int:
    return 0 if t._is_wrapped_number else (1 if t._data.ndim == 0 else 2)


def result_dtype(a: Tensor, b: Tensor) -> np.dtype:
    """PyTorch's type promotion for two operands: category first, then dimensioned > 0-dim > number."""
    da, db = a._data.dtype, b._data.dtype
    if da == db and not (a._is_wrapped_number and b._is_wrapped_number):
        return da
    ka, kb = _KIND[da], _KIND[db]
    if ka != kb:
        hi = a if ka > kb else b
        return _DEFAULT_OF_KIND[builtins.max(ka, kb)] if hi._is_wrapped_number else hi._data.dtype
    ta = 0 if a._is_wrapped_number else (1 if a._data.ndim == 0 else 2)  # _tier(a) and _tier(b), inline
    tb = 0 if b._is_wrapped_number else (1 if b._data.ndim == 0 else 2)
    if ta != tb:
        return (a if ta > tb else b)._data.dtype
    if ta == 0:
        return _DEFAULT_OF_KIND[ka]
    return np.promote_types(da, db)


def _promote(a: np.dtype | None, b: np.dtype) -> np.dtype:
    """promote_types over the engine's dtypes: the higher category wins (long with float is float)."""
    if a is None or a == b:
        return b
    ka, kb = _KIND[a], _KIND[b]
    return (a if ka > kb else b) if ka != kb else np.promote_types(a, b)


def result_dtype_of(*tensors: Tensor) -> np.dtype:
    """TensorIterator's result type over any number of operands: dimensioned tensors, 0-dim tensors and
    wrapped numbers are promoted within their tier, and a lower tier wins only with a higher category."""
    tiers: list[np.dtype | None] = [None, None, None]  # wrapped numbers, 0-dim, dimensioned
    for t in tensors:
        tier, dt = _tier(t), t._data.dtype
        tiers[tier] = _promote(tiers[tier], _DEFAULT_OF_KIND[_KIND[dt]] if tier == 0 else dt)
    return _combine(tiers[2], _combine(tiers[1], tiers[0]))


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """combine_categories: a lower tier's dtype counts only if its category is higher (or `higher` is bool)."""
    if higher is None:
        return lower
    if lower is None or _KIND[higher] == 2:
        return higher
    if higher == np.bool_ or _KIND[lower] == 2:
        return _promote(higher, lower)
    return higher


def common_device(*tensors: Tensor | None) -> str:
    """TensorIterator's device rule: CPU 0-dim tensors and numbers go anywhere; others must agree.

    The first non-CPU operand sets the common device, and a disagreeing operand is reported against it,
    so `cpu + cuda:0` names cuda:0 first, as PyTorch does.
    """
    if len(tensors) == 2 and tensors[0] is not None and tensors[1] is not None and \
            tensors[0]._device == tensors[1]._device:
        return tensors[0]._device  # the common case of every binary op: nothing to reconcile
    present = [t for t in tensors if t is not None and not (
        t._device == "cpu" and (t._data.ndim == 0 or t._is_wrapped_number))]
    if not present:
        return "cpu"
    device = next((t._device for t in present if t._device != "cpu"), "cpu")
    for t in present:
        if t._device != device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{device} and {t._device}!")
    return device


def check_same_device(op: str, *pairs: tuple[str, Tensor | None], **named: Tensor | None) -> str:
    """The device check of non-TensorIterator kernels (mm, cat, ...): every argument on the first's device.

    Arguments come as keywords (`self=a, mat2=b`) or as (name, tensor) pairs when names repeat.
    """
    if not pairs and len(named) == 2:  # mm, dot, ...: two tensors on one device, the common case
        a, b = named.values()
        if a is not None and b is not None and a._device == b._device:
            return a._device
    tensors = [(name, t) for name, t in [*pairs, *named.items()] if t is not None]
    common = tensors[0][1]._device
    for name, t in tensors[1:]:
        if t._device != common:
            backend = "CUDA" if any(x._device.startswith("cuda") for _, x in tensors) else "CPU"
            raise RuntimeError(f"Expected all tensors to be on the same device, but got {name} is on {t._device}, "
                               f"different from other tensors on {common} (when checking argument in method "
                               f"wrapper_{backend}_{op})")
    return common


def _binary(np_fn, a: Tensor, b: Tensor, float_only: bool = False) -> np.ndarray:
    if a._device != b._device:  # else common_device has nothing to check
        common_device(a, b)
    da = a._data.dtype
    if b._is_wrapped_number and not a._is_wrapped_number and da in _FLOATS:
        dt = da  # result_dtype's answer for a float tensor with a Python number, without the call
    else:
        dt = result_dtype(a, b)
    if float_only and _KIND[dt] < 2:
        dt = _F32
    try:
        res = _arr(np_fn(a._data, b._data))
    except ValueError:
        raise RuntimeError(
            f"The size of tensor a ({_mismatch(a, b)[0]}) must match the size of tensor b "
            f"({_mismatch(a, b)[1]}) at non-singleton dimension {_mismatch(a, b)[2]}") from None
    if res.dtype != dt:
        if dt == _F16:  # torch rounds out-of-range values to inf without a word; numpy's cast warns
            with np.errstate(over="ignore"):
                res = res.astype(dt)
        else:
            res = res.astype(dt)
    if res.ndim > 1 and not (a._data.flags.c_contiguous and b._data.flags.c_contiguous
                             and (1 not in res.shape or a._data.shape == b._data.shape)):
        res = tensor_iterator_layout(res, (a._data, b._data))  # torch's strides, not numpy's (see _layout)
    return res


def broadcast_shape(*tensors: Tensor) -> tuple[int, ...]:
    """The broadcast shape, or TensorIterator's error naming the first two tensors that disagree."""
    try:
        return np.broadcast_shapes(*(t._data.shape for t in tensors))
    except ValueError:
        for i, a in enumerate(tensors):
            for b in tensors[i + 1:]:
                try:
                    np.broadcast_shapes(a._data.shape, b._data.shape)
                except ValueError:
                    sa, sb, dim = _mismatch(a, b)
                    raise RuntimeError(f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at "
                                       f"non-singleton dimension {dim}") from None
        raise


def _mismatch(a: Tensor, b: Tensor) -> tuple[int, int, int]:
    sa, sb = a._data.shape, b._data.shape
    n = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    for i in range(n - 1, -1, -1):
        if sa[i] != sb[i] and sa[i] != 1 and sb[i] != 1:
            return sa[i], sb[i], i
    return sa[-1], sb[-1], n - 1


def _pair(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    if not isinstance(a, Tensor):
        a = scalar_tensor(a, b)
    if not isinstance(b, Tensor):
        if b.__class__ is float:  # `y * 1.0001`: scalar_tensor's first case, inline
            b = make_tensor(np.array(b), device=a._device)
            b._is_wrapped_number = True
        else:
            b = scalar_tensor(b, a)
    return a, b


def _float_data(a: Tensor) -> np.ndarray:
    d = a._data
    return d if d.dtype.kind == "f" else d.astype(np.float32)


def _dims(dim: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({_wrap_dim(d, ndim) for d in dim}))
    return dims


def _strides(a: Tensor) -> tuple[int, ...]:
    item = a._data.itemsize
    return tuple(s // item for s in a._data.strides)



def binary_operator(op):
    """An operator that defers (NotImplemented) to Python for operands it cannot take, as torch does."""
    def method(self: Tensor, other: Any) -> Any:
        if not isinstance(other, _OPERAND):
            return NotImplemented
        return op(self, other)
    return method


def record_outputs(node: Node, inputs: Sequence[Tensor | None], outs: Sequence[Tensor]) -> None:
    """record() for a node with several differentiable outputs: output i is slot i of the node."""
    node.set_next_edges(collect_next_edges(inputs))
    node._input_metadata = [InputMetadata(o._data.shape, from_numpy_dtype(o._data.dtype), o._device) for o in outs]
    for i, o in enumerate(outs):
        o.grad_fn, o._output_nr, o._requires_grad = node, i, True
    if node._saved_tensor_names:
        node._saved_versions = keep_outputs_unowned(node, node_saved_versions(node))
    if _observer.observers:
        _observer.notify("node_created", node)
