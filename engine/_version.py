"""Version counters: how many times a tensor's data was modified in place, shared by every tensor that
shares the data (views, `detach()`), as in PyTorch.

A counter belongs to the numpy array that owns the memory (the root of a view's `.base` chain), so tensors
whose arrays view the same memory see the same version without knowing of each other. Counters are made
on the first in-place write: reading the version of untouched data allocates nothing.
"""
from __future__ import annotations

import functools
import threading
import weakref
from typing import Any

import numpy as np

from . import _state

ERR_INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
    "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it "
    "in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`.")
ERR_INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal "
    "tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.")

_counters: dict[int, list[int]] = {}  # id(owning array) -> [version]
_lock = threading.Lock()


def _owner(arr: np.ndarray) -> np.ndarray:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _bytes_of(owner: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The memory of `owner` (an array laid out in one block, in C or another order) as a new uint8 array whose
    base is a memoryview (so `_owner` stops there), with the address it starts at; None when not one block."""
    flat = owner if owner.flags.c_contiguous else owner.ravel(order="K")
    if flat is not owner and not np.shares_memory(flat, owner):  # ravel had to copy: not one block
        return None
    try:
        memory = np.frombuffer(memoryview(flat).cast("B"), dtype=np.uint8)
    except (TypeError, ValueError, BufferError):
        return None
    return memory, flat.__array_interface__["data"][0]


def _over(memory: np.ndarray, start: int, data: np.ndarray) -> np.ndarray:
    offset = data.__array_interface__["data"][0] - start
    return np.ndarray(data.shape, data.dtype, buffer=memory, offset=offset, strides=data.strides)


def with_own_counter(data: np.ndarray) -> np.ndarray:
    """An array viewing `data`'s memory that counts its in-place writes apart from `data`'s (torch's `.data`:
    same storage, a new version counter): its owner is a new byte array over the same memory. When the memory is
    not one block, the counter stays shared."""
    found = _bytes_of(_owner(data))
    if found is None:
        return data.view()
    arr = _over(*found, data)
    if not data.flags.writeable:
        arr.flags.writeable = False
    return arr


def writable_alias(data: np.ndarray) -> np.ndarray:
    """A writable array over `data`'s elements (an expand()ed, read-only broadcast of writable memory), to write
    through once and drop: its owner is a new byte array, so it must not be kept as a tensor's data.

    Raises:
        RuntimeError: the memory itself is read-only, or not one block.
    """
    owner = _owner(data)
    found = _bytes_of(owner) if owner.flags.writeable else None
    if found is None:
        raise RuntimeError("the tensor's memory cannot be written")
    return _over(*found, data)


def version_of(data: np.ndarray) -> int:
    """The version of the memory `data` views (0 until something writes it in place)."""
    if not _counters:  # nothing was ever written in place: the common case, and the cheap one
        return 0
    base = data.base  # _owner(data), inline: this runs for every saved tensor once anything was written
    while isinstance(base, np.ndarray):
        data = base
        base = data.base
    counter = _counters.get(id(data))
    return counter[0] if counter is not None else 0


def any_writes() -> bool:
    """Whether some live memory was written in place. If not, every version is 0: nothing to check.

    (A counter goes only with its array, and a saved tensor keeps its array alive.)
    """
    return bool(_counters)


def bump(data: np.ndarray) -> None:
    """Count one in-place write to the memory `data` views."""
    owner = _owner(data)
    key = id(owner)
    with _lock:
        counter = _counters.get(key)
        if counter is None:
            # The id may be reused once the array is gone: drop the counter then. The callback is C code only
            # (dict.pop, given the dead reference as its default): a Python one (weakref.finalize) could take a
            # Ctrl-C and the interpreter would drop it ("Exception ignored in ...").
            gone = weakref.ref(owner, functools.partial(_counters.pop, key))
            counter = _counters[key] = [0, gone]
        counter[0] += 1


def set_version(data: np.ndarray, version: int) -> None:
    """Set the version of the memory `data` views (its own counter, as `with_own_counter` made it)."""
    if version:
        bump(data)
        _counters[id(_owner(data))][0] = version


OWNER = type("SavedOutput", (), {"__repr__": lambda self: "<the node's own output>"})()
"""The grad_fn recorded for a saved output: its node itself, which must not hold itself (a reference cycle keeps
a node alive after torch would have freed it, and with it the AccumulateGrads it points to)."""


def saved_versions(tensors: Any, node: Any = None) -> Any:
    """(tensor, its version, its grad_fn, its output_nr) for each tensor `node` saves, or None; a saved output's
    grad_fn, `node` itself, is recorded as OWNER. Under saved_tensors_hooks, the tensors packed by the innermost
    hooks (a SavedRecords, engine/_saved.py).

    Raises:
        RuntimeError: a saved tensor is an inference tensor (torch's SavedVariable check).
    """
    out = []
    for t in tensors:
        data = getattr(t, "_data", None)
        if data is not None:  # version_of and t.grad_fn, inline: every recorded node saving a tensor comes here
            grad_fn = t._grad_fn if t._view is None else t.grad_fn
            out.append((t, version_of(data) if _counters else 0,
                        OWNER if grad_fn is node and node is not None else grad_fn, t._output_nr))
        elif type(t) is tuple:  # a list of saved tensors (index's `indices`); None and numbers are skipped
            out.extend((e, version_of(e._data), e.grad_fn, e._output_nr) for e in t if e is not None)
    out = tuple(out)
    if _state.inference_seen:
        for t, *_ in out:
            if t._inference:
                raise RuntimeError(ERR_INFERENCE_SAVED)
    if _state.saved_hooks_seen and out and _state.tls.saved_hooks:
        from ._saved import pack_with_default_hooks  # NOTE [saved tensors]

        return pack_with_default_hooks(out)
    return out or None


def node_saved_versions(node: Any) -> Any:
    """saved_versions() of every saved tensor of `node`, for record(): those packed already by save_inputs()
    (engine/_ops/_common.py) are kept, and the others, its outputs, are saved after them."""
    early = node._saved_versions
    if early is None:
        records = saved_versions([getattr(node, n, None) for n in node._saved_tensor_names], node)
        if records is None or records.__class__ is tuple:
            return records
    from ._saved import save_rest  # NOTE [saved tensors]: packed by hooks

    return save_rest(node, early or records)


def bump_tensor(t: Any) -> None:
    """Count one in-place write to `t` (after the write, as torch's increment_version): an inference tensor has
    no counter, and outside inference_mode the write is refused (the data is already written, as in torch)."""
    if t._inference and not t._counted_inference:
        if not _state.tls.inference_mode:
            raise RuntimeError(ERR_INFERENCE_INPLACE)
        return
    bump(t._data)
