"""Views: which tensors share memory with a base, and what autograd does when either is written in place.

A view op (`select`, slicing, `view`, `transpose`, `unbind`, ...) marks its output with a `ViewInfo` naming
the root base (a view of a view has the first one's base, as in PyTorch) and how the view was made
(`CreationMeta`). The view's memory is a numpy view of the base's, so writes reach both; this module
decides the autograd side (engine-semantics §1.10 and PyTorch's NOTE [ View + Inplace detection ]):

- An in-place op with history on a view records the op's node, then wraps it in a `CopySlices` node that
  becomes the base's grad_fn, and regenerates the view's grad_fn at once (`AsStridedBackward0`, whose
  next edge is the CopySlices): three seq_nrs, in that order (engine-semantics §1.4).
- A view whose memory was written since its grad_fn was set gets a fresh `AsStridedBackward0` the next time
  its grad_fn is read (`attr_version` is the version it was last set at), taking a seq_nr then.
- Views made under no_grad or inference mode, the outputs of ops that return several views (`unbind`,
  `split`, `chunk`) and the views a custom Function returns refuse in-place ops with history, with PyTorch's
  messages (and so does reading their grad_fn after another write changed their memory).

A view requires grad when its own flag is set, it has a grad_fn, or its base requires grad (so a view made
under no_grad of a tensor that requires grad reports requires_grad=True, with no grad_fn and no edge).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._state import tls

# PyTorch's CreationMeta.
DEFAULT, IN_CUSTOM_FUNCTION, MULTI_OUTPUT_NODE, NO_GRAD_MODE, INFERENCE_MODE = range(5)


class ViewInfo:
    """What a view knows of its base: the root base tensor, how the view was made, and the version of the
    shared memory when the view's grad_fn was last set."""

    __slots__ = ("base", "creation_meta", "attr_version")

    def __init__(self, base: Any, creation_meta: int, attr_version: int) -> None:
        self.base = base
        self.creation_meta = creation_meta
        self.attr_version = attr_version


def creation_meta_now(multi_output: bool = False) -> int:
    """How a view made now is marked: grad mode and inference mode first, then several outputs."""
    if tls.inference_mode:
        return INFERENCE_MODE
    if not tls.grad_enabled:
        return NO_GRAD_MODE
    return MULTI_OUTPUT_NODE if multi_output else DEFAULT


def mark_view(out: Any, of: Any, creation_meta: int, version: int) -> None:
    """Make `out` a view of `of`'s root base. A view of a view keeps the stricter creation meta."""
    info = of._view
    if info is not None:
        base = info.base
        # PyTorch's propagate_creation_meta: a DEFAULT view keeps its base view's meta; inference mode sticks.
        if creation_meta == DEFAULT or info.creation_meta == INFERENCE_MODE:
            creation_meta = info.creation_meta
    else:
        base = of
    out._view = ViewInfo(base, creation_meta, version)


# -- geometry ------------------------------------------------------------------------------------------------
def geometry(t: Any, base: Any) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(sizes, strides, storage_offset) of `t`'s memory in elements, relative to `base`'s first element."""
    data, origin = t._data, base._data
    item = data.itemsize
    strides = tuple(s // item for s in data.strides)
    offset = (data.__array_interface__["data"][0] - origin.__array_interface__["data"][0]) // item
    return tuple(data.shape), strides, offset


def strided_indices(sizes: tuple, strides: tuple, offset: int) -> np.ndarray:
    """The flat storage index of every element of a strided view, in the view's (C) order."""
    idx = np.full(sizes, offset, dtype=np.int64)
    for dim, (n, st) in enumerate(zip(sizes, strides, strict=True)):
        shape = [1] * len(sizes)
        shape[dim] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    return idx


# -- errors ----------------------------------------------------------------------------------------------------
_WHY = {
    MULTI_OUTPUT_NODE: (
        " This view is the output of a function that returns multiple views. Such functions do not allow the output "
        "views to be modified inplace. You should replace the inplace operation by an out-of-place one."),
    NO_GRAD_MODE: (
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
        "both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
        "tracked) or both outside (if you want the inplace to be tracked)."),
    INFERENCE_MODE: (
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
        "both the view and the inplace either both inside the inference_mode block (if you don't want the inplace to "
        "be tracked) or both outside (if you want the inplace to be tracked)."),
    IN_CUSTOM_FUNCTION: (
        " This view was created inside a custom Function (or because an input was returned as-is) and the autograd "
        "logic to handle view+inplace would override the custom backward associated with the custom Function, "
        "leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the "
        "custom Function."),
}


