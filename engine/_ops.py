"""Forward ops: compute with numpy and, when grad mode is on and an input requires grad, record a node.

Imports numpy and the standard library only. Each op follows PyTorch's generated code: create the node
(taking a seq_nr), compute, then attach edges and history. The node names and edge slots are the ones
PyTorch 2.13 records (see tests/engine/test_torch_parity.py).
"""
from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any, Sequence

import numpy as np

from . import _functions as fn
from . import _observer
from ._dtype import as_dtype, from_numpy_dtype
from ._node import InputMetadata, Node
from ._state import tls
from ._tensor import Tensor, _wrap_dim, gradient_edge, make_tensor

_KIND = {np.dtype(np.bool_): 0, np.dtype(np.int64): 1, np.dtype(np.float32): 2, np.dtype(np.float64): 2}
_DEFAULT_OF_KIND = {0: np.dtype(np.bool_), 1: np.dtype(np.int64), 2: np.dtype(np.float32)}
_F32 = np.dtype(np.float32)

MaxResult = namedtuple("max", ["values", "indices"])
"""What `max(dim)` returns, like torch.return_types.max."""


# -- recording ----------------------------------------------------------------------------------------
def needs_grad(*inputs: Tensor | None) -> bool:
    """compute_requires_grad: grad mode is on and some input requires grad."""
    if not tls.grad_enabled:
        return False
    for t in inputs:
        if t is not None and t._requires_grad:
            return True
    return False


def collect_next_edges(inputs: Sequence[Tensor | None]) -> list[tuple]:
    """One edge per input slot; (None, 0) for inputs that do not require grad."""
    return [gradient_edge(t) if t is not None else (None, 0) for t in inputs]


def record(node: Node, inputs: Sequence[Tensor | None], out: Tensor) -> Tensor:
    """Attach `node` as `out`'s grad_fn with one edge per input (set_next_edges + set_history)."""
    node.set_next_edges(collect_next_edges(inputs))
    node._input_metadata = [InputMetadata(out._data.shape, from_numpy_dtype(out._data.dtype), out._device)]
    out.grad_fn = node
    out._requires_grad = True
    if _observer.observers:
        _observer.notify("node_created", node)
    return out


def _arr(x: Any) -> np.ndarray:
    return x if type(x) is np.ndarray else np.asarray(x)


def _out(arr: Any, like: Tensor) -> Tensor:
    return make_tensor(_arr(arr), device=like._device)


def scalar_tensor(value: Any, like: Tensor) -> Tensor:
    """Wrap a Python number as a 0-dim tensor that does not drive type promotion (a wrapped number)."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, np.bool_)):
        arr = np.array(bool(value))
    elif isinstance(value, (int, np.integer)):
        arr = np.array(int(value), dtype=np.int64)
    elif isinstance(value, (float, np.floating)):
        arr = np.array(float(value), dtype=np.float64)
    else:
        raise TypeError(f"unsupported operand type: expected a Tensor or a Python number, got {type(value).__name__}")
    t = make_tensor(arr, device=like._device)
    t._is_wrapped_number = True
    return t


def _tier(t: Tensor) -> int:
    return 0 if t._is_wrapped_number else (1 if t._data.ndim == 0 else 2)


def result_dtype(a: Tensor, b: Tensor) -> np.dtype:
    """PyTorch's type promotion for two operands: category first, then dimensioned > 0-dim > number."""
    da, db = a._data.dtype, b._data.dtype
    if da == db and not (a._is_wrapped_number and b._is_wrapped_number):
        return da
    ka, kb = _KIND[da], _KIND[db]
    if ka != kb:
        hi = a if ka > kb else b
        return _DEFAULT_OF_KIND[max(ka, kb)] if hi._is_wrapped_number else hi._data.dtype
    ta, tb = _tier(a), _tier(b)
    if ta != tb:
        return (a if ta > tb else b)._data.dtype
    if ta == 0:
        return _DEFAULT_OF_KIND[ka]
    return np.promote_types(da, db)


def _check_device(a: Tensor, b: Tensor) -> None:
    if a._device != b._device and not (a._is_wrapped_number or b._is_wrapped_number
                                       or a._data.ndim == 0 or b._data.ndim == 0):
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{_dev_name(a._device)} and {_dev_name(b._device)}!")


def _dev_name(d: str) -> str:
    return d


def _binary(np_fn, a: Tensor, b: Tensor, float_only: bool = False) -> np.ndarray:
    _check_device(a, b)
    dt = result_dtype(a, b)
    if float_only and _KIND[dt] < 2:
        dt = _F32
    try:
        res = _arr(np_fn(a._data, b._data))
    except ValueError:
        raise RuntimeError(
            f"The size of tensor a ({_mismatch(a, b)[0]}) must match the size of tensor b "
            f"({_mismatch(a, b)[1]}) at non-singleton dimension {_mismatch(a, b)[2]}") from None
    return res if res.dtype == dt else res.astype(dt)


def _mismatch(a: Tensor, b: Tensor) -> tuple[int, int, int]:
    sa, sb = a._data.shape, b._data.shape
    n = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    for i in range(n - 1, -1, -1):
        if sa[i] != sb[i] and sa[i] != 1 and sb[i] != 1:
            return sa[i], sb[i], i
    return sa[-1], sb[-1], n - 1


