"""Arithmetic ops (+ - * / **, reciprocal, neg) and the scalar forms derivative formulas use."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _functions as fn
from .. import _state
from .._dispatch import public
from .._layout import contiguous_strides
from .._state import tls
from .._tensor import Tensor
from ._common import (
    _OPERAND,
    _binary,
    _float_data,
    _out,
    _pair,
    binary_operator,
    broadcast_shape,
    common_device,
    has_edge,
    needs_grad,
    record,
    result_device,
    save_inputs,
    scalar_tensor,
)


def add(a: Any, b: Any, alpha: float = 1) -> Tensor:
    """a + alpha * b → AddBackward0 (a Python scalar still gets a slot)."""
    a, b = _pair(a, b)
    node = fn.AddBackward0() if needs_grad(a, b) else None
    data = _binary(np.add, a, b) if alpha == 1 else _binary(lambda x, y: x + alpha * y, a, b)
    out = _out(data, result_device(a, b))
    if a._zerotensor and b._zerotensor:  # torch: a sum of ZeroTensors is one
        out._zerotensor = True
    if node is not None:
        node.alpha = alpha
        record(node, (a, b), out)
    return out


def sub(a: Any, b: Any, alpha: float = 1) -> Tensor:
    """a - alpha * b → SubBackward0."""
    a, b = _pair(a, b)
    if a._data.dtype == np.bool_ and b._data.dtype == np.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
                           "`^` or `logical_xor()` operator instead.")
    node = fn.SubBackward0() if needs_grad(a, b) else None
    data = _binary(np.subtract, a, b) if alpha == 1 else _binary(lambda x, y: x - alpha * y, a, b)
    out = _out(data, result_device(a, b))
    if a._zerotensor and b._zerotensor:
        out._zerotensor = True
    if node is not None:
        node.alpha = alpha
        record(node, (a, b), out)
    return out


def rsub(a: Tensor, other: Any, alpha: float = 1) -> Tensor:
    """other - alpha * a for a Python scalar `other` → RsubBackward1 (one slot)."""
    b = scalar_tensor(other, a)
    node = fn.RsubBackward1() if needs_grad(a) else None
    out = _out(_binary(lambda x, y: y - alpha * x, a, b), a)
    if node is not None:
        node.alpha = alpha
        record(node, (a,), out)
    return out


def mul(a: Any, b: Any) -> Tensor:
    """a * b → MulBackward0."""
    a, b = _pair(a, b)
    node = fn.MulBackward0() if needs_grad(a, b) else None
    if node is not None:  # each saved only when needed for the other input's grad, as the generated code does
        ea, eb = has_edge(a), has_edge(b)  # in input order: a stale view regenerates as collect_next_edges does
        if tls.original_self is None and not _state.saved_hooks_seen and not _state.inference_seen:
            node.self = a if eb else None  # save_inputs with nothing to clone, pack or regenerate
            node.other = b if ea else None
        else:
            save_inputs(node, self=a if eb else None, other=b if ea else None)
    out = _out(_binary(np.multiply, a, b), result_device(a, b))
    if a._zerotensor or b._zerotensor:  # torch: a product with a ZeroTensor is one
        out._zerotensor = True
    if node is not None:
        record(node, (a, b), out)
    return out


def mul_scalar(a: Tensor, s: float) -> Tensor:
    """a * s for a C++ double inside a derivative formula → MulBackward1 (one slot)."""
    node = save_inputs(fn.MulBackward1(), other=s) if needs_grad(a) else None
    out = _out(_binary(np.multiply, a, scalar_tensor(s, a)), a)
    if node is not None:
        record(node, (a,), out)
    return out


def div(a: Any, b: Any) -> Tensor:
    """a / b (true division) → DivBackward0."""
    a, b = _pair(a, b)
    node = None
    if needs_grad(a, b):
        node = fn.DivBackward0()
        has_edge(a)  # first: a stale view regenerates in input order
        save_inputs(node, self=a if has_edge(b) else None, other=b)
    with np.errstate(divide="ignore", invalid="ignore"):
        data = _binary(np.true_divide, a, b, float_only=True)
    out = _out(data, result_device(a, b))
    if a._zerotensor:  # torch: a ZeroTensor divided is one
        out._zerotensor = True
    if node is not None:
        record(node, (a, b), out)
    return out


def div_scalar(a: Tensor, s: float) -> Tensor:
    """a / s inside a derivative formula → DivBackward1."""
    node = save_inputs(fn.DivBackward1(), other=s) if needs_grad(a) else None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _out(_binary(np.true_divide, a, scalar_tensor(s, a), float_only=True), a)
    if node is not None:
        record(node, (a,), out)
    return out


def sub_scalar(a: Tensor, s: float) -> Tensor:
    """a - s inside a derivative formula → SubBackward1."""
    node = fn.SubBackward1() if needs_grad(a) else None
    out = _out(_binary(np.subtract, a, scalar_tensor(s, a)), a)
    if node is not None:
        record(node, (a,), out)
    return out


def add_scalar(a: Tensor, s: float) -> Tensor:
    """a + s inside a derivative formula → AddBackward1."""
    node = fn.AddBackward1() if needs_grad(a) else None
    out = _out(_binary(np.add, a, scalar_tensor(s, a)), a)
    if node is not None:
        record(node, (a,), out)
    return out


def rdiv(a: Tensor, other: Any) -> Tensor:
    """other / a for a Python scalar: reciprocal then multiply, as PyTorch does."""
    return mul(reciprocal(a), other)


@public("reciprocal", tensor=True)
def reciprocal(a: Tensor) -> Tensor:
    """1 / a → ReciprocalBackward0."""
    node = fn.ReciprocalBackward0() if needs_grad(a) else None
    with np.errstate(divide="ignore"):
        out = _out(np.reciprocal(_float_data(a)), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


@public("neg", tensor=("neg", "__neg__"))
def neg(a: Tensor) -> Tensor:
    """-a → NegBackward0."""
    if a._data.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    node = fn.NegBackward0() if needs_grad(a) else None
    out = _out(np.negative(a._data), a)
    if node is not None:
        record(node, (a,), out)
    return out


@public("pow", torch=True, tensor=True)
def pow(a: Any, exponent: Any) -> Tensor:  # noqa: A001 - PyTorch's name
    """a ** exponent: PowBackward0 (scalar exponent), PowBackward1 (tensor), PowBackward2 (scalar base)."""
    if not isinstance(a, Tensor):
        return _pow_scalar_base(a, exponent)
    if isinstance(exponent, Tensor):
        return _pow_tensor(a, exponent)
    return _pow_scalar_exp(a, exponent)


def _pow_scalar_exp(a: Tensor, exponent: float) -> Tensor:
    node = save_inputs(fn.PowBackward0(), self=a, exponent=exponent) if needs_grad(a) else None
    e = scalar_tensor(exponent, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _out(_binary(np.power, a, e), a)
    if node is not None:
        record(node, (a,), out)
    return out


def _pow_tensor(a: Tensor, e: Tensor) -> Tensor:
    node = save_inputs(fn.PowBackward1(), self=a, exponent=e) if needs_grad(a, e) else None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _out(_binary(np.power, a, e), a)
    if node is not None:
        node.result = out
        record(node, (a, e), out)
    return out


def _pow_scalar_base(base: float, e: Tensor) -> Tensor:
    node = save_inputs(fn.PowBackward2(), self=base, exponent=e) if needs_grad(e) else None
    b = scalar_tensor(base, e)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        res = _binary(np.power, b, e, float_only=e._data.dtype.kind == "f")
    # pow.Scalar's meta function sets its output with no strides, so it is contiguous whatever the exponent's
    # layout (pow.Tensor_Tensor with a 0-dim base follows the exponent's)
    out = _out(contiguous_strides(res), e)
    if node is not None:
        node.result = out
        record(node, (e,), out)
    return out


def compare(np_fn, a: Any, b: Any) -> Tensor:
    """Elementwise comparison: a bool tensor, never recorded."""
    a, b = _pair(a, b)
    try:
        data = np_fn(a._data, b._data)
    except ValueError:
        broadcast_shape(a, b)  # TensorIterator's error for shapes that do not broadcast
        raise
    return _out(data, common_device(a, b))


@public("logical_and", torch=True, tensor=True)
def logical_and(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise and of truth values (no grad)."""
    return compare(np.logical_and, a, b)


