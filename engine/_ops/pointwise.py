"""Unary pointwise ops: exp, log, sin, cos, tanh, sigmoid, relu, sqrt, abs, sgn, and clamp (number or tensor bounds)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _functions as fn
from .. import _state
from .._args import invalid_combination
from .._dispatch import public
from .._state import tls
from .._tensor import Tensor
from ._common import (
    _arr,
    _float_data,
    _out,
    broadcast_shape,
    common_device,
    needs_grad,
    quietly,
    record,
    result_dtype_of,
    save_inputs,
)


def _unary(np_fn, node_cls, a: Tensor, save: str) -> Tensor:
    """An elementwise op whose node saves its input (`save` "self") or its output ("result")."""
    node = node_cls() if needs_grad(a) else None
    if node is not None and save == "self":
        if tls.original_self is None and not _state.saved_hooks_seen and not _state.inference_seen:
            node.self = a  # save_inputs with nothing to clone, pack or regenerate
        else:
            save_inputs(node, self=a)
    out = _out(quietly(np_fn, _float_data(a)), a)
    if node is not None:
        if save == "result":
            node.result = out
        record(node, (a,), out)
    return out


@public("exp", torch=True, tensor=True)
def exp(a: Tensor) -> Tensor:
    """e ** a → ExpBackward0."""
    return _unary(np.exp, fn.ExpBackward0, a, "result")


@public("log", torch=True, tensor=True)
def log(a: Tensor) -> Tensor:
    """Natural log → LogBackward0."""
    return _unary(np.log, fn.LogBackward0, a, "self")


@public("sin", torch=True, tensor=True)
def sin(a: Tensor) -> Tensor:
    """Sine → SinBackward0."""
    return _unary(np.sin, fn.SinBackward0, a, "self")


@public("cos", torch=True, tensor=True)
def cos(a: Tensor) -> Tensor:
    """Cosine → CosBackward0."""
    return _unary(np.cos, fn.CosBackward0, a, "self")


@public("tanh", torch=True, tensor=True)
def tanh(a: Tensor) -> Tensor:
    """Hyperbolic tangent → TanhBackward0."""
    return _unary(np.tanh, fn.TanhBackward0, a, "result")


def _sigmoid_np(x: np.ndarray) -> np.ndarray:
    w = x.astype(np.float32) if x.dtype == np.float16 else x  # torch's half kernel: float inside, rounded once
    return _arr(1.0 / (1.0 + np.exp(-w))).astype(x.dtype, copy=False)


@public("sigmoid", torch=True, tensor=True)
def sigmoid(a: Tensor) -> Tensor:
    """Logistic sigmoid → SigmoidBackward0."""
    return _unary(_sigmoid_np, fn.SigmoidBackward0, a, "result")


@public("relu", torch=True, tensor=True)
def relu(a: Tensor) -> Tensor:
    """max(a, 0) → ReluBackward0."""
    node = fn.ReluBackward0() if needs_grad(a) else None
    out = _out(np.maximum(a._data, a._data.dtype.type(0)), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


@public("sqrt", torch=True, tensor=True)
def sqrt(a: Tensor) -> Tensor:
    """Square root → SqrtBackward0."""
    return _unary(np.sqrt, fn.SqrtBackward0, a, "result")


@public("abs", torch=True, tensor=("abs", "__abs__"))
def abs(a: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """Absolute value → AbsBackward0."""
    node = save_inputs(fn.AbsBackward0(), self=a) if needs_grad(a) else None
    out = _out(np.abs(a._data), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _sign_np(x: np.ndarray) -> np.ndarray:
    """numpy's sign, with torch's 0 for NaN."""
    out = np.asarray(np.sign(x))  # a ufunc gives a numpy scalar for a 0-dim array
    if out.dtype.kind == "f":
        np.copyto(out, 0, where=np.isnan(out))
    return out


@public("sgn", torch=True, tensor=True)
def sgn(a: Tensor) -> Tensor:
    """Sign → SgnBackward0."""
    # self and result are saved for the complex case of sgn_backward, as torch always does
    node = save_inputs(fn.SgnBackward0(), self=a) if needs_grad(a) else None
    out = _out(_sign_np(a._data), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


@public("sign", torch=True, tensor=True)
def sign(a: Tensor) -> Tensor:
    """Sign → SignBackward0."""
    node = fn.SignBackward0() if needs_grad(a) else None
    out = _out(_sign_np(a._data), a)
    if node is not None:
        record(node, (a,), out)
    return out


@public("log1p", torch=True, tensor=True)
def log1p(a: Tensor) -> Tensor:
    """log(1 + a) → Log1PBackward0."""
    return _unary(np.log1p, fn.Log1PBackward0, a, "self")


@public("expm1", torch=True, tensor=True)
def expm1(a: Tensor) -> Tensor:
    """exp(a) - 1 → Expm1Backward0."""
    return _unary(np.expm1, fn.Expm1Backward0, a, "result")


@public("square", torch=True, tensor=True)
def square(a: Tensor) -> Tensor:
    """a ** 2 (torch decomposes it into pow) → PowBackward0."""
    from .arith import pow

    return pow(a, 2)


def _clamp_data(a: Tensor, lo: Any, hi: Any) -> np.ndarray:
    data = a._data
    with np.errstate(invalid="ignore"):
        if lo is not None:
            data = np.where(np.isnan(data) | (data >= lo), data, np.asarray(lo, dtype=data.dtype))
        if hi is not None:
            data = np.where(np.isnan(data) | (data <= hi), data, np.asarray(hi, dtype=data.dtype))
    return np.asarray(data, dtype=a._data.dtype)


def clamp(a: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - PyTorch's names
    """Limit to [min, max]: numbers → ClampBackward1, tensors (broadcast, promoted) → ClampBackward0."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensors(a, min, max)
    # Made and saving before the check, as in torch.
    node = save_inputs(fn.ClampBackward1(), self=a, min=min, max=max) if needs_grad(a) else None
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    out = _out(_clamp_data(a, min, max), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _clamp_tensors(a: Tensor, lo: Tensor | None, hi: Tensor | None, node_cls: type | None = None) -> Tensor:
    """clamp.Tensor, clamp_min.Tensor and clamp_max.Tensor: the bounds broadcast with `a` and join its type
    promotion; a NaN anywhere gives NaN. The node is made first, so a shape error still takes its seq_nr."""
    node_cls = node_cls or fn.ClampBackward0
    bounds = [b for b in (lo, hi) if b is not None]
    named = {"min": lo} if node_cls is fn.ClampMinBackward1 else {"max": hi} if node_cls is fn.ClampMaxBackward1 \
        else {"min": lo, "max": hi}  # the node's bound slots
    node = save_inputs(node_cls(), self=a, **named) if needs_grad(a, *bounds) else None
    device = common_device(a, *bounds)
    shape = broadcast_shape(a, *bounds)
    dt = result_dtype_of(a, *bounds)
    data = a._data.astype(dt, copy=False)
    if lo is not None:
        data = np.maximum(data, lo._data.astype(dt, copy=False))
    if hi is not None:
        data = np.minimum(data, hi._data.astype(dt, copy=False))
    out = _out(np.broadcast_to(data, shape).astype(dt), device)
    if node is not None:
        record(node, (a, *named.values()), out)
    return out


def clamp_min(a: Tensor, min: Any) -> Tensor:  # noqa: A002
    """max(a, min): a number → ClampMinBackward0, a tensor → ClampMinBackward1."""
    if isinstance(min, Tensor):
        return _clamp_tensors(a, min, None, fn.ClampMinBackward1)
    node = save_inputs(fn.ClampMinBackward0(), self=a, min=min) if needs_grad(a) else None
    out = _out(_clamp_data(a, min, None), a)
    if node is not None:
        record(node, (a,), out)
    return out


def clamp_max(a: Tensor, max: Any) -> Tensor:  # noqa: A002
    """min(a, max): a number → ClampMaxBackward0, a tensor → ClampMaxBackward1."""
    if isinstance(max, Tensor):
        return _clamp_tensors(a, None, max, fn.ClampMaxBackward1)
    node = save_inputs(fn.ClampMaxBackward0(), self=a, max=max) if needs_grad(a) else None
    out = _out(_clamp_data(a, None, max), a)
    if node is not None:
        record(node, (a,), out)
    return out


# -- the public entries: torch's argument parser picks the Number or the Tensor overload ---------------------
_NUMBERS = (int, float, bool, np.number)
_CLAMP_PARAMS = {"clamp": ("min", "max"), "clip": ("min", "max"), "clamp_min": ("min",), "clamp_max": ("max",)}
_CLAMP_IMPL = {"clamp": clamp, "clip": clamp, "clamp_min": clamp_min, "clamp_max": clamp_max}


def _overloads(name: str, method: bool, inplace: bool = False) -> tuple[str, ...]:
    params = _CLAMP_PARAMS[name]
    default = " = None" if len(params) == 2 else ""
    sigs = []
    for kind in ("Tensor", "Number"):
        text = ", ".join(f"{kind} {p}{default}" for p in params)
        sigs.append(text if method else f"Tensor input, {text}" + ("" if inplace else ", *, Tensor out = None"))
    return tuple(sigs)


def _bounds(name: str, method: bool, args: tuple, kwargs: dict, given_args: tuple = (),
            given_kwargs: dict | None = None, inplace: bool = False) -> tuple:
    """The bounds of a call, all numbers or all tensors (None where optional), or the parser's TypeError
    (which lists `given_args` and `given_kwargs` too: a function's input)."""
    params = _CLAMP_PARAMS[name]
    values = dict(zip(params, args, strict=False))  # extra arguments are refused below
    fits = len(args) <= len(params) and all(k in params and k not in values for k in kwargs)
    values.update(kwargs)
    bounds = tuple(values.get(p) for p in params)
    optional = len(params) == 2
    kinds = {"Tensor" if isinstance(v, Tensor) else "Number" if isinstance(v, _NUMBERS) else "bad"
             for v in bounds if v is not None or not optional}
    if fits and len(kinds) <= 1 and "bad" not in kinds:
        return bounds
    arity = len(params) if method else len(params) + 1 if inplace else None  # torch.clamp's out= never counts
    raise TypeError(invalid_combination(name + "_" * inplace, _overloads(name, method, inplace), given_args + args,
                                        kwargs if given_kwargs is None else given_kwargs, arity,
                                        0 if method else 1))


def clamp_entry(name: str, method: bool, impl: Any = None, inplace: bool = False):
    """The public entry of clamp, clip, clamp_min or clamp_max (`inplace`: of their `_` form, done by `impl`),
    as a Tensor method or a torch function."""
    impl = impl or _CLAMP_IMPL[name]
    if method:
        def entry(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
            return impl(self, *_bounds(name, True, args, kwargs, inplace=inplace))
    else:  # `input` may come by keyword, and the parser's message lists it where it came
        def entry(*args: Any, **kwargs: Any) -> Tensor:
            if args:
                return impl(args[0], *_bounds(name, False, args[1:], kwargs, args[:1], inplace=inplace))
            rest = {k: v for k, v in kwargs.items() if k != "input"}
            if "input" not in kwargs:
                raise TypeError(invalid_combination(name + "_" * inplace, _overloads(name, False, inplace), (),
                                                    kwargs))
            return impl(kwargs["input"], *_bounds(name, False, (), rest, (), kwargs, inplace=inplace))
    entry.__doc__ = impl.__doc__
    return entry


CLAMP_NAMES = tuple(_CLAMP_PARAMS)
"""clamp and its kin, each with a method, a function and an in-place form."""

for _name in CLAMP_NAMES:
    public("clamp" if _name == "clip" else _name, torch=_name)(clamp_entry(_name, False))
    public("clamp" if _name == "clip" else _name, tensor=_name)(clamp_entry(_name, True))
