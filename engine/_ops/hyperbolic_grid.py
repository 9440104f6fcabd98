"""sinh, cosh and meshgrid, with the nodes torch 2.13 records (SinhBackward0, CoshBackward0; meshgrid is composite:
a ViewBackward0 then an ExpandBackward0 for each tensor in turn)."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._dispatch import public
from .._functions import _Generated
from .._tensor import Tensor
from .pointwise import _unary
from .shape import expand, view


class SinhBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad * self.cosh().conj()
            from . import mul

            out[0] = mul(grad, cosh(self.self))


class CoshBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad * self.sinh().conj()
            from . import mul

            out[0] = mul(grad, sinh(self.self))


@public("sinh", torch=True, tensor=True)
def sinh(a: Tensor) -> Tensor:
    """Hyperbolic sine → SinhBackward0."""
    return _unary(np.sinh, SinhBackward0, a, "self")


@public("cosh", torch=True, tensor=True)
def cosh(a: Tensor) -> Tensor:
    """Hyperbolic cosine → CoshBackward0."""
    return _unary(np.cosh, CoshBackward0, a, "self")


_NO_INDEXING = ("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.")


@public("meshgrid", torch=True)
def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Grids of 0-D or 1-D tensors: each a view of its tensor expanded to every tensor's numel, as aten's
    meshgrid (with "xy", the first two swap places before and after)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn(_NO_INDEXING, UserWarning, stacklevel=2)
        indexing = "ij"
    size = len(tensors)
    if size == 0:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for i in range(size - 1):
        if tensors[i].dtype != tensors[i + 1].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if tensors[i].device != tensors[i + 1].device:
            raise RuntimeError("meshgrid expects all tensors to have the same device")
    refs = list(tensors)
    swap = False
    if indexing == "xy":
        swap = size >= 2
        if swap:
            refs[0], refs[1] = refs[1], refs[0]
    elif indexing != "ij":
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for r in refs:
        if r.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {r}")
    shape = tuple(r.numel() for r in refs)
    grids = [expand(view(r, tuple(-1 if j == i else 1 for j in range(size))), shape) for i, r in enumerate(refs)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
