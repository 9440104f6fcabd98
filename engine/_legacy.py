"""torch's legacy tensor types (`torch.FloatTensor`, `torch.LongTensor`, ...): calling one makes a Tensor of
its dtype, from data or from sizes; `isinstance(t, torch.FloatTensor)` asks for a CPU float32 Tensor."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._dtype import bool_, dtype, float16, float32, float64, int32, int64, legacy_type_name
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


def _legacy(dt: dtype) -> type:
    name = legacy_type_name(dt).removeprefix("torch.")
    return _LegacyType(name, (), {"_dtype": dt, "__doc__": f"Tensors of {dt} (a legacy constructor)."})


FloatTensor = _legacy(float32)
DoubleTensor = _legacy(float64)
HalfTensor = _legacy(float16)
LongTensor = _legacy(int64)
IntTensor = _legacy(int32)
BoolTensor = _legacy(bool_)

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "BoolTensor"]