def _pair(a: Any, b: Any) -> tuple[Tensor, Tensor]:
    if not isinstance(a, Tensor):
        a = scalar_tensor(a, b)
    if not isinstance(b, Tensor):
        b = scalar_tensor(b, a)
    return a, b


# -- arithmetic -----------------------------------------------------------------------------------------
def add(a: Any, b: Any, alpha: float = 1) -> Tensor:
    """a + alpha * b → AddBackward0 (a Python scalar still gets a slot)."""
    a, b = _pair(a, b)
    node = fn.AddBackward0() if needs_grad(a, b) else None
    data = _binary(np.add, a, b) if alpha == 1 else _binary(lambda x, y: x + alpha * y, a, b)
    out = _out(data, a if not a._is_wrapped_number else b)
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
    out = _out(data, a if not a._is_wrapped_number else b)
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
    out = _out(_binary(np.multiply, a, b), a if not a._is_wrapped_number else b)
    if node is not None:
        # Saved only when needed for the other input's grad, as the generated code does.
        node.self = a if b._requires_grad else None
        node.other = b if a._requires_grad else None
        record(node, (a, b), out)
    return out


def mul_scalar(a: Tensor, s: float) -> Tensor:
    """a * s for a C++ double inside a derivative formula → MulBackward1 (one slot)."""
    node = fn.MulBackward1() if needs_grad(a) else None
    out = _out(_binary(np.multiply, a, scalar_tensor(s, a)), a)
    if node is not None:
        node.other = s
        record(node, (a,), out)
    return out


def div(a: Any, b: Any) -> Tensor:
    """a / b (true division) → DivBackward0."""
    a, b = _pair(a, b)
    node = fn.DivBackward0() if needs_grad(a, b) else None
    with np.errstate(divide="ignore", invalid="ignore"):
        data = _binary(np.true_divide, a, b, float_only=True)
    out = _out(data, a if not a._is_wrapped_number else b)
    if node is not None:
        node.self = a if b._requires_grad else None
        node.other = b
        record(node, (a, b), out)
    return out


def div_scalar(a: Tensor, s: float) -> Tensor:
    """a / s inside a derivative formula → DivBackward1."""
    node = fn.DivBackward1() if needs_grad(a) else None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _out(_binary(np.true_divide, a, scalar_tensor(s, a), float_only=True), a)
    if node is not None:
        node.other = s
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


