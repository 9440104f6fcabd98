"""index_put (out of place, and the core of index_put_ and `t[indices] = v`) → IndexPutBackward0.

The key is a tuple of numpy index arrays (bool masks already turned into their nonzero() indices), padded by
full slices, as in engine/_ops/shape.index. PyTorch 2.13's formulas (derivatives.yaml, `index_put`):
self: `accumulate ? grad : grad.index_put(indices, zeros_like(values), false)`; values: `grad.index(indices)`,
which the engine then sums to the values' shape when they were broadcast.
"""
from __future__ import annotations

import numpy as np

from .._dtype import scalar_type_name
from .._functions import _Generated
from .._tensor import Tensor, make_tensor
from ._common import _out, needs_grad, record, save_inputs
from .shape import _check_index, index


class IndexPutBackward0(_Generated):
    """`key` is the numpy key; `indices` the index tensors as torch saves them (see IndexBackward0)."""

    __slots__ = ("key", "indices", "accumulate")
    _saved_tensor_names = ("indices",)
    _saved_values = ("accumulate",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad if self.accumulate else index_put(grad, self.key, _zeros_values(grad), False, self.indices)
        if self.should_compute_output(1):
            out[1] = index(grad, self.key, self.indices)


def _zeros_values(grad: Tensor) -> Tensor:
    """zeros_like(values): any zeros broadcastable to the indexed shape write the same (none record)."""
    return make_tensor(np.zeros((), dtype=grad._data.dtype), device=grad._device)


def _shape_str(shape: tuple) -> str:
    return str(list(shape))


def check_index_put(dst: np.ndarray, key: tuple, values: Tensor, same_dtype: bool = True) -> None:
    """PyTorch's checks of index_put_, in its order: indices in range, values broadcastable to the result,
    same dtypes (unless `same_dtype` is False: the write goes to masked_fill_, which casts)."""
    _check_index(make_tensor(dst), key)
    shape = dst[key].shape
    try:
        ok = np.broadcast_shapes(values._data.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {_shape_str(values._data.shape)} cannot be "
                           f"broadcast to indexing result of shape {_shape_str(shape)}")
    if same_dtype and values._data.dtype != dst.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{scalar_type_name(dst)} for the destination and {scalar_type_name(values)} for the "
                           "source.")


def put(dst: np.ndarray, key: tuple, values: np.ndarray, accumulate: bool) -> None:
    """Write (or add) `values` at `key` of `dst` in place."""
    if accumulate:
        np.add.at(dst, key, np.broadcast_to(values, dst[key].shape))
    else:
        dst[key] = values


def put_checked(dst: np.ndarray, key: tuple, values: Tensor, accumulate: bool, same_dtype: bool = True) -> None:
    """check_index_put then put; an index out of range leaves the elements before it written, as torch's CPU
    kernel does (for index arrays that lead the key)."""
    try:
        check_index_put(dst, key, values, same_dtype)
    except IndexError:
        if key and all(isinstance(k, np.ndarray) for k in key):
            arrays = [a.ravel() for a in np.broadcast_arrays(*key)]
            size = arrays[0].size
            bad = np.zeros(size, dtype=bool)
            for d, a in enumerate(arrays):
                bad |= (a >= dst.shape[d]) | (a < -dst.shape[d])
            first = int(np.argmax(bad))
            rest = dst.shape[len(key):]
            shape = np.broadcast_shapes(*(k.shape for k in key)) + rest
            vals = np.broadcast_to(values._data, shape).reshape((size,) + rest)[:first]
            put(dst, tuple(a[:first] for a in arrays), vals, accumulate)
        raise
    put(dst, key, values._data, accumulate)


def index_put(a: Tensor, key: tuple, values: Tensor, accumulate: bool, indices: tuple,
              same_dtype: bool = True) -> Tensor:
    """a.index_put(indices, values, accumulate) out of place → IndexPutBackward0 (`key`: `indices` for numpy)."""
    node = save_inputs(IndexPutBackward0(), key=key, indices=indices, accumulate=accumulate) \
        if needs_grad(a, values) else None
    check_index_put(a._data, key, values, same_dtype)
    data = a._data.copy()
    put(data, key, values._data, accumulate)
    out = _out(data, a)
    if node is not None:
        record(node, (a, values), out)
    return out
