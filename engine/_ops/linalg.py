"""Matrix products: mm, dot, mv, matmul, addmm and nn.functional.linear."""
from __future__ import annotations

import numpy as np

from .. import _functions as fn
from .._dispatch import public
from .._dtype import c_type_name, scalar_type_name
from .._tensor import Tensor
from .._version import bump
from ._common import _out, _strides, binary_operator, check_same_device, has_edge, needs_grad, record, save_inputs
from .shape import (
    _mt,
    _unsafe_view,
    contiguous,
    expand,
    expand_shape,
    reshape,
    squeeze,
    squeeze_dims,
    t,
    unsqueeze,
    view,
)


@public("mm", torch=True, tensor=True)
def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors → MmBackward0."""
    node = fn.MmBackward0() if needs_grad(a, b) else None
    if node is not None:
        # torch keeps an operand's strides only when its own grad is needed (its formula reads them).
        ea, eb = has_edge(a), has_edge(b)
        save_inputs(node, self=a if eb else None, mat2=b if ea else None,
                    self_sym_sizes=a._data.shape, self_sym_strides=_strides(a) if ea else (),
                    mat2_sym_sizes=b._data.shape, mat2_sym_strides=_strides(b) if eb else ())
    if a._data.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b._data.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a._data.shape[1] != b._data.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({a._data.shape[0]}x{a._data.shape[1]} and "
            f"{b._data.shape[0]}x{b._data.shape[1]})")
    check_same_device("mm", self=a, mat2=b)
    _check_same_dtype(a, b, "expected m1 and m2 to have the same dtype")
    out = _out(a._data @ b._data, a)
    if node is not None:
        record(node, (a, b), out)
    return out


def _check_same_dtype(a: Tensor, b: Tensor, msg: str) -> None:
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"{msg}, but got: {c_type_name(a)} != {c_type_name(b)}")


@public("dot", torch=True, tensor=True)
def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-D tensors → DotBackward0."""
    node = fn.DotBackward0() if needs_grad(a, b) else None
    if node is not None:
        ea, eb = has_edge(a), has_edge(b)
        save_inputs(node, self=a if eb else None, tensor=b if ea else None)
    if a._data.ndim != 1 or b._data.ndim != 1:  # torch's dot_check order: dims, dtypes, sizes, devices
        raise RuntimeError(f"1D tensors expected, but got {a._data.ndim}D and {b._data.ndim}D tensors")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {scalar_type_name(a)} and "
                           f"{scalar_type_name(b)}")
    if a._data.shape[0] != b._data.shape[0]:
        raise RuntimeError(
            "inconsistent tensor size, expected tensor [%d] and src [%d] to have the same number of elements, "
            "but got %d and %d elements respectively" % (a._data.shape[0], b._data.shape[0], a._data.shape[0],
                                                        b._data.shape[0]))
    check_same_device("dot", self=a, tensor=b)
    out = _out(np.dot(a._data, b._data), a)
    if node is not None:
        record(node, (a, b), out)
    return out


@public("mv", torch=True, tensor=True)
def mv(a: Tensor, v: Tensor) -> Tensor:
    """Matrix-vector product → MvBackward0."""
    node = fn.MvBackward0() if needs_grad(a, v) else None
    if node is not None:
        ea, ev = has_edge(a), has_edge(v)
        save_inputs(node, self=a if ev else None, vec=v if ea else None)
    if a._data.ndim != 2 or v._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a._data.ndim}, {v._data.ndim}")
    if a._data.shape[1] != v._data.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a._data.shape[0]}), mat ({a._data.shape[0]}x"
                           f"{a._data.shape[1]}), vec ({v._data.shape[0]})")
    check_same_device("mv", self=a, vec=v)
    if a._data.dtype != v._data.dtype:  # mv runs addmv with a result of vec's dtype: (result, mat, vec)
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {scalar_type_name(v)}, "
                           f"{scalar_type_name(a)}, and {scalar_type_name(v)}")
    out = _out(a._data @ v._data, a)
    if node is not None:
        record(node, (a, v), out)
    return out