def reciprocal(a: Tensor) -> Tensor:
    """1 / a → ReciprocalBackward0."""
    node = fn.ReciprocalBackward0() if needs_grad(a) else None
    with np.errstate(divide="ignore"):
        out = _out(np.reciprocal(_float_data(a)), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


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


def pow(a: Any, exponent: Any) -> Tensor:  # noqa: A001 - PyTorch's name
    """a ** exponent: PowBackward0 (scalar exponent), PowBackward1 (tensor), PowBackward2 (scalar base)."""
    if not isinstance(a, Tensor):
        return _pow_scalar_base(a, exponent)
    if isinstance(exponent, Tensor):
        return _pow_tensor(a, exponent)
    return _pow_scalar_exp(a, exponent)


def _pow_scalar_exp(a: Tensor, exponent: float) -> Tensor:
    node = fn.PowBackward0() if needs_grad(a) else None
    e = scalar_tensor(exponent, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _out(_binary(np.power, a, e), a)
    if node is not None:
        node.self = a
        node.exponent = exponent
        record(node, (a,), out)
    return out


def _pow_tensor(a: Tensor, e: Tensor) -> Tensor:
    node = fn.PowBackward1() if needs_grad(a, e) else None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _out(_binary(np.power, a, e), a)
    if node is not None:
        node.self, node.exponent, node.result = a, e, out
        record(node, (a, e), out)
    return out


def _pow_scalar_base(base: float, e: Tensor) -> Tensor:
    node = fn.PowBackward2() if needs_grad(e) else None
    b = scalar_tensor(base, e)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = _out(_binary(np.power, b, e, float_only=e._data.dtype.kind == "f"), e)
    if node is not None:
        node.self, node.exponent, node.result = base, e, out
        record(node, (e,), out)
    return out


# -- unary pointwise ------------------------------------------------------------------------------------
def _float_data(a: Tensor) -> np.ndarray:
    d = a._data
    return d if d.dtype.kind == "f" else d.astype(np.float32)


def _unary(np_fn, node_cls, a: Tensor, save: str) -> Tensor:
    node = node_cls() if needs_grad(a) else None
    with np.errstate(all="ignore"):
        out = _out(np_fn(_float_data(a)), a)
    if node is not None:
        setattr(node, save, a if save == "self" else out)
        record(node, (a,), out)
    return out


def exp(a: Tensor) -> Tensor:
    """e ** a → ExpBackward0."""
    return _unary(np.exp, fn.ExpBackward0, a, "result")


def log(a: Tensor) -> Tensor:
    """Natural log → LogBackward0."""
    return _unary(np.log, fn.LogBackward0, a, "self")


def sin(a: Tensor) -> Tensor:
    """Sine → SinBackward0."""
    return _unary(np.sin, fn.SinBackward0, a, "self")


def cos(a: Tensor) -> Tensor:
    """Cosine → CosBackward0."""
    return _unary(np.cos, fn.CosBackward0, a, "self")


def tanh(a: Tensor) -> Tensor:
    """Hyperbolic tangent → TanhBackward0."""
    return _unary(np.tanh, fn.TanhBackward0, a, "result")


def _sigmoid_np(x: np.ndarray) -> np.ndarray:
    return _arr(1.0 / (1.0 + np.exp(-x))).astype(x.dtype, copy=False)


def sigmoid(a: Tensor) -> Tensor:
    """Logistic sigmoid → SigmoidBackward0."""
    return _unary(_sigmoid_np, fn.SigmoidBackward0, a, "result")


def relu(a: Tensor) -> Tensor:
    """max(a, 0) → ReluBackward0."""
    node = fn.ReluBackward0() if needs_grad(a) else None
    out = _out(np.maximum(a._data, a._data.dtype.type(0)), a)
    if node is not None:
        node.result = out
        record(node, (a,), out)
    return out


def sqrt(a: Tensor) -> Tensor:
    """Square root → SqrtBackward0."""
    return _unary(np.sqrt, fn.SqrtBackward0, a, "result")


def abs(a: Tensor) -> Tensor:  # noqa: A001 - PyTorch's name
    """Absolute value → AbsBackward0."""
    node = fn.AbsBackward0() if needs_grad(a) else None
    out = _out(np.abs(a._data), a)
    if node is not None:
        node.self = a
        record(node, (a,), out)
    return out


def sgn(a: Tensor) -> Tensor:
    """Sign → SgnBackward0."""
    node = fn.SgnBackward0() if needs_grad(a) else None
    out = _out(np.sign(a._data), a)
    if node is not None:
        record(node, (a,), out)
    return out


# -- reductions -----------------------------------------------------------------------------------------
def _dims(dim: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({_wrap_dim(d, ndim) for d in dim}))
    return dims


def sum(a: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:  # noqa: A001
    """Sum of all elements (SumBackward0) or along `dim` (SumBackward1)."""
    if dim is None:
        node = fn.SumBackward0() if needs_grad(a) else None
        data = a._data.sum(dtype=np.int64 if a._data.dtype.kind in "bi" else None)
        out = _out(data, a)
        if node is not None:
            node.self_sym_sizes = a._data.shape
            record(node, (a,), out)
        return _maybe_cast(out, dtype)
    dims = _dims(dim, a._data.ndim)
    node = fn.SumBackward1() if needs_grad(a) else None
    data = a._data.sum(axis=dims if a._data.ndim else None, keepdims=keepdim,
                       dtype=np.int64 if a._data.dtype.kind in "bi" else None)
    out = _out(data, a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.keepdim = a._data.shape, dims, keepdim
        record(node, (a,), out)
    return _maybe_cast(out, dtype)


def _maybe_cast(t: Tensor, dtype: Any) -> Tensor:
    return t if dtype is None else to(t, dtype)


def mean(a: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """Mean of all elements (MeanBackward0) or along `dim` (MeanBackward1)."""
    if dtype is not None:
        a = to(a, dtype)
    if a._data.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
            f"dtype. Got: {_dtype_title(a)}")
    if dim is None:
        node = fn.MeanBackward0() if needs_grad(a) else None
        with np.errstate(invalid="ignore"):
            out = _out(a._data.mean(dtype=a._data.dtype), a)
        if node is not None:
            node.self_sym_sizes, node.self_sym_numel = a._data.shape, a._data.size
            record(node, (a,), out)
        return out
    dims = _dims(dim, a._data.ndim)
    node = fn.MeanBackward1() if needs_grad(a) else None
    with np.errstate(invalid="ignore"):
        out = _out(a._data.mean(axis=dims if a._data.ndim else None, keepdims=keepdim, dtype=a._data.dtype), a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.keepdim = a._data.shape, dims, keepdim
        record(node, (a,), out)
    return out


def _dtype_title(a: Tensor) -> str:
    return {"int64": "Long", "bool": "Bool", "float32": "Float", "float64": "Double"}[a.dtype.name]


def max(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """The largest element (MaxBackward1); with `dim`, (values, indices) (MaxBackward0)."""
    if isinstance(dim, Tensor):
        return maximum(a, dim)
    if dim is None:
        if a._data.size == 0:
            raise RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                               "the reduction dim with the 'dim' argument.")
        node = fn.MaxBackward1() if needs_grad(a) else None
        out = _out(a._data.max(), a)
        if node is not None:
            node.self, node.result = a, out
            record(node, (a,), out)
        return out
    d = _wrap_dim(dim, a._data.ndim)
    node = fn.MaxBackward0() if needs_grad(a) else None
    idx = np.argmax(a._data, axis=d) if a._data.ndim else np.array(0)
    values = np.take_along_axis(a._data, np.expand_dims(idx, d), d) if a._data.ndim else a._data
    if not keepdim and a._data.ndim:
        values = values.squeeze(d)
    else:
        idx = np.expand_dims(idx, d) if a._data.ndim else idx
    out = _out(values, a)
    indices = _out(idx.astype(np.int64), a)
    if node is not None:
        node.dim, node.keepdim, node.indices, node.self_sym_sizes = d, keepdim, indices, a._data.shape
        record(node, (a,), out)
    return MaxResult(out, indices)


def argmax(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the largest element (no grad)."""
    if dim is None:
        return _out(np.array(np.argmax(a._data), dtype=np.int64), a)
    d = _wrap_dim(dim, a._data.ndim)
    res = np.argmax(a._data, axis=d)
    if keepdim:
        res = np.expand_dims(res, d)
    return _out(res.astype(np.int64), a)


def maximum(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise maximum → MaximumBackward0."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("maximum(): argument 'other' (position 2) must be Tensor")
    node = fn.MaximumBackward0() if needs_grad(a, b) else None
    out = _out(_binary(np.maximum, a, b), a)
    if node is not None:
        node.self, node.other = a, b
        record(node, (a, b), out)
    return out


# -- linear algebra -------------------------------------------------------------------------------------
def _strides(a: Tensor) -> tuple[int, ...]:
    item = a._data.itemsize
    return tuple(s // item for s in a._data.strides)


def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors → MmBackward0."""
    if a._data.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b._data.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a._data.shape[1] != b._data.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a._data.shape[0]}x{a._data.shape[1]} and "
            f"{b._data.shape[0]}x{b._data.shape[1]})")
    _check_same_dtype(a, b, "expected m1 and m2 to have the same dtype")
    _check_device(a, b)
    node = fn.MmBackward0() if needs_grad(a, b) else None
    out = _out(a._data @ b._data, a)
    if node is not None:
        node.self = a if b._requires_grad else None
        node.mat2 = b if a._requires_grad else None
        node.self_sym_sizes, node.self_sym_strides = a._data.shape, _strides(a)
        node.mat2_sym_sizes, node.mat2_sym_strides = b._data.shape, _strides(b)
        record(node, (a, b), out)
    return out


def _check_same_dtype(a: Tensor, b: Tensor, msg: str) -> None:
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"{msg}, but got: {a.dtype.name.title()} != {b.dtype.name.title()}".replace(
            "Float32", "float").replace("Float64", "double"))


def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-D tensors → DotBackward0."""
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a._data.ndim}D and {b._data.ndim}D tensors")
    if a._data.shape[0] != b._data.shape[0]:
        raise RuntimeError(
            "inconsistent tensor size, expected tensor [%d] and src [%d] to have the same number of elements, "
            "but got %d and %d elements respectively" % (a._data.shape[0], b._data.shape[0], a._data.shape[0],
                                                        b._data.shape[0]))
    node = fn.DotBackward0() if needs_grad(a, b) else None
    out = _out(np.dot(a._data, b._data), a)
    if node is not None:
        node.self = a if b._requires_grad else None
        node.tensor = b if a._requires_grad else None
        record(node, (a, b), out)
    return out


def mv(a: Tensor, v: Tensor) -> Tensor:
    """Matrix-vector product → MvBackward0."""
    if a._data.ndim != 2 or v._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a._data.ndim}, {v._data.ndim}")
    if a._data.shape[1] != v._data.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a._data.shape[0]}), mat ({a._data.shape[0]}x"
                           f"{a._data.shape[1]}), vec ({v._data.shape[0]})")
    node = fn.MvBackward0() if needs_grad(a, v) else None
    out = _out(a._data @ v._data, a)
    if node is not None:
        node.self = a if v._requires_grad else None
        node.vec = v if a._requires_grad else None
        record(node, (a, v), out)
    return out


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """PyTorch's matmul dispatch: dot, mv, mm, and the folded N-D @ 2-D case."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul(): argument 'other' (position 1) must be Tensor")
    da, db = a._data.ndim, b._data.ndim
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot(a, b)
    if da == 2 and db == 1:
        return mv(a, b)
    if da == 1 and db == 2:
        return squeeze_dims(mm(unsqueeze(a, 0), b), (0,))
    if da == 2 and db == 2:
        return mm(a, b)
    if da >= 3 and db <= 2:
        # Fold the batch dims into rows, as at::matmul does, and unfold with _unsafe_view.
        lead = a._data.shape[:-1]
        folded = reshape(a, (-1, a._data.shape[-1]))
        if db == 1:
            res = mv(folded, b)
            return _unsafe_view(res, lead)
        res = mm(folded, b)
        return _unsafe_view(res, lead + (b._data.shape[-1],))
    raise NotImplementedError(
        f"engine.matmul supports 1-D and 2-D operands and N-D @ 2-D; got {da}-D @ {db}-D")


def addmm(bias: Tensor, mat1: Tensor, mat2: Tensor, beta: float = 1, alpha: float = 1) -> Tensor:
    """beta * bias + alpha * (mat1 @ mat2) → AddmmBackward0 with edges (bias, mat1, mat2)."""
    if mat1._data.ndim != 2 or mat2._data.ndim != 2:
        raise RuntimeError("mat1 must be a matrix, got %d-D tensor" % mat1._data.ndim)
    if mat1._data.shape[1] != mat2._data.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1._data.shape[0]}x{mat1._data.shape[1]} and "
            f"{mat2._data.shape[0]}x{mat2._data.shape[1]})")
    node = fn.AddmmBackward0() if needs_grad(bias, mat1, mat2) else None
    prod = mat1._data @ mat2._data
    data = beta * bias._data + alpha * prod if (beta != 1 or alpha != 1) else bias._data + prod
    out = _out(np.broadcast_to(data, prod.shape).astype(prod.dtype), mat1)
    if node is not None:
        node.mat1 = mat1 if mat2._requires_grad else None
        node.mat2 = mat2 if mat1._requires_grad else None
        node.alpha, node.beta = alpha, beta
        node.mat1_sym_sizes, node.mat1_sym_strides = mat1._data.shape, _strides(mat1)
        node.mat2_sym_sizes, node.mat2_sym_strides = mat2._data.shape, _strides(mat2)
        record(node, (bias, mat1, mat2), out)
    return out


# -- shape ops ------------------------------------------------------------------------------------------
def t(a: Tensor) -> Tensor:
    """Transpose of a tensor with at most 2 dims → TBackward0."""
    if a._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a._data.ndim}D")
    node = fn.TBackward0() if needs_grad(a) else None
    out = _out(a._data.T, a)
    if node is not None:
        record(node, (a,), out)
    return out


