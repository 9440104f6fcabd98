"""Tensor factories: tensor, zeros, ones, full, empty, arange, linspace, eye, the random ones and the *_like
forms, with PyTorch 2.13's default dtypes, `size=` and `*size` forms, and errors.

Random factories draw from engine/_random.py's generators (numpy's PCG64): the same seed gives the same values
in the engine, but not PyTorch's values. `empty` and `empty_like` return zeros.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._args import factory_size, infer_data_shape, int_arg
from ._device import canonical_device
from ._dispatch import public
from ._dtype import as_dtype, get_default_dtype, scalar_type_name
from ._random import rng
from ._tensor import Tensor, _coerce_array, make_tensor


def _finish(arr: np.ndarray, requires_grad: bool, device: Any) -> Tensor:
    t = make_tensor(arr, device=canonical_device(device))
    if requires_grad:
        if arr.dtype.kind != "f":  # the factories word it differently from requires_grad_()
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t._requires_grad = True
    return t


@public("tensor", torch=True)
def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of `data` (floats default to float32, ints to int64)."""
    if isinstance(data, Tensor):
        arr = np.array(data._data, copy=True)
    else:
        if not isinstance(data, np.ndarray):
            infer_data_shape(data)
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ValueError(f"could not make a tensor from {type(data).__name__}: {e}") from None
        if arr.dtype == object:
            raise TypeError(f"could not make a tensor from {data!r}: expected numbers or nested lists of numbers")
        if arr.dtype.kind == "f" and not isinstance(data, np.ndarray) and dtype is None:
            arr = arr.astype(get_default_dtype().np)  # Python floats become float32 unless told otherwise
        arr = _coerce_array(arr)
    if dtype is not None:
        arr = arr.astype(as_dtype(dtype).np)
    return _finish(arr, requires_grad, device)


_NUMBER = (int, float, bool, np.number)
_HALF_BELOW_ONE = np.nextafter(np.float16(1), np.float16(0))


def _np_dtype(dtype: Any) -> np.dtype:
    return (as_dtype(dtype) if dtype is not None else get_default_dtype()).np


def _size(fn: str, size: tuple, kwargs: dict) -> tuple[int, ...]:
    """The size of `fn(*size)` or `fn(size=...)`, as PyTorch's parser takes it."""
    if "size" in kwargs:
        if size:
            raise TypeError(f"{fn}() got multiple values for argument 'size'")
        size = (kwargs.pop("size"),)
    if kwargs:
        raise TypeError(f"{fn}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if not size:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "size"')
    return factory_size(fn, size)


def _tuple_size(fn: str, size: Any, position: int = 1) -> tuple[int, ...]:
    """A size that must be one tuple or list of ints (full, randint)."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{fn}(): argument 'size' (position {position}) must be tuple of ints, not "
                        f"{type(size).__name__}")
    return factory_size(fn, (size,))


def _floating(kernel: str, np_dtype: np.dtype) -> None:
    """Random floats need a floating dtype: PyTorch's kernel refuses the others."""
    if np_dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(np_dtype)}\'')


def _uniform(gen: np.random.Generator, shape: tuple, np_dtype: np.dtype) -> np.ndarray:
    """Samples in [0, 1). numpy draws float32 and float64 only: a half sample is a float32 one rounded to nearest,
    and one that rounds up to 1 becomes half's largest below 1 (torch's half samples, too, never reach 1)."""
    if np_dtype == np.float16:
        out = gen.random(shape, dtype=np.float32).astype(np.float16)
        out[out == 1] = _HALF_BELOW_ONE
        return out
    return gen.random(shape, dtype=np_dtype)


def _standard_normal(gen: np.random.Generator, shape: tuple, np_dtype: np.dtype) -> np.ndarray:
    """Standard normal samples; half ones drawn in float32 and rounded (numpy draws float32 and float64 only)."""
    if np_dtype == np.float16:
        return gen.standard_normal(shape, dtype=np.float32).astype(np.float16)
    return gen.standard_normal(shape, dtype=np_dtype)


def _number(value: Any) -> Any:
    return value.item() if isinstance(value, Tensor) and value.ndim == 0 else value


@public("zeros", torch=True)
def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """A tensor of zeros: `zeros(2, 3)`, `zeros((2, 3))` or `zeros(size=(2, 3))`."""
    return _finish(np.zeros(_size("zeros", size, kwargs), dtype=_np_dtype(dtype)), requires_grad, device)