@public("matmul", torch=True, tensor=True)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """at::matmul's dispatch: dot, mv, mm, one mm or mv over the folded batch of the larger operand (see
    `_should_fold`), or expand both to the common batch and bmm."""
    for bad, name in ((a, "input"), (b, "other")):
        if not isinstance(bad, Tensor):  # a method call names `other` position 1 (see _dispatch)
            raise TypeError(f"matmul(): argument '{name}' (position {1 if name == 'input' else 2}) must be Tensor, "
                            f"not {type(bad).__name__}")
    da, db = a._data.ndim, b._data.ndim
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return dot(a, b)
    if da == 2 and db == 1:
        return mv(a, b)
    if da == 1 and db == 2:  # torch squeezes the mm's result in place (squeeze_): its version is 1
        out = squeeze_dims(mm(unsqueeze(a, 0), b), (0,))
        bump(out._data)
        return out
    if da == 2 and db == 2:
        return mm(a, b)
    a, b = _squeeze_unit_batch(a, b)
    if _should_fold(a, b):
        return _matmul_folded(a, b)
    return _matmul_batched(a, b)


def _squeeze_unit_batch(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """3-D @ 3-D where only one operand has a batch of 1 and that one requires grad: torch 2.13 drops its
    batch dim (SqueezeBackward1) so that the product folds into one mm and its grad is not summed from a
    broadcast (measured: (2, 3, 4) @ (1, 4, 5) records MmBackward0 over SqueezeBackward1)."""
    if a._data.ndim != 3 or b._data.ndim != 3 or (a._data.shape[0] == 1) == (b._data.shape[0] == 1):
        return a, b
    if b._data.shape[0] == 1 and b.requires_grad:
        return a, squeeze(b, 0)
    if a._data.shape[0] == 1 and a.requires_grad:
        return squeeze(a, 0), b
    return a, b


def _should_fold(a: Tensor, b: Tensor) -> bool:
    """Whether matmul folds the batch of the larger operand (b.mT when b is larger) into the rows of one mm/mv.

    It folds when the smaller operand is 1-D or 2-D and requires grad (so its grad is one mm, not a bmm summed
    over the batch); otherwise not for 2-D @ N-D (the result would need a transposed copy), and else only when
    the folded view needs no copy: the leading dims are contiguous with each other. The strides are numpy's
    (see `_torch_strides`): where torch's strides differ from those, the choice may differ.
    """
    larger_first = a._data.ndim >= b._data.ndim
    # torch takes b.mT here whenever b has more dims: a TransposeBackward0 made and dropped (one seq_nr).
    big, small = (a, b) if larger_first else (_mt(b), a)
    if not (big._data.ndim >= 3 and small._data.ndim <= 2):
        return False
    if small.requires_grad:
        return True
    if a._data.ndim == 2:
        return False
    if big._data.size == 0:
        return True
    shape, strides = big._data.shape, _torch_strides(big)
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


def _torch_strides(a: Tensor) -> tuple[int, ...]:
    """numpy's strides, except a size-1 dim's stride 0, which numpy gives after broadcast_to or `None` where
    torch keeps or makes a real one (unsqueeze's: the next dim's size * stride)."""
    shape, strides = a._data.shape, list(_strides(a))
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == 1 and strides[i] == 0:
            strides[i] = strides[i + 1] * shape[i + 1] if i + 1 < len(shape) else 1
    return tuple(strides)


def _matmul_folded(a: Tensor, b: Tensor) -> Tensor:
    """One mm (or mv) on the larger operand viewed as rows: (..., n, m) → (prod, m), then _unsafe_view back;
    for 1-D/2-D @ N-D, the same on b.mT with a.t(), and the result transposed back (copied if it must be)."""
    transpose = b._data.ndim > a._data.ndim
    t1 = _mt(b) if transpose else a
    t2 = (t(a) if a._data.ndim == 2 else a) if transpose else b
    lead = t1._data.shape[:-1]
    folded = reshape(t1, (int(np.prod(lead)), t1._data.shape[-1]))
    if t2._data.ndim == 1:
        return _unsafe_view(mv(folded, t2), lead)
    out = _unsafe_view(mm(folded, t2), lead + (t2._data.shape[1],))
    return contiguous(_mt(out)) if transpose else out


def _matmul_batched(a: Tensor, b: Tensor) -> Tensor:
    """at::matmul's broadcast path: expand both to the common batch, fold it, bmm, _unsafe_view back."""
    sa, sb = a._data.shape, b._data.shape
    da, db = len(sa), len(sb)
    n = sa[-2] if da > 1 else 1
    m1 = sa[-1]
    m2 = sb[-2] if db > 1 else sb[0]
    p = sb[-1] if db > 1 else 1
    batch_a, batch_b = sa[:max(da - 2, 0)], sb[:max(db - 2, 0)]
    try:
        batch = np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        sa_, sb_, dim = _batch_mismatch(batch_a, batch_b)
        raise RuntimeError(f"The size of tensor a ({sa_}) must match the size of tensor b ({sb_}) at "
                           f"non-singleton dimension {dim}") from None
    prod = int(np.prod(batch))
    out_shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    a3 = reshape(expand(a, batch + (n, m1)), (prod, n, m1))
    if db == 1:
        b3 = unsqueeze(reshape(expand(b, batch + (m2,)), (prod, m2)), 2)
        return _unsafe_view(squeeze(bmm(a3, b3), -1), out_shape)
    b3 = reshape(expand(b, batch + (m2, p)), (prod, m2, p))
    return _unsafe_view(bmm(a3, b3), out_shape)


def _batch_mismatch(sa: tuple, sb: tuple) -> tuple[int, int, int]:
    """infer_size's report: the first dim from the right where the batch shapes disagree."""
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    for i in range(n - 1, -1, -1):
        if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
            return pa[i], pb[i], i
    return pa[-1], pb[-1], n - 1


@public("bmm", torch=True, tensor=True)
def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors → BmmBackward0."""
    node = fn.BmmBackward0() if needs_grad(a, b) else None
    if node is not None:
        ea, eb = has_edge(a), has_edge(b)
        save_inputs(node, self=a if eb else None, mat2=b if ea else None)
    if a._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b._data.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if a._data.shape[0] != b._data.shape[0] or a._data.shape[2] != b._data.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a._data.shape[0]}, "
                           f"{a._data.shape[2]}] but got: [{b._data.shape[0]}, {b._data.shape[1]}].")
    check_same_device("bmm", self=a, mat2=b)
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(a)} but found {scalar_type_name(b)}")
    out = _out(np.matmul(a._data, b._data), a)
    if node is not None:
        record(node, (a, b), out)
    return out


@public("addmm", torch=True)
def addmm(bias: Tensor, mat1: Tensor, mat2: Tensor, beta: float = 1, alpha: float = 1) -> Tensor:
    """beta * bias + alpha * (mat1 @ mat2) → AddmmBackward0 with edges (bias, mat1, mat2)."""
    node = fn.AddmmBackward0() if needs_grad(bias, mat1, mat2) else None
    if node is not None:  # strides as in mm
        has_edge(bias)  # first: the edges go in input order
        e1, e2 = has_edge(mat1), has_edge(mat2)
        save_inputs(node, mat1=mat1 if e2 else None, mat2=mat2 if e1 else None,
                    alpha=alpha, beta=beta, mat1_sym_sizes=mat1._data.shape,
                    mat1_sym_strides=_strides(mat1) if e1 else (), mat2_sym_sizes=mat2._data.shape,
                    mat2_sym_strides=_strides(mat2) if e2 else ())
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m._data.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m._data.ndim}-D tensor")
    if mat1._data.shape[1] != mat2._data.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1._data.shape[0]}x{mat1._data.shape[1]} and "
            f"{mat2._data.shape[0]}x{mat2._data.shape[1]})")
    check_same_device("addmm", self=bias, mat1=mat1, mat2=mat2)
    expand_shape(bias, (mat1._data.shape[0], mat2._data.shape[1]))  # the bias is expanded to the product's shape
    for name, first in (("self", bias), ("mat1", mat1)):  # torch checks self against mat2 first
        if first._data.dtype != mat2._data.dtype:
            raise RuntimeError(f"{name} and mat2 must have the same dtype, but got {scalar_type_name(first)} and "
                               f"{scalar_type_name(mat2)}")
    prod = mat1._data @ mat2._data
    data = beta * bias._data + alpha * prod if (beta != 1 or alpha != 1) else bias._data + prod
    out = _out(np.broadcast_to(data, prod.shape).astype(prod.dtype), mat1)
    if node is not None:
        record(node, (bias, mat1, mat2), out)
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
    if bias is None:
        return out
    from .._inplace import add_  # it imports the ops

    return add_(out, bias)  # torch's output.add_(bias): in place, one more version


public("matmul", tensor="__matmul__")(binary_operator(matmul))
public("matmul", tensor="__rmatmul__")(binary_operator(lambda self, other: matmul(other, self)))