def permute(a: Tensor, dims: Sequence[int]) -> Tensor:
    """Reorder dims → PermuteBackward0."""
    nd = a._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal "
                           f"to len(dims) = {len(dims)}")
    dims = tuple(_wrap_dim(d, nd) for d in dims)
    node = fn.PermuteBackward0() if needs_grad(a) else None
    out = _out(np.transpose(a._data, dims), a)
    if node is not None:
        node.dims = dims
        record(node, (a,), out)
    return out


def transpose(a: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims → TransposeBackward0."""
    nd = a._data.ndim
    d0, d1 = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
    node = fn.TransposeBackward0() if needs_grad(a) else None
    out = _out(np.swapaxes(a._data, d0, d1) if nd else a._data, a)
    if node is not None:
        node.dim0, node.dim1 = d0, d1
        record(node, (a,), out)
    return out


def _infer_shape(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _as_view(data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A view of `data` with `shape`, or None when the strides do not allow one (torch's view rule)."""
    v = data.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    return v


def view(a: Tensor, *shape: Any) -> Tensor:
    """Reshape without copying → ViewBackward0; refuses incompatible strides like PyTorch."""
    shape = _infer_shape(_shape_args(shape), a._data.size)
    data = _as_view(a._data, shape)
    if data is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead.")
    return _view_of(a, data)


def _view_of(a: Tensor, data: np.ndarray) -> Tensor:
    node = fn.ViewBackward0() if needs_grad(a) else None
    out = _out(data, a)
    if node is not None:
        node.self_sym_sizes = a._data.shape
        record(node, (a,), out)
    return out


def reshape(a: Tensor, *shape: Any) -> Tensor:
    """A view when the strides allow (ViewBackward0), else a clone then _unsafe_view."""
    shape = _infer_shape(_shape_args(shape), a._data.size)
    data = _as_view(a._data, shape)
    if data is not None:
        return _view_of(a, data)
    return _unsafe_view(clone(a), shape)


def _unsafe_view(a: Tensor, shape: tuple[int, ...]) -> Tensor:
    node = fn.UnsafeViewBackward0() if needs_grad(a) else None
    out = _out(np.ascontiguousarray(a._data).reshape(shape), a)
    if node is not None:
        node.self_sym_sizes = a._data.shape
        record(node, (a,), out)
    return out


def _shape_args(shape: tuple) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


def flatten(a: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start..end into one (a reshape)."""
    nd = a._data.ndim
    if nd == 0:
        return reshape(a, (1,))
    s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
    if s == e:
        return a
    shape = a._data.shape
    return reshape(a, shape[:s] + (-1,) + shape[e + 1:])


def unsqueeze(a: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim → UnsqueezeBackward0."""
    d = _wrap_dim(dim, a._data.ndim + 1)
    node = fn.UnsqueezeBackward0() if needs_grad(a) else None
    out = _out(np.expand_dims(a._data, d), a)
    if node is not None:
        node.dim = d
        record(node, (a,), out)
    return out


def squeeze(a: Tensor, dim: Any = None) -> Tensor:
    """Drop size-1 dims: all (SqueezeBackward0), or one (SqueezeBackward1)."""
    nd = a._data.ndim
    if dim is None:
        node = fn.SqueezeBackward0() if needs_grad(a) else None
        out = _out(np.squeeze(a._data), a)
        if node is not None:
            node.self_sym_sizes = a._data.shape
            record(node, (a,), out)
        return out
    if isinstance(dim, (tuple, list)):
        return squeeze_dims(a, tuple(dim))
    d = _wrap_dim(dim, nd)
    node = fn.SqueezeBackward1() if needs_grad(a) else None
    data = np.squeeze(a._data, d) if nd and a._data.shape[d] == 1 else a._data.view()
    out = _out(data, a)
    if node is not None:
        node.self_sym_sizes, node.dim = a._data.shape, d
        record(node, (a,), out)
    return out


def squeeze_dims(a: Tensor, dims: tuple[int, ...]) -> Tensor:
    """squeeze.dims → SqueezeBackward4 (as matmul's 1-D @ 2-D path records)."""
    nd = a._data.ndim
    ds = tuple(sorted({_wrap_dim(d, nd) for d in dims}))
    node = fn.SqueezeBackward4() if needs_grad(a) else None
    keep = tuple(d for d in ds if a._data.shape[d] == 1)
    out = _out(np.squeeze(a._data, keep) if keep else a._data.view(), a)
    if node is not None:
        node.self_sym_sizes, node.dim = a._data.shape, ds
        record(node, (a,), out)
    return out


def expand(a: Tensor, *sizes: Any) -> Tensor:
    """Broadcast to `sizes` without copying → ExpandBackward0."""
    sizes = _shape_args(sizes)
    nd, n = a._data.ndim, len(sizes)
    if n < nd:
        raise RuntimeError(
            f"expand({a.dtype.name.title()}Type{{{list(a._data.shape)}}}, size={list(sizes)}): the number of "
            f"sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({nd})")
    shape = list(sizes)
    for i in range(n):
        j = i - (n - nd)
        if shape[i] == -1:
            if j < 0:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            shape[i] = a._data.shape[j]
        elif j >= 0 and a._data.shape[j] != 1 and a._data.shape[j] != shape[i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[i]}) must match the existing size "
                f"({a._data.shape[j]}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor "
                f"sizes: {list(a._data.shape)}")
    node = fn.ExpandBackward0() if needs_grad(a) else None
    out = _out(np.broadcast_to(a._data, tuple(shape)), a)
    if node is not None:
        node.self_sym_sizes = a._data.shape
        record(node, (a,), out)
    return out