@public("ones", torch=True)
def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """A tensor of ones."""
    return _finish(np.ones(_size("ones", size, kwargs), dtype=_np_dtype(dtype)), requires_grad, device)


@public("empty", torch=True)
def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """A tensor of the given size (zero-filled here, where PyTorch leaves memory as it was)."""
    return _finish(np.zeros(_size("empty", size, kwargs), dtype=_np_dtype(dtype)), requires_grad, device)


@public("full", torch=True)
def full(size: Any, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value`; its dtype follows the value (bool, int64, or the default float)."""
    shape = _tuple_size("full", size)
    fill_value = _number(fill_value)
    if dtype is not None:
        np_dtype = _np_dtype(dtype)
    elif isinstance(fill_value, (bool, np.bool_)):
        np_dtype = np.dtype(np.bool_)
    elif isinstance(fill_value, (int, np.integer)):
        np_dtype = np.dtype(np.int64)
    else:
        np_dtype = _np_dtype(None)
    return _finish(np.full(shape, fill_value, dtype=np_dtype), requires_grad, device)


def _new(t: Tensor, dtype: Any, device: Any) -> tuple[Any, Any]:
    """Tensor.new_*'s defaults: the dtype and device of `t`."""
    return (t.dtype if dtype is None else dtype), (t.device if device is None else device)


@public("new_zeros", tensor=True)
def new_zeros(t: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
              **kwargs: Any) -> Tensor:
    """zeros of `size` with the dtype and device of `t` unless told."""
    dtype, device = _new(t, dtype, device)
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad, **kwargs)


@public("new_ones", tensor=True)
def new_ones(t: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
             **kwargs: Any) -> Tensor:
    """ones of `size` with the dtype and device of `t` unless told."""
    dtype, device = _new(t, dtype, device)
    return ones(*size, dtype=dtype, device=device, requires_grad=requires_grad, **kwargs)


@public("new_empty", tensor=True)
def new_empty(t: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
              **kwargs: Any) -> Tensor:
    """empty (zero-filled here) of `size` with the dtype and device of `t` unless told."""
    dtype, device = _new(t, dtype, device)
    return empty(*size, dtype=dtype, device=device, requires_grad=requires_grad, **kwargs)


@public("new_full", tensor=True)
def new_full(t: Tensor, size: Any, fill_value: Any, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """full of `size` with the dtype and device of `t` unless told."""
    dtype, device = _new(t, dtype, device)
    return full(size, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def _like(t: Tensor, dtype: Any, device: Any) -> tuple[tuple, np.dtype, Any]:
    return t._data.shape, (as_dtype(dtype).np if dtype is not None else t._data.dtype), (device or t._device)


def _filled_like(t: Tensor, value: Any, np_dtype: np.dtype) -> np.ndarray:
    """torch's preserve_format (a transposed tensor's ones are transposed too): see empty_preserving."""
    from ._layout import empty_preserving

    out = empty_preserving(t._data, np_dtype)
    out.fill(value)
    return out


@public("zeros_like", torch=True)
def zeros_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, **_: Any) -> Tensor:
    """Zeros with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    return _finish(_filled_like(t, 0, np_dtype), requires_grad, dev)


@public("ones_like", torch=True)
def ones_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, **_: Any) -> Tensor:
    """Ones with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    return _finish(_filled_like(t, 1, np_dtype), requires_grad, dev)


@public("empty_like", torch=True)
def empty_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False, **_: Any) -> Tensor:
    """A tensor with `t`'s shape, dtype and device (zero-filled here)."""
    shape, np_dtype, dev = _like(t, dtype, device)
    return _finish(_filled_like(t, 0, np_dtype), requires_grad, dev)


@public("full_like", torch=True)
def full_like(t: Tensor, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
              **_: Any) -> Tensor:
    """`fill_value` (cast to the dtype, so 2.7 becomes 2 in an int64 tensor) with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    return _finish(_filled_like(t, _number(fill_value), np_dtype), requires_grad, dev)


@public("rand_like", torch=True)
def rand_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False,
              generator: Any = None, **_: Any) -> Tensor:
    """Uniform samples in [0, 1) with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    _floating("check_uniform_bounds", np_dtype)
    return _finish(_uniform(rng("rand_like", generator), shape, np_dtype), requires_grad, dev)


@public("randn_like", torch=True)
def randn_like(t: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False,
               generator: Any = None, **_: Any) -> Tensor:
    """Standard normal samples with `t`'s shape, dtype and device."""
    shape, np_dtype, dev = _like(t, dtype, device)
    _floating("normal_kernel_cpu", np_dtype)
    return _finish(_standard_normal(rng("randn_like", generator), shape, np_dtype), requires_grad, dev)


@public("arange", torch=True)
def arange(start: Any = None, end: Any = None, step: Any = 1, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in [start, end): int64 when every bound is an int, else the default float dtype."""
    start, end, step = _number(start), _number(end), _number(step)
    if end is None:
        start, end = 0, start
    if start is None:
        start = 0
    for name, position, v in (("start", 0, start), ("end", 1, end), ("step", 2, step)):
        if not isinstance(v, _NUMBER):
            raise TypeError(f"arange(): argument '{name}' (position {position}) must be Number, not "
                            f"{type(v).__name__}")
    is_float = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
    np_dtype = _np_dtype(dtype) if (dtype is not None or is_float) else np.dtype(np.int64)
    if np_dtype.kind in "iub":  # the bounds are cast to the dtype first
        if step != 0 and int(step) == 0:  # a step the cast made zero
            raise ValueError("step must be nonzero")
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return _finish(np.arange(start, end, step, dtype=np.float64 if is_float else None).astype(np_dtype),
                   requires_grad, device)


@public("linspace", torch=True)
def linspace(start: Any, end: Any, steps: Any = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """`steps` values from start to end inclusive (default float dtype), computed as ATen's CPU kernel does:
    the first half up from start, the second half down from end."""
    start, end = _number(start), _number(end)
    if steps is None or not isinstance(steps, (int, np.integer)) or isinstance(steps, bool):
        got = ", ".join(type(v).__name__ for v in (start, end, steps) if v is not None)
        raise TypeError(f"linspace() received an invalid combination of arguments - got ({got}), but expected one "
                        "of:\n * (Number start, Number end, int steps, *, torch.dtype dtype = None, torch.device "
                        "device = None, bool requires_grad = False)")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    np_dtype = _np_dtype(dtype)
    if np_dtype.kind == "b":
        raise NotImplementedError("\"linspace_cpu\" not implemented for 'Bool'")
    idx = np.arange(steps)
    if np_dtype.kind == "f":
        s, e = np_dtype.type(start), np_dtype.type(end)
        step = (e - s) / np_dtype.type(steps - 1) if steps > 1 else np_dtype.type(0)
        idx = idx.astype(np_dtype)
        n = np_dtype.type(steps - 1)
    else:  # integers: the step in double, the values cast (truncated) to the dtype
        s, e = float(int(start)), float(int(end))
        step = (e - s) / (steps - 1) if steps > 1 else 0.0
        n = float(steps - 1)
    values = np.where(np.arange(steps) < steps // 2, s + step * idx, e - step * (n - idx))
    if steps == 1:
        values = np.array([s])
    return _finish(values.astype(np_dtype), requires_grad, device)


@public("eye", torch=True)
def eye(n: Any, m: Any = None, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The n x m (default n x n) identity matrix."""
    n = int_arg("eye", "n", 1, n)
    if m is not None and not (isinstance(m, (int, np.integer)) and not isinstance(m, bool)):
        raise TypeError(f"eye() received an invalid combination of arguments - got (int, {type(m).__name__}), but "
                        "expected one of:\n * (int n, *, torch.dtype dtype = None, torch.device device = None, "
                        "bool requires_grad = False)\n * (int n, int m, *, torch.dtype dtype = None, "
                        "torch.device device = None, bool requires_grad = False)")
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    m = n if m is None else int(m)
    if m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    return _finish(np.eye(n, m, dtype=_np_dtype(dtype)), requires_grad, device)


@public("randn", torch=True)
def randn(*size: Any, generator: Any = None, dtype: Any = None, device: Any = None, requires_grad: bool = False,
          **kwargs: Any) -> Tensor:
    """Standard normal samples (engine values: the same seed repeats them, PyTorch's differ)."""
    shape, np_dtype = _size("randn", size, kwargs), _np_dtype(dtype)
    _floating("normal_kernel_cpu", np_dtype)
    return _finish(_standard_normal(rng("randn", generator), shape, np_dtype), requires_grad, device)


@public("rand", torch=True)
def rand(*size: Any, generator: Any = None, dtype: Any = None, device: Any = None, requires_grad: bool = False,
         **kwargs: Any) -> Tensor:
    """Uniform samples in [0, 1) (engine values: the same seed repeats them, PyTorch's differ)."""
    shape, np_dtype = _size("rand", size, kwargs), _np_dtype(dtype)
    _floating("check_uniform_bounds", np_dtype)
    return _finish(_uniform(rng("rand", generator), shape, np_dtype), requires_grad, device)


@public("randint", torch=True)
def randint(*args: Any, generator: Any = None, dtype: Any = None, device: Any = None, requires_grad: bool = False,
            **kwargs: Any) -> Tensor:
    """Integers drawn uniformly from [low, high): `randint(high, size)` or `randint(low, high, size)`; int64
    unless told otherwise."""
    names = ("low", "high", "size") if len(args) + len(kwargs) == 3 or "low" in kwargs else ("high", "size")
    if len(args) > len(names) or any(k not in names for k in kwargs):
        raise TypeError("randint() received an invalid combination of arguments: expected (int high, tuple of ints "
                        "size) or (int low, int high, tuple of ints size)")
    bound = dict(zip(names, args, strict=False))
    for k, v in kwargs.items():
        if k in bound:
            raise TypeError(f"randint() got multiple values for argument '{k}'")
        bound[k] = v
    if set(bound) != set(names):
        raise TypeError("randint() received an invalid combination of arguments: expected (int high, tuple of ints "
                        "size) or (int low, int high, tuple of ints size)")
    if "low" in bound:  # the three-argument form: PyTorch's parser names no single argument
        if not all(isinstance(bound[k], (int, np.integer)) and not isinstance(bound[k], bool) for k in ("low", "high")):
            got = ", ".join(type(bound[k]).__name__ for k in names)
            raise TypeError(f"randint() received an invalid combination of arguments - got ({got}), but expected "
                            "(int low, int high, tuple of ints size)")
        low, high = int(bound["low"]), int(bound["high"])
    else:
        low, high = 0, int_arg("randint", "high", 1, bound["high"])
    shape = _tuple_size("randint", bound["size"], len(names))
    np_dtype = np.dtype(np.int64) if dtype is None else _np_dtype(dtype)
    if np_dtype.kind == "b" and (low < 0 or high > 2):
        raise RuntimeError("from is out of bounds for bool")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    values = rng("randint", generator).integers(low, high, size=shape, dtype=np.int64)
    return _finish(values.astype(np_dtype), requires_grad, device)


def is_tensor(obj: Any) -> bool:
    """Whether `obj` is an engine Tensor."""
    return isinstance(obj, Tensor)


@public("randperm", torch=True)
def randperm(n: Any, generator: Any = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1, int64 unless told otherwise (engine values: the same seed repeats them,
    PyTorch's differ)."""
    n = int_arg("randperm", "n", 1, n)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    values = rng("randperm", generator).permutation(n)
    return _finish(values.astype(np.int64 if dtype is None else _np_dtype(dtype)), requires_grad, device)


@public("from_numpy", torch=True)
def from_numpy(ndarray: Any) -> Tensor:
    """A tensor sharing the array's memory (writes to either show in both)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return make_tensor(_coerce_array(ndarray))


@public("as_tensor", torch=True)
def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`data` as a tensor, sharing memory where it can: a tensor of that dtype is returned as it is, a numpy
    array of that dtype is shared; numpy scalars keep their dtype."""
    if isinstance(data, Tensor):
        return data if dtype is None or as_dtype(dtype) == data.dtype else data.to(as_dtype(dtype))
    if isinstance(data, np.ndarray) and (dtype is None or as_dtype(dtype).np == data.dtype):
        return _finish(_coerce_array(data), False, device)
    if isinstance(data, np.generic) or (isinstance(data, (list, tuple)) and data
                                        and all(isinstance(v, np.generic) for v in data)):
        data = np.array(data)  # numpy scalars carry their dtype, as an array does
    return tensor(data, dtype=dtype, device=device)
