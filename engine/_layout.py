"""Memory layout of op results, as PyTorch's TensorIterator lays them out.

A tensor's strides decide whether `view` succeeds, which path `reshape` and `matmul` take, and what
`stride()` and `is_contiguous()` say, so results must have torch's strides, not numpy's. numpy agrees for
results of one operand and for operands of one layout; it differs when operands disagree (`x.mT + y` is laid
out like `x.mT` in torch, C-contiguous in numpy). The rule, checked on torch 2.13 against 5,000 random
pointwise cases, and 3,000 more with size-1 dims, 0-dim operands and numbers (every stride agrees, size-1 dims
included: matmul's fold test reads those):

1. Operands all of the result's shape and all contiguous: the result is contiguous. (A 0-dim operand or a
   number has another shape: TensorIterator's fast setup does not apply, and rule 3 may order size-1 dims
   differently from C order.)
2. Operands all of the result's shape, dense and non-overlapping, with equal strides: the first's strides.
3. Otherwise dims are ordered by TensorIterator's `reorder_dimensions`: an insertion sort where a dim goes
   inside another when the first operand that tells them apart (neither stride 0, i.e. broadcast) has the
   smaller stride there, or equal strides and the smaller size. The result is dense in that order.

Reductions do not go through here: their results are contiguous (`reduce.py`).
"""
from __future__ import annotations

import numpy as np


def contiguous_strides(arr: np.ndarray) -> np.ndarray:
    """`arr` laid out C-contiguously with torch's strides on every dim, size-1 dims included (numpy calls an
    array contiguous whatever the stride of a size-1 dim, and some of its results keep odd ones there)."""
    expected, step = [], arr.itemsize
    for n in reversed(arr.shape):
        expected.append(step)
        step *= max(n, 1)
    if arr.strides == tuple(reversed(expected)):
        return arr
    return np.array(arr, order="C")


def tensor_iterator_layout(res: np.ndarray, operands: tuple[np.ndarray, ...]) -> np.ndarray:
    """`res` (an elementwise result of `operands`) with torch's strides: itself, or a copy laid out anew."""
    if res.ndim < 2:
        return res
    shape = res.shape
    same = True  # loops, not all() of generators: every pointwise result of two dims or more comes here
    for op in operands:
        if not op.flags.c_contiguous:
            if any(op.strides):
                break
            same = False  # broadcast whole (a grad expanded from one number): it tells no two dims apart
        elif same and op.shape != shape:
            same = False
    else:
        if same or 1 not in shape:
            # torch's fast setup (contiguous operands of one shape), or contiguous (or wholly broadcast) operands
            # whose reordering can only differ from C order at size-1 dims, and there are none
            return res if res.flags.c_contiguous else np.ascontiguousarray(res)
    strides = _strides(res.shape, operands)
    item = res.itemsize
    if tuple(s * item for s in strides) == res.strides:
        return res
    out = empty_strided(res.shape, strides, res.dtype)
    np.copyto(out, res)
    return out


def empty_preserving(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """An uninitialised array of `arr`'s shape laid out as torch's preserve_format lays out `clone` and `*_like`:
    `arr`'s own strides when it is dense and non-overlapping, else dense in the order TensorIterator would pick
    for it alone (an expanded or sliced tensor's copy keeps its dims' order, not C order)."""
    if arr.ndim < 2 or arr.flags.c_contiguous:
        return np.empty(arr.shape, dtype=dtype)
    return empty_strided(arr.shape, _strides(arr.shape, (arr,)), dtype)


def empty_strided(shape: tuple, strides: tuple, dtype: np.dtype) -> np.ndarray:
    """torch's empty_strided: exactly these element strides, size-1 dims included (a transpose of a new array
    would give those numpy's own)."""
    order = sorted(range(len(shape)), key=lambda d: -strides[d])  # outermost first
    out = np.empty([shape[d] for d in order], dtype=dtype).transpose(np.argsort(order))
    exact = tuple(st * out.itemsize for st in strides)
    if out.strides != exact:
        out = np.lib.stride_tricks.as_strided(out, shape, exact)  # differs at size-1 dims only
    return out


def _strides(shape: tuple[int, ...], operands: tuple[np.ndarray, ...]) -> tuple[int, ...]:
    """The element strides TensorIterator gives a new output of `shape` computed from `operands`."""
    same = all(op.shape == shape for op in operands)
    if same and all(op.flags.c_contiguous for op in operands):
        return _dense(shape, range(len(shape) - 1, -1, -1))
    elem = [tuple(s // op.itemsize for s in op.strides) for op in operands]
    if same and all(e == elem[0] for e in elem) and non_overlapping_and_dense(shape, elem[0]):
        return elem[0]
    broadcast = [_broadcast_strides(op.shape, e, shape) for op, e in zip(operands, elem, strict=True)]
    return _dense(shape, _reorder_dimensions(shape, broadcast))


def _broadcast_strides(op_shape: tuple, op_strides: tuple, shape: tuple) -> list[int]:
    """An operand's strides over the result's dims: 0 where it is broadcast (missing, or 1 against more)."""
    lead = len(shape) - len(op_shape)
    out = [0] * len(shape)
    for i, (n, st) in enumerate(zip(op_shape, op_strides, strict=True)):
        out[lead + i] = 0 if n == 1 and shape[lead + i] != 1 else st
    return out


def _reorder_dimensions(shape: tuple, strides: list[list[int]]) -> list[int]:
    """TensorIterator's permutation, innermost dim first."""
    perm = list(range(len(shape) - 1, -1, -1))

    def should_swap(d0: int, d1: int) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    for i in range(1, len(shape)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def _dense(shape: tuple, inner_first) -> tuple[int, ...]:
    out = [0] * len(shape)
    acc = 1
    for d in inner_first:
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


def is_non_overlapping_and_dense(arr: np.ndarray) -> bool:
    """torch's is_non_overlapping_and_dense for a numpy array: its elements fill one block, in some dim order."""
    return non_overlapping_and_dense(arr.shape, tuple(s // arr.itemsize for s in arr.strides))


def non_overlapping_and_dense(shape: tuple, strides: tuple) -> bool:
    """is_non_overlapping_and_dense for element strides: every element once, in one block, in some dim order."""
    acc = 1
    for st, n in sorted((st, n) for st, n in zip(strides, shape, strict=True) if n != 1):
        if st != acc:
            return False
        acc *= n
    return True