def select(a: Tensor, dim: int, index: int) -> Tensor:
    """a.select(dim, index), as `a[index]` does → SelectBackward0."""
    nd = a._data.ndim
    if nd == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, nd)
    size = a._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    i = index + size if index < 0 else index
    node = fn.SelectBackward0() if needs_grad(a) else None
    out = _out(a._data[(slice(None),) * d + (i,)], a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.index = a._data.shape, d, i
        record(node, (a,), out)
    return out


def slice_(a: Tensor, dim: int, start: int | None, end: int | None, step: int = 1) -> Tensor:
    """a.slice(dim, start, end, step) → SliceBackward0."""
    if step <= 0:
        raise ValueError("step must be greater than zero")
    d = _wrap_dim(dim, a._data.ndim)
    size = a._data.shape[d]
    s, e, _ = slice(start, end, step).indices(size)
    e = builtins.max(e, s)
    node = fn.SliceBackward0() if needs_grad(a) else None
    out = _out(a._data[(slice(None),) * d + (slice(s, e, step),)], a)
    if node is not None:
        node.self_sym_sizes, node.dim, node.start, node.end, node.step = a._data.shape, d, s, e, step
        record(node, (a,), out)
    return out


def getitem(a: Tensor, key: Any) -> Tensor:
    """Basic indexing with ints, slices, None and Ellipsis, applied dim by dim as PyTorch does."""
    if not isinstance(key, tuple):
        key = (key,)
    n_specified = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_specified > a._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {a._data.ndim}")
    out, dim = a, 0
    for i, k in enumerate(key):
        if k is Ellipsis:
            dim += a._data.ndim - n_specified
        elif k is None:
            out = unsqueeze(out, dim)
            dim += 1
        elif isinstance(k, bool):
            raise NotImplementedError("engine does not support boolean scalar indexing")
        elif isinstance(k, (int, np.integer)) or (isinstance(k, Tensor) and k._data.ndim == 0
                                                   and k._data.dtype == np.int64):
            out = select(out, dim, int(k))
        elif isinstance(k, slice):
            size = out._data.shape[dim]
            s, e, st = k.indices(size)
            if not (s == 0 and e >= size and st == 1):  # a full slice is skipped, as in PyTorch
                out = slice_(out, dim, k.start, k.stop, k.step or 1)
            dim += 1
        else:
            raise NotImplementedError(
                f"engine supports indexing with ints, slices, None and ...; got {type(k).__name__}")
    if out is a:
        out = alias(a)
    return out


def alias(a: Tensor) -> Tensor:
    """`a[:]` or `a[...]`: a view with no new node when nothing changes (AliasBackward0)."""
    node = fn.AliasBackward0() if needs_grad(a) else None
    out = _out(a._data.view(), a)
    if node is not None:
        record(node, (a,), out)
    return out


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along `dim` → CatBackward0 with one slot per tensor."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    d = _wrap_dim(dim, tensors[0]._data.ndim)
    node = fn.CatBackward0() if needs_grad(*tensors) else None
    try:
        data = np.concatenate([x._data for x in tensors], axis=d)
    except ValueError as e:
        raise RuntimeError(f"torch.cat(): {e}") from None
    out = _out(data, tensors[0])
    if node is not None:
        node.dim, node.sizes = d, [x._data.shape for x in tensors]
        record(node, tensors, out)
    return out


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack along a new dim → StackBackward0 with one slot per tensor."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    d = _wrap_dim(dim, tensors[0]._data.ndim + 1)
    shape0 = tensors[0]._data.shape
    for i, x in enumerate(tensors):
        if x._data.shape != shape0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shape0)} at entry 0 "
                               f"and {list(x._data.shape)} at entry {i}")
    node = fn.StackBackward0() if needs_grad(*tensors) else None
    out = _out(np.stack([x._data for x in tensors], axis=d), tensors[0])
    if node is not None:
        node.dim, node.n = d, len(tensors)
        record(node, tensors, out)
    return out