@public("logical_or", torch=True, tensor=True)
def logical_or(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise or of truth values (no grad)."""
    return compare(np.logical_or, a, b)


@public("logical_xor", torch=True, tensor=True)
def logical_xor(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise exclusive or of truth values (no grad)."""
    return compare(np.logical_xor, a, b)


@public("logical_not", torch=True, tensor=True)
def logical_not(a: Tensor) -> Tensor:
    """Elementwise not of truth values (no grad)."""
    return _out(np.logical_not(a._data), a)


@public("isclose", torch=True, tensor=True)
def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol * |b|, computed with the ops torch's composite uses (their seq_nrs too)."""
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"{a.dtype} did not match {b.dtype}")
    close = compare(np.equal, a, b)
    if equal_nan and a._data.dtype.kind == "f":
        close = _out(close._data | (np.isnan(a._data) & np.isnan(b._data)), a)
    if rtol == 0 and atol == 0:
        return close
    from .pointwise import abs as abs_

    with np.errstate(all="ignore"):
        allowed = add_scalar(abs_(mul_scalar(b, rtol)), atol)
        actual = abs_(sub(a, b))
        finite = _out(np.isfinite(actual._data), a)
        if needs_grad(actual):
            abs_(actual)  # at::isfinite(x) is (x == x) * (x.abs() != inf): one more node
        return _out(close._data | (finite._data & (actual._data <= allowed._data)), a)


