"""Argument checks with the wording of PyTorch's argument parser, for the engine's public entry points."""
from __future__ import annotations

from typing import Any

DEVICE_TYPES = ("cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, "
                "meta, hpu, mtia, privateuseone")
"""The device types PyTorch 2.13 lists when it refuses a device string."""

_REDUCTION_SIGNATURES = (" * (*, torch.dtype dtype = None)\n"
                         " * (tuple of ints dim, bool keepdim = False, *, torch.dtype dtype = None)\n")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or type(v).__name__ in ("int64", "int32")


def int_arg(fn: str, name: str, position: int, value: Any) -> int:
    """`value` as an int, or TypeError "fn(): argument 'name' (position k) must be int, not str"."""
    if not _is_int(value):
        raise TypeError(f"{fn}(): argument '{name}' ({_position(position)}) must be int, not {type(value).__name__}")
    return int(value)


def _position(position: int) -> str:
    return f"position {position}"


def size_arg(fn: str, name: str, args: tuple) -> tuple[int, ...]:
    """Sizes given as ints or as one tuple/list of ints (`zeros(2, 3)`, `zeros((2, 3))`)."""
    values = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    for v in values:
        if not _is_int(v):
            bad = args[0] if len(args) == 1 and not isinstance(args[0], (tuple, list)) else v
            raise TypeError(f"{fn}(): argument '{name}' (position 1) must be tuple of ints, not {type(bad).__name__}")
    return tuple(int(v) for v in values)


def factory_size(fn: str, args: tuple) -> tuple[int, ...]:
    """A factory's size argument, refusing negative sizes with PyTorch's wording."""
    shape = size_arg(fn, "size", args)
    for d in shape:
        if d < 0:
            if fn == "zeros":
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {d}: {list(shape)}")
    return shape


def reduction_dim(fn: str, dim: Any) -> Any:
    """The dim of sum/mean: None, an int or a tuple of ints; anything else gets the parser's message."""
    if dim is None or _is_int(dim):
        return dim
    if isinstance(dim, (tuple, list)) and all(_is_int(d) for d in dim):
        return tuple(dim)
    raise TypeError(f"{fn}() received an invalid combination of arguments - got ({type(dim).__name__}), but "
                    f"expected one of:\n{_REDUCTION_SIGNATURES}")


def required_dim(fn: str, dim: Any) -> int:
    """softmax/log_softmax's dim, which has no default."""
    if dim is None:
        raise TypeError(f'{fn}() missing 1 required positional arguments: "dim"')
    return int_arg(fn, "dim", 1, dim)


def infer_data_shape(data: Any) -> None:
    """Check nested Python data as torch.tensor() does: numbers only, no ragged lists."""
    _check_level(data, 0)


def _check_level(data: Any, dim: int) -> int | None:
    """Returns the length of `data` if it is a sequence, else None; raises on bad data."""
    if isinstance(data, (list, tuple)):
        lengths = [_check_level(item, dim + 1) for item in data]
        first = lengths[0] if lengths else None
        for item, n in zip(data, lengths, strict=True):
            if n != first:
                if first is None:
                    raise TypeError(f"must be real number, not {type(item).__name__}")
                if n is None:
                    raise ValueError(
                        f"expected sequence of length {first} at dim {dim + 1} (got {type(item).__name__})")
                raise ValueError(f"expected sequence of length {first} at dim {dim + 1} (got {n})")
        return len(data)
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if isinstance(data, (bool, int, float)) or hasattr(data, "dtype"):
        return None
    raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")


def _py_type_name(value: Any) -> str:
    """A value's type as the argument parser names it: `float`, `Tensor`, `Parameter`, `numpy.float64`."""
    cls = type(value)
    if cls.__module__ == "builtins" or cls.__module__.startswith("agdb.engine"):
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


def invalid_combination(fn: str, signatures: tuple[str, ...], args: tuple, kwargs: dict,
                        arity: int | None = None, unmarked: int = 0) -> str:
    """The argument parser's "received an invalid combination of arguments" message.

    `signatures` are the overloads as torch prints them. The parser says why each overload failed only when the
    call gave exactly `arity` arguments (None for torch.* functions whose `out=` makes the count differ): then,
    for overloads with defaults, every keyword is called incorrect (its name is read with the default
    attached), and otherwise every argument but the first `unmarked` (a function's input) is marked as a bad
    type. Keywords are listed in reverse of the order given, as torch 2.13 lists them.
    """
    shown = [_py_type_name(v) for v in args]
    keywords = list(reversed(kwargs.items()))
    shown_kw = [f"{k}={_py_type_name(v)}" for k, v in keywords]
    got = ", ".join(shown + shown_kw) if shown else "".join(k + ", " for k in shown_kw)
    lines = [f"{fn}() received an invalid combination of arguments - got ({got}), but expected one of:"]
    explain = arity is not None and len(args) + len(kwargs) == arity
    for sig in signatures:
        lines.append(f" * ({sig})")
        if not explain:
            continue
        if kwargs and "=" in sig:
            lines.append("      didn't match because some of the keywords were incorrect: "
                         + ", ".join(k for k, _ in keywords))
        else:
            marked = shown[:unmarked] + [f"!{s}!" for s in shown[unmarked:]] + [f"!{k}!" for k in shown_kw]
            desc = ", ".join(marked) if shown else "".join(k + ", " for k in marked)
            lines.append(f"      didn't match because some of the arguments have invalid types: ({desc})")
    return "\n".join(lines) + "\n"