def clone(a: Tensor) -> Tensor:
    """A copy with its own memory → CloneBackward0."""
    node = fn.CloneBackward0() if needs_grad(a) else None
    out = _out(np.array(a._data, copy=True, order="C"), a)
    if node is not None:
        record(node, (a,), out)
    return out


def contiguous(a: Tensor) -> Tensor:
    """`a` itself when contiguous, else a clone."""
    return a if a._data.flags.c_contiguous else clone(a)


def copy_to_new(src: Tensor) -> Tensor:
    """AccumulateGrad's clone under grad mode: `empty_strided(...).copy_(src)` → CopyBackwards."""
    node = fn.CopyBackwards() if needs_grad(src) else None
    out = _out(np.array(src._data, copy=True), src)
    if node is not None:
        node.src_dtype = src.dtype
        record(node, (None, src), out)
    return out


def to(a: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Convert dtype and/or device → ToCopyBackward0; returns `a` itself when nothing changes."""
    from ._device import canonical_device, device as device_cls

    dtype, dev = kwargs.pop("dtype", None), kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for arg in args:
        if isinstance(arg, Tensor):
            dtype, dev = arg.dtype, arg._device
        elif isinstance(arg, (str, device_cls)):
            dev = arg
        else:
            dtype = arg
    new_dtype = as_dtype(dtype).np if dtype is not None else a._data.dtype
    new_device = canonical_device(dev) if dev is not None else a._device
    if new_dtype == a._data.dtype and new_device == a._device and not copy:
        return a
    node = fn.ToCopyBackward0() if needs_grad(a) else None
    out = make_tensor(a._data.astype(new_dtype, copy=True), device=new_device)
    if node is not None:
        node.self_dtype, node.self_device = a.dtype, a._device
        record(node, (a,), out)
    return out


# -- selection ------------------------------------------------------------------------------------------
def where(condition: Tensor, a: Any, b: Any) -> Tensor:
    """Pick from `a` where `condition`, else from `b` → WhereBackward0 with slots (a, b)."""
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be Tensor")
    if condition._data.dtype != np.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{_dtype_title(condition)}")
    a, b = _pair(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else _pair(
        scalar_tensor(a, condition), b)
    node = fn.WhereBackward0() if needs_grad(a, b) else None
    dt = result_dtype(a, b)
    out = _out(np.where(condition._data, a._data, b._data).astype(dt, copy=False), condition)
    if node is not None:
        node.condition = condition
        record(node, (a, b), out)
    return out


def masked_fill(a: Tensor, mask: Tensor, value: Any) -> Tensor:
    """Fill where `mask` with a number (MaskedFillBackward0) or a 0-dim tensor (MaskedFillBackward1)."""
    if isinstance(value, Tensor) and value._data.ndim != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value._data.ndim} dimension(s).")
    if isinstance(value, Tensor):
        node = fn.MaskedFillBackward1() if needs_grad(a, value) else None
        out = _out(np.where(mask._data, value._data.astype(a._data.dtype), a._data), a)
        if node is not None:
            node.mask = mask
            record(node, (a, value), out)
        return out
    node = fn.MaskedFillBackward0() if needs_grad(a) else None
    out = _out(np.where(mask._data, np.asarray(value, dtype=a._data.dtype), a._data), a)
    if node is not None:
        node.mask = mask
        record(node, (a,), out)
    return out


# -- softmax and losses ---------------------------------------------------------------------------------
def _softmax_np(x: np.ndarray, d: int) -> np.ndarray:
    if x.ndim == 0:
        return np.ones_like(x)
    shifted = x - x.max(axis=d, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=d, keepdims=True)


def softmax(a: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Softmax along `dim` → SoftmaxBackward0."""
    if dtype is not None:
        a = to(a, dtype)
    d = _wrap_dim(dim, a._data.ndim)
    node = fn.SoftmaxBackward0() if needs_grad(a) else None
    out = _out(_softmax_np(_float_data(a), d), a)
    if node is not None:
        node.dim, node.result = d, out
        record(node, (a,), out)
    return out


def _log_softmax_np(x: np.ndarray, d: int) -> np.ndarray:
    if x.ndim == 0:
        return np.zeros_like(x)
    shifted = x - x.max(axis=d, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=d, keepdims=True))