@public("allclose", torch=True, tensor=True)
def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether every element is close (a Python bool; records nothing, as in torch)."""
    from .._state import tls

    saved, tls.grad_enabled = tls.grad_enabled, False
    try:
        return bool(isclose(a, b, rtol, atol, equal_nan)._data.all())
    finally:
        tls.grad_enabled = saved


@public("equal", torch=True, tensor=True)
def equal(a: Tensor, b: Tensor) -> bool:
    """Same shape and the same elements (a Python bool)."""
    return a._data.shape == b._data.shape and bool(np.array_equal(a._data, b._data))


@public("isnan", torch=True, tensor=True)
def isnan(a: Tensor) -> Tensor:
    """Elementwise NaN test (no grad)."""
    return _out(np.isnan(a._data), a)


def bitwise_not(a: Tensor) -> Tensor:
    """`~a`: logical not of a bool tensor, bitwise not of an integer one (no grad)."""
    return _out(np.logical_not(a._data) if a._data.dtype == np.bool_ else ~a._data, a)


def _comparison(np_fn):
    return lambda self, other: compare(np_fn, self, other)


def _rsub(self: Tensor, other: Any) -> Tensor:
    if isinstance(other, Tensor):
        return sub(other, self)
    return rsub(self, other)


def _rtruediv(self: Tensor, other: Any) -> Any:
    """other / self. PyTorch's `__rdiv__` is `self.reciprocal() * other` for any `other` and turns a TypeError into
    NotImplemented: so `None / x` or `"a" / x` make (and number) a ReciprocalBackward0 before Python refuses them,
    where every other reflected operator is refused before any node."""
    if isinstance(other, Tensor):
        return div(other, self)
    if isinstance(other, _OPERAND):
        return rdiv(self, other)
    try:
        return reciprocal(self) * other
    except TypeError:
        return NotImplemented


public("add", tensor=("__add__", "__radd__"))(binary_operator(add))
public("sub", tensor="__sub__")(binary_operator(sub))
public("rsub", tensor="__rsub__")(binary_operator(_rsub))
public("mul", tensor=("__mul__", "__rmul__"))(binary_operator(mul))
public("div", tensor="__truediv__")(binary_operator(div))
public("div", tensor="__rtruediv__")(_rtruediv)  # number / x: PyTorch's __rdiv__
public("pow", tensor="__pow__")(binary_operator(pow))
public("pow", tensor="__rpow__")(binary_operator(lambda self, base: pow(base, self)))
public("bitwise_not", tensor="__invert__")(bitwise_not)
for _op, _np_fn in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                    ("eq", np.equal), ("ne", np.not_equal)):
    public(_op, tensor=_op)(_comparison(_np_fn))
    public(_op, tensor=f"__{_op}__")(binary_operator(_comparison(_np_fn)))  # x == None is False, as in Python
public("__and__", tensor=True)(binary_operator(_comparison(np.logical_and)))
public("__or__", tensor=True)(binary_operator(_comparison(np.logical_or)))
public("__xor__", tensor=True)(binary_operator(_comparison(np.logical_xor)))


# -- the public entries of add, sub, mul, div: torch's argument checks, then the op ----------------------------
def _check_operand(op: str, value: Any, name: str, position: int) -> None:
    if not isinstance(value, (Tensor, int, float, bool, np.number)):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not {type(value).__name__}")


def _entries(op: str, impl: Any, takes_alpha: bool) -> None:
    """Tensor.op(other) and torch.op(input, other), each checking its operands as torch's parser does."""
    if takes_alpha:
        def method(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
            _check_operand(op, other, "other", 1)
            return impl(self, other, alpha)

        def function(input: Any, other: Any, *, alpha: float = 1) -> Tensor:  # noqa: A002 - torch's name
            _check_operand(op, input, "input", 1)
            _check_operand(op, other, "other", 2)
            return impl(input, other, alpha)
    else:
        def method(self: Tensor, other: Any) -> Tensor:
            _check_operand(op, other, "other", 1)
            return impl(self, other)

        def function(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
            _check_operand(op, input, "input", 1)
            _check_operand(op, other, "other", 2)
            return impl(input, other)
    method.__doc__ = function.__doc__ = impl.__doc__
    public(op, tensor=True)(method)
    public(op, torch=True)(function)


for _op, _impl, _alpha in (("add", add, True), ("sub", sub, True), ("mul", mul, False), ("div", div, False)):
    _entries(_op, _impl, _alpha)
