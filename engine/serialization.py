"""torch.save and torch.load for the engine's own files: a pickle in which each tensor is stored as its values, its
dtype and whether it requires grad (and a Parameter as a Parameter), as torch's `_rebuild_tensor_v2` restores it.

What differs from torch, on purpose: the file is a plain pickle, not torch's zip archive, so each library reads only
its own files (a file torch wrote is refused, naming the bridge command); tensors that share memory come back as
separate copies, each contiguous.
"""
from __future__ import annotations

import io
import os
import pickle
from typing import Any

import numpy as np

from ._tensor import Tensor, make_tensor

_ZIP_MAGIC = b"PK\x03\x04"
_WEIGHTS_ONLY = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
                 ("builtins", "complex"), ("builtins", "slice"), ("builtins", "bytearray")}
"""The classes weights_only=True unpickles besides tensors and the builtin containers pickle itself makes."""


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            from .nn.parameter import Parameter

            kind = "parameter" if isinstance(obj, Parameter) else "tensor"
            arr = np.ascontiguousarray(obj._data)  # builtins only, so that weights_only needs no numpy class
            return (kind, arr.dtype.str, arr.shape, arr.tobytes(), bool(obj._requires_grad), obj._device)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: Any, weights_only: bool) -> None:
        super().__init__(file)
        self.weights_only = weights_only

    def persistent_load(self, pid: Any) -> Tensor:
        kind, dtype, shape, raw, requires_grad, device = pid
        arr = np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
        if kind == "parameter":
            from .nn.parameter import Parameter

            return Parameter(make_tensor(arr, device=device), requires_grad)
        return make_tensor(arr, requires_grad, device)

    def find_class(self, module: str, name: str) -> Any:
        if self.weights_only and (module, name) not in _WEIGHTS_ONLY:
            raise pickle.UnpicklingError(
                f"Weights only load failed. The file holds {module}.{name}, which torch.load(weights_only=True) "
                f"does not load; pass weights_only=False if you trust the file.")
        return super().find_class(module, name)


def save(obj: Any, f: Any, pickle_module: Any = pickle, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False) -> None:
    """Write `obj` to `f` (a path or a binary file object)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=max(pickle_protocol, 3)).dump(obj)  # 3: bytes as bytes, not through _codecs
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(buffer.getvalue())
    else:
        f.write(buffer.getvalue())


def load(f: Any, map_location: Any = None, pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args: Any) -> Any:
    """Read back what `save` wrote to `f` (a path or a binary file object). weights_only (the default, as in torch
    2.6 and later) loads tensors, numbers, strings and containers only."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as src:
            data = src.read()
    else:
        data = f.read()
    if data[:4] == _ZIP_MAGIC:
        raise RuntimeError("torch.load: this file was written by real torch's torch.save (a zip archive), which "
                           "agdb's engine does not read; it reads the files the engine's torch.save writes. Save it "
                           "from the same program under the engine, or run the script on real torch with "
                           "`agdb torch SCRIPT`")
    return _Unpickler(io.BytesIO(data), weights_only is not False).load()