def view_error(view: Any, indirect: bool) -> str:
    """PyTorch's handle_view_on_rebase text for a view that may not be written in place: written itself, or
    (`indirect`) through its base or another view of it."""
    from ._node import _op_name

    meta, node = view._view.creation_meta, view._grad_fn
    modified = "its base or another view of its base has been" if indirect else "is being"
    if meta in (INFERENCE_MODE, NO_GRAD_MODE) or node is None:
        prefix = (f"Output {view._output_nr} of {_op_name(node.name())} is a view of a view which was created in"
                  if node is not None else "A view was created in")
        if meta == INFERENCE_MODE:
            head = f"{prefix} inference mode and {modified} modified inplace in normal mode."
        else:
            head = f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    else:
        head = f"Output {view._output_nr} of {_op_name(node.name())} is a view and {modified} modified inplace."
    return head + _WHY[meta]


def check_view_inplace(view: Any) -> None:
    """Refuse an in-place op with history on a view made so that it may not be written (handle_view_on_rebase)."""
    if view._view.creation_meta != DEFAULT:
        raise RuntimeError(view_error(view, indirect=False))


# -- the view's grad_fn ------------------------------------------------------------------------------------------
def view_grad_fn(view: Any) -> Any:
    """The view's grad_fn, regenerated as AsStridedBackward0 when its memory was written since it was set."""
    from ._version import version_of

    info = view._view
    node = view._grad_fn
    base = info.base
    if node is None and not base._requires_grad:
        return None
    current = version_of(view._data)
    if info.attr_version != current:
        if info.creation_meta != DEFAULT:
            raise RuntimeError(view_error(view, indirect=True))
        old = view._grad_fn
        view._output_nr = 0
        node = _as_strided_node(view, base)  # sets the view's grad_fn and attr_version
        _move_hooks(view, old)
    info.attr_version = current
    return node


def is_stale(view: Any) -> bool:
    """Whether reading the tensor's grad_fn regenerates it (a view whose memory was written since it was set)."""
    from ._version import version_of

    info = view._view
    return info is not None and info.attr_version != version_of(view._data) and (
        view._grad_fn is not None or info.base._requires_grad)


def _as_strided_node(view: Any, base: Any) -> Any:
    """AsStridedBackward0 from the base's current history to the view's geometry (one seq_nr)."""
    from ._functions import AsStridedBackward0
    from ._ops._common import record

    node = AsStridedBackward0()
    node.size, node.stride, node.storage_offset = geometry(view, base)
    node.self_geometry = geometry(base, base)
    record(node, [base], view)
    return node


def _move_hooks(view: Any, old: Any) -> None:
    """update_tensor_hooks_on_new_gradfn: hooks registered so far stay on the old node; retain_grad moves."""
    view._backward_hooks = None
    if view._retains_grad and old is not None and old._retains_grad_hooks:
        old._retains_grad_hooks.pop(0, None)
        view._retains_grad = False
        view.retain_grad()


def strided_data(origin: np.ndarray, sizes: tuple, strides: tuple, offset: int) -> np.ndarray:
    """A numpy view of the memory that starts at `origin`'s first element, with element strides and offset.

    Raises:
        RuntimeError: the geometry reaches outside the memory (PyTorch's setStorage check).
    """
    owner = origin
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    item = origin.itemsize
    start = origin.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    needed = 0 if 0 in sizes else offset + 1 + sum((n - 1) * st for n, st in zip(sizes, strides, strict=True))
    available = owner.nbytes // item - start // item
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    if any(st < 0 for st in strides) or needed > available:
        raise RuntimeError(
            f"setStorage: sizes {list(sizes)}, strides {list(strides)}, storage offset {offset}, and itemsize "
            f"{item} requiring a storage size of {needed * item} are out of bounds for storage of size "
            f"{available * item}")
    return np.ndarray(sizes, dtype=origin.dtype, buffer=owner, offset=start + offset * item,
                      strides=tuple(st * item for st in strides))
