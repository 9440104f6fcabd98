"""nn.functional's smooth_l1_loss, huber_loss, binary_cross_entropy and one_hot, as torch 2.13 writes them in
Python around its kernels: the size check or warning first, then broadcast_tensors (an expand where needed).

Imported by nn/functional.py before it builds its table, so these entries are among its names."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._dispatch import public
from .._ops import losses, nn_extra
from .._tensor import Tensor, make_tensor


def _no_legacy(size_average: Any, reduce: Any) -> None:
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average and reduce are deprecated; use reduction=")


def _size_warning(input: Tensor, target: Tensor) -> None:  # noqa: A002 - torch's names
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=4)


@public("smooth_l1_loss", functional=True)
def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,  # noqa: A002
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 * d**2 / beta where |d| < beta, else |d| - 0.5 * beta, reduced → SmoothL1LossBackward0; beta 0 is
    l1_loss (SubBackward0, AbsBackward0, MeanBackward0/SumBackward0)."""
    _size_warning(input, target)
    _no_legacy(size_average, reduce)
    a, t = losses.broadcast_pair(input, target)
    if beta == 0.0:
        return nn_extra.l1_loss(a, t, reduction)
    enum = nn_extra.reduction_enum(reduction)
    return losses.smooth_l1_loss(a, t, enum, float(beta))


@public("huber_loss", functional=True)
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,  # noqa: A002
               weight: Tensor | None = None) -> Tensor:
    """0.5 * d**2 where |d| < delta, else delta * (|d| - 0.5 * delta), reduced → HuberLossBackward0."""
    if weight is not None:
        raise NotImplementedError("agdb's engine does not implement huber_loss's weight=; leave it at None")
    _size_warning(input, target)
    a, t = losses.broadcast_pair(input, target)
    enum = nn_extra.reduction_enum(reduction)
    return losses.smooth_l1_loss(a, t, enum, float(delta), huber=True)


@public("binary_cross_entropy", functional=True)
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,  # noqa: A002
                         size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities → BinaryCrossEntropyBackward0 (slots self, target)."""
    _no_legacy(size_average, reduce)
    enum = nn_extra.reduction_enum(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if weight is not None:
        weight = weight.expand(_infer_size(tuple(target.shape), tuple(weight.shape)))
    return losses.binary_cross_entropy(input, target, weight, enum)


def _infer_size(a: tuple, b: tuple) -> tuple:
    """torch._C._infer_size: the broadcast of two sizes, with its message."""
    n = max(len(a), len(b))
    out = []
    for i in range(n - 1, -1, -1):
        offset = n - 1 - i
        da = a[len(a) - 1 - offset] if offset < len(a) else 1
        db = b[len(b) - 1 - offset] if offset < len(b) else 1
        if da != db and da != 1 and db != 1:
            from .._dtype import Size
            raise RuntimeError(f"Attempting to broadcast a dimension of length {db} at {-1 - offset}! Mismatching "
                               f"argument at index 1 had {Size(b)!r}; but expected shape should be broadcastable "
                               f"to [{', '.join(str(s) for s in a)}]")
        out.append(da if db == 1 else db)
    return tuple(reversed(out))


@public("one_hot", functional=True)
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 rows of zeros with a 1 at each index, one more dim of `num_classes` (inferred when -1)."""
    data = tensor._data
    if data.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if data.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(data.max()) + 1
    if data.size:
        if data.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if data.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    elif num_classes < 1 and num_classes != -1:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(data.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, data[..., None], 1, axis=-1)
    return make_tensor(out, device=tensor._device)
