"""torch's legacy tensor types (`torch.FloatTensor`, `torch.LongTensor`, ...): calling one makes a Tensor of
its dtype, from data or from sizes; `isinstance(t, torch.FloatTensor)` asks for a CPU float32 Tensor."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._dtype import bool_, dtype, float32, float64, int32, int64
from ._tensor import Tensor, make_tensor


class _LegacyType(type):
    _dtype: dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls._dtype and obj._device == "cpu"

    def __call__(cls, *args: Any) -> Tensor:
        if args and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return make_tensor(np.zeros(tuple(int(a) for a in args), dtype=cls._dtype.np))  # torch: uninitialised
        if len(args) > 1:
            raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")
        data = args[0] if args else []
        if isinstance(data, Tensor):
            data = data._data
        return make_tensor(np.array(data, dtype=cls._dtype.np))


def _legacy(name: str, dt: dtype) -> type:
    return _LegacyType(name, (), {"_dtype": dt, "__doc__": f"Tensors of {dt} (a legacy constructor)."})


FloatTensor = _legacy("FloatTensor", float32)
DoubleTensor = _legacy("DoubleTensor", float64)
LongTensor = _legacy("LongTensor", int64)
IntTensor = _legacy("IntTensor", int32)
BoolTensor = _legacy("BoolTensor", bool_)

__all__ = ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor"]
