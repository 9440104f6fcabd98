"""`engine.nn.Parameter`: a leaf tensor that requires grad and that a Module registers when assigned."""
from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor, init_tensor


class Parameter(Tensor):
    """A Tensor subclass sharing `data`'s memory, a leaf with `requires_grad` (True by default)."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            arr, device = np.empty((0,), dtype=np.float32), "cpu"
        elif isinstance(data, Tensor):
            arr, device = data._data, data._device
        else:
            raise TypeError(f"Parameter(): data must be a Tensor, not {type(data).__name__}")
        if requires_grad and arr.dtype.kind != "f":
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        self = object.__new__(cls)
        init_tensor(self, arr, bool(requires_grad), device)
        return self

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # all done in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        copied = Tensor.__deepcopy__(self, memo)
        out = Parameter(copied, self._requires_grad)
        out._grad = copied._grad
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol: int) -> Any:
        raise TypeError("engine tensors cannot be pickled")
