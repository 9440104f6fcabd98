"""dtypes and sizes with PyTorch's names and reprs."""
from __future__ import annotations

import numpy as np

__all__ = ["dtype", "float32", "float64", "float16", "bfloat16", "int64", "int32", "bool_", "Size", "get_default_dtype",
           "as_dtype", "scalar_type_name", "legacy_type_name", "cpp_type_name", "c_type_name"]


class dtype:
    """A tensor element type, printed as PyTorch prints it (`torch.float32`)."""

    __slots__ = ("name", "np", "is_floating_point", "_kind", "_itemsize")

    def __init__(self, name: str, np_dtype: np.dtype, kind: int) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = kind == 2
        self._kind = kind  # 0 bool, 1 integer, 2 floating: PyTorch's promotion categories
        self._itemsize = self.np.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self._itemsize

    def __repr__(self) -> str:
        # Error messages quote dtypes the way PyTorch does, so a torch snippet reads the same.
        return f"torch.{self.name}"

    def __reduce__(self):  # dtypes are singletons
        return (as_dtype, (self.name,))


float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
float16 = dtype("float16", np.float16, 2)  # numpy's half: each op rounds its result to half, as torch's CPU kernels
int64 = dtype("int64", np.int64, 1)
int32 = dtype("int32", np.int32, 1)
bool_ = dtype("bool", np.bool_, 0)



class _Absent(dtype):
    """A dtype torch has and the engine names but cannot hold: numpy has no such element type. Comparing, printing
    and mapping it work (a program may name it in a table); making a tensor of it raises."""

    __slots__ = ()

    def __init__(self, name: str, itemsize: int) -> None:  # noqa: D107 - no numpy dtype to give the base class
        object.__setattr__(self, "name", name)
        self.is_floating_point = True
        self._kind = 2
        self._itemsize = itemsize

    @property
    def np(self) -> np.dtype:  # type: ignore[override]
        raise NotImplementedError(f"agdb's engine has no {self.name} tensors (numpy has no such dtype); run the "
                                  "program on real torch with `agdb torch SCRIPT`")


bfloat16 = _Absent("bfloat16", 2)

_BY_NP = {d.np: d for d in (float32, float64, float16, int64, int32, bool_)}
_BY_NAME = {d.name: d for d in (float32, float64, float16, bfloat16, int64, int32, bool_)}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "long": int64, "int": int32})


def get_default_dtype() -> dtype:
    """The dtype of floating tensors made from Python floats: float32, as in PyTorch."""
    return float32


def as_dtype(value: object) -> dtype:
    """Map a dtype, a numpy dtype or a name to one of the engine's dtypes.

    Raises:
        TypeError: for element types the engine does not support.
    """
    if isinstance(value, dtype):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    try:
        np_dtype = np.dtype(value)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"unsupported dtype {value!r}: engine supports float32, float64, float16, int64, int32 and "
                        "bool") from None
    if np_dtype in _BY_NP:
        return _BY_NP[np_dtype]
    if np_dtype.kind == "f":
        return float64 if np_dtype.itemsize > 4 else float32 if np_dtype.itemsize > 2 else float16
    if np_dtype.kind in "iu":
        return int64
    raise TypeError(f"unsupported dtype {value!r}: engine supports float32, float64, float16, int64, int32 and "
                    "bool")


def from_numpy_dtype(np_dtype: np.dtype) -> dtype:
    """The engine dtype of a numpy array's dtype (fast path for arrays the engine made)."""
    found = _BY_NP.get(np_dtype)
    return found if found is not None else as_dtype(np_dtype)


# c10's ScalarType names: torch's kernels print them ("expected scalar type Half") and the legacy tensor types are
# named after them (torch.HalfTensor).
_SCALAR_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                      "int64": "Long", "int32": "Int", "bool": "Bool"}
# The C++ element types, as torch's messages that print one name them (its compiler's demangled name).
_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                 "int64": "long int", "int32": "int", "bool": "bool"}
# Types whose C++ name (CPUFloatType) torch's Python layer rewrites to the legacy name in a C++ error message; Bool
# and BFloat16 came later and keep theirs (checked on torch 2.13: `expand(CPUBoolType{[2, 3]}, ...)`).
_REWRITTEN_IN_ERRORS = frozenset(("float32", "float64", "float16", "int64", "int32"))


def _of(value: object) -> dtype:
    """The engine dtype of a dtype, a numpy dtype, a name, or anything with a `dtype` (a tensor, an array)."""
    if isinstance(value, (dtype, np.dtype, str, type)):
        return as_dtype(value)
    return as_dtype(value.dtype)  # type: ignore[attr-defined]


def scalar_type_name(value: object) -> str:
    """c10's name of the element type (Float, Double, Half, Long, Int, Bool) of a dtype or of a tensor."""
    return _SCALAR_TYPE_NAMES[_of(value).name]


def c_type_name(value: object) -> str:
    """The C++ element type of a dtype or of a tensor, as some of torch's messages print it: float, double,
    c10::Half, long int."""
    return _C_TYPE_NAMES[_of(value).name]


def legacy_type_name(value: object, device: str = "cpu") -> str:
    """The legacy tensor type's name, as `Tensor.type()` and `torch.typename` give it: torch.HalfTensor,
    torch.cuda.FloatTensor."""
    return ("torch.cuda." if device.startswith("cuda") else "torch.") + scalar_type_name(value) + "Tensor"


def cpp_type_name(value: object, device: str = "cpu") -> str:
    """A tensor's type as torch's C++ error messages print it (Tensor::toString): the legacy name, except for the
    types torch's Python layer does not rewrite (CPUBoolType, CPUBFloat16Type)."""
    if _of(value).name in _REWRITTEN_IN_ERRORS:
        return legacy_type_name(value, device)
    return ("CUDA" if device.startswith("cuda") else "CPU") + scalar_type_name(value) + "Type"


class Size(tuple):
    """A tensor shape: a tuple of ints that prints as `torch.Size([2, 3])`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds."""
        n = 1
        for s in self:
            n *= s
        return n