def log_softmax(a: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Log-softmax along `dim` → LogSoftmaxBackward0."""
    if dtype is not None:
        a = to(a, dtype)
    d = _wrap_dim(dim, a._data.ndim)
    node = fn.LogSoftmaxBackward0() if needs_grad(a) else None
    out = _out(_log_softmax_np(_float_data(a), d), a)
    if node is not None:
        node.dim, node.result = d, out
        record(node, (a,), out)
    return out


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def mse_loss(a: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error → MseLossBackward0 with slots (input, target)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if a._data.shape != target._data.shape:
        import warnings

        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({a.shape}). This will "
            "likely lead to incorrect results due to broadcasting. Please ensure they have the same size.",
            UserWarning, stacklevel=3)
    node = fn.MseLossBackward0() if needs_grad(a, target) else None
    diff = np.square(a._data - target._data)
    data = diff if reduction == "none" else (diff.mean() if reduction == "mean" else diff.sum())
    out = _out(_arr(data).astype(result_dtype(a, target), copy=False), a)
    if node is not None:
        node.self, node.target, node.reduction = a, target, _REDUCTIONS[reduction]
        record(node, (a, target), out)
    return out


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.t() + bias, decomposed the way PyTorch 2.13 records it."""
    if x._data.ndim == 2 and bias is not None:
        return addmm(bias, x, t(weight))
    if bias is not None and x._data.flags.c_contiguous and x._data.ndim >= 1:
        lead = x._data.shape[:-1]
        flat = view(x, (-1, x._data.shape[-1]))
        res = addmm(bias, flat, t(weight))
        return view(res, lead + (weight._data.shape[0],))
    out = matmul(x, t(weight))
    return add(out, bias) if bias is not None else out


# -- derivative helpers (ops PyTorch only records inside formulas) --------------------------------------
def _binary_node(node_cls, np_fn, inputs: tuple, saved: dict, like: Tensor) -> Tensor:
    node = node_cls() if needs_grad(*inputs) else None
    with np.errstate(all="ignore"):
        out = _out(np_fn(), like)
    if node is not None:
        for k, v in saved.items():
            setattr(node, k, v)
        record(node, inputs, out)
    return out


def tanh_backward(grad: Tensor, output: Tensor) -> Tensor:
    """grad * (1 - output**2) → TanhBackwardBackward0."""
    return _binary_node(fn.TanhBackwardBackward0, lambda: grad._data * (1 - output._data * output._data),
                        (grad, output), {"grad_output": grad, "output": output}, grad)


def sigmoid_backward(grad: Tensor, output: Tensor) -> Tensor:
    """grad * output * (1 - output) → SigmoidBackwardBackward0."""
    return _binary_node(fn.SigmoidBackwardBackward0, lambda: grad._data * output._data * (1 - output._data),
                        (grad, output), {"grad_output": grad, "output": output}, grad)


def threshold_backward(grad: Tensor, self: Tensor, threshold: float) -> Tensor:
    """grad where self > threshold, else 0 → ThresholdBackwardBackward0."""
    return _binary_node(
        fn.ThresholdBackwardBackward0,
        lambda: np.where(self._data > threshold, grad._data, np.zeros((), grad._data.dtype)),
        (grad, self), {"self": self, "threshold": threshold}, grad)


def softmax_backward_data(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """output * (grad - sum(grad * output, dim)) → SoftmaxBackwardDataBackward0."""
    def compute() -> np.ndarray:
        g, o = grad._data, output._data
        return o * (g - (g * o).sum(axis=dim, keepdims=True)) if o.ndim else np.zeros_like(o)

    return _binary_node(fn.SoftmaxBackwardDataBackward0, compute, (grad, output),
                        {"grad_output": grad, "output": output, "dim": dim}, grad)


def log_softmax_backward_data(grad: Tensor, output: Tensor, dim: int) -> Tensor:
    """grad - exp(output) * sum(grad, dim) → LogSoftmaxBackwardDataBackward0."""
    def compute() -> np.ndarray:
        g, o = grad._data, output._data
        return g - np.exp(o) * g.sum(axis=dim, keepdims=True) if o.ndim else np.zeros_like(o)

    return _binary_node(fn.LogSoftmaxBackwardDataBackward0, compute, (grad, output),
                        {"grad_output": grad, "output": output, "dim": dim}, grad)


def mse_loss_backward(grad: Tensor, self: Tensor, target: Tensor, reduction: int) -> Tensor:
    """2 * (self - target) * grad (/ numel for mean) → MseLossBackwardBackward0."""
    def compute() -> np.ndarray:
        norm = 2.0 / self._data.size if reduction == 1 else 2.0
        return (norm * (self._data - target._data) * grad._data).astype(self._data.dtype)

    return _binary_node(fn.MseLossBackwardBackward0, compute, (grad, self, target),
                        {"grad_output": grad, "self": self, "target": target, "reduction": reduction}, self)


def select_backward(grad: Tensor, sizes: tuple, dim: int, index: int) -> Tensor:
    """Scatter `grad` into zeros of `sizes` at `index` along `dim` → SelectBackwardBackward0."""
    def compute() -> np.ndarray:
        res = np.zeros(sizes, dtype=grad._data.dtype)
        res[(slice(None),) * dim + (index,)] = grad._data
        return res

    return _binary_node(fn.SelectBackwardBackward0, compute, (grad,), {"dim": dim, "index": index}, grad)


def slice_backward(grad: Tensor, sizes: tuple, dim: int, start: int, end: int, step: int) -> Tensor:
    """Place `grad` into zeros of `sizes` at the slice → SliceBackwardBackward0."""
    def compute() -> np.ndarray:
        res = np.zeros(sizes, dtype=grad._data.dtype)
        res[(slice(None),) * dim + (slice(start, end, step),)] = grad._data
        return res

    return _binary_node(fn.SliceBackwardBackward0, compute, (grad,),
                        {"dim": dim, "start": start, "end": end, "step": step}, grad)


def sum_to(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """at::sum_to: sum the broadcast dims (SumBackward1, keepdim) and view away leading ones."""
    if len(shape) == 0:
        return sum(grad)
    sizes = grad._data.shape
    leading = len(sizes) - len(shape)
    reduce = list(range(leading))
    for i in range(leading, len(sizes)):
        if shape[i - leading] == 1 and sizes[i] != 1:
            reduce.append(i)
    if reduce:
        grad = sum(grad, tuple(reduce), keepdim=True)
    return view(grad, shape) if leading > 0 else grad


def zeros_like_data(t: Tensor) -> Tensor:
    """Zeros shaped like `t`, recording nothing."""
    return make_tensor(np.zeros(t._data.shape, dtype=t._data.dtype), device=t._device)


def zeros_scalar(like: Tensor) -> Tensor:
    """at::zeros({}, grad.options()): a 0-dim zero that joins type promotion as a tensor."""
    return make_tensor(np.zeros((), dtype=like._data.dtype), device=like._device)


def compare(np_fn, a: Any, b: Any) -> Tensor:
    """Elementwise comparison: a bool tensor, never recorded."""
    a, b = _pair(a, b)
    _check_device(a, b)
    return _out(np_fn(a._data, b._data), a if not a._is_wrapped_number else b)


def logical_and(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise and of truth values (no grad)."""
    return compare(np.logical_and, a, b)


def isnan(a: Tensor) -> Tensor:
    """Elementwise NaN test (no grad)."""
    return _out(np.isnan(a._data), a)

