"""Backward nodes of the built-in ops, with PyTorch 2.13's names, saved values and formulas.

Formulas are written in engine ops so that, under
create_graph, they record the same nodes in the same order as PyTorch's derivative formulas. Where a
formula computes several input grads, the order is the one PyTorch's generated code uses (measured on
2.13: `mul`, `div`, `pow`, `where`, `maximum`, `mm` compute the second input's grad first; `dot`, `mv`, `addmm`,
`mse_loss` the first's). C++ evaluates the operands of `a * b` right to left, so `right` is built first.
"""
from __future__ import annotations

import math

import numpy as np

from . import _ops as ops
from . import _state, _version
from ._graph_task import ExecInfo
from ._node import ERR_BACKWARD_TWICE, Node
from ._ops import linalg as _ops_linalg
from ._ops import shape as _ops_shape
from ._ops.reduce import correction_value
from ._state import tls
from ._tensor import ERR_ZEROTENSOR_IMMUTABLE, _wrap_dim, make_tensor
from ._version import bump


class _Generated(Node):
    """Base of generated nodes: one forward output, undefined grad in → undefined grads out."""

    __slots__ = ()

    def apply(self, grads: list) -> list:
        records = self._saved_versions
        if self._released or records is not None and (
                records.__class__ is not tuple or _version._counters or _state.detached_in_place or tls.grad_enabled):
            self.check_saved()  # generated code unpacks every saved variable first; else nothing to check or unpack
        grad = grads[0]
        n = len(self.next_edges)
        if grad is None:
            return [None] * n
        out: list = [None] * n
        self.formulas(grad, out)
        return out

    def formulas(self, grad, out: list) -> None:
        raise NotImplementedError


def _wrapped(dims, ndim: int) -> list[int]:
    """Saved dims (kept as the user gave them) as sorted, distinct non-negative dims (dim_list_to_bitset)."""
    return sorted({_wrap_dim(d, ndim) for d in dims})


def _col_major(sizes: tuple, strides: tuple) -> bool:
    return strides[0] == 1 and strides[1] == sizes[0]


# -- arithmetic -----------------------------------------------------------------------------------------
class AddBackward0(_Generated):
    __slots__ = ("alpha",)
    _saved_values = ("alpha",)

    def formulas(self, grad, out):
        if self.alpha == 1:
            graph_task = tls.current_graph_task
            if graph_task is None or not graph_task.exec_info:
                # should_compute_output's answer without exec_info, inline: whether the edge is valid (every bias add)
                edges = self.next_edges
                if edges[0][0] is not None:
                    out[0] = grad
                if edges[1][0] is not None:
                    out[1] = grad
                return
        if self.should_compute_output(0):
            out[0] = grad
        if self.should_compute_output(1):
            out[1] = grad if self.alpha == 1 else ops.mul_scalar(grad, self.alpha)


class AddBackward1(_Generated):
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad


class SubBackward0(_Generated):
    __slots__ = ("alpha",)
    _saved_values = ("alpha",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad
        if self.should_compute_output(1):
            g = ops.neg(grad)
            out[1] = g if self.alpha == 1 else ops.mul_scalar(g, self.alpha)


class SubBackward1(AddBackward1):
    __slots__ = ()


class RsubBackward1(_Generated):
    __slots__ = ("alpha",)
    _saved_values = ("alpha",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            g = ops.neg(grad)
            out[0] = g if self.alpha == 1 else ops.mul_scalar(g, self.alpha)


class MulBackward0(_Generated):
    __slots__ = ("self", "other")
    _saved_tensor_names = ("other", "self")

    def formulas(self, grad, out):
        if self.should_compute_output(1):
            out[1] = ops.mul(grad, self.self)
        if self.should_compute_output(0):
            out[0] = ops.mul(grad, self.other)


class MulBackward1(_Generated):
    __slots__ = ("other",)
    _saved_values = ("other",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mul_scalar(grad, self.other)


class DivBackward0(_Generated):
    __slots__ = ("self", "other")
    _saved_tensor_names = ("other", "self")

    def formulas(self, grad, out):
        if self.should_compute_output(1):  # -grad * ((self / other) / other)
            right = ops.div(ops.div(self.self, self.other), self.other)
            out[1] = ops.mul(ops.neg(grad), right)
        if self.should_compute_output(0):
            out[0] = ops.div(grad, self.other)


class DivBackward1(_Generated):
    __slots__ = ("other",)
    _saved_values = ("other",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.div_scalar(grad, self.other)


class ReciprocalBackward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # -grad * (result * result)
            right = ops.mul(self.result, self.result)
            out[0] = ops.mul(ops.neg(grad), right)


class NegBackward0(_Generated):
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.neg(grad)


class PowBackward0(_Generated):
    __slots__ = ("self", "exponent")
    _saved_tensor_names = ("self",)
    _saved_values = ("exponent",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            e = self.exponent
            if e == 0:
                out[0] = ops.zeros_like_data(self.self)
            else:  # grad * (exponent * self.pow(exponent - 1))
                out[0] = ops.mul(grad, ops.mul_scalar(ops.pow(self.self, float(e) - 1), float(e)))


class PowBackward1(_Generated):
    __slots__ = ("self", "exponent", "result")
    _saved_tensor_names = ("exponent", "self", "result")

    def formulas(self, grad, out):
        s, e = self.self, self.exponent
        if self.should_compute_output(1):
            cond = ops.logical_and(ops.compare(np.equal, s, 0.0), ops.compare(np.greater_equal, e, 0.0))
            right = ops.where(cond, ops.zeros_scalar(grad), ops.mul(self.result, ops.log(s)))
            out[1] = ops.mul(grad, right)
        if self.should_compute_output(0):
            g = ops.mul(grad, ops.mul(e, ops.pow(s, ops.sub_scalar(e, 1.0))))
            out[0] = ops.where(ops.compare(np.equal, e, 0.0), ops.zeros_scalar(grad), g)


class PowBackward2(_Generated):
    __slots__ = ("self", "exponent", "result")
    _saved_tensor_names = ("exponent", "result")
    _saved_values = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            base = float(self.self)
            if base == 0.0:
                cond = ops.compare(np.greater_equal, self.exponent, 0.0)
                right = ops.where(cond, ops.zeros_scalar(grad), ops.mul_scalar(self.result, -math.inf))
            else:
                right = ops.mul_scalar(self.result, math.log(base))
            out[0] = ops.mul(grad, right)


# -- unary pointwise ------------------------------------------------------------------------------------
class ExpBackward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mul(grad, self.result)


class LogBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.div(grad, self.self)


class SinBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mul(grad, ops.cos(self.self))


class CosBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mul(grad, ops.neg(ops.sin(self.self)))


class TanhBackward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        nxt = self.next_edges[0][0]
        graph_task = tls.current_graph_task
        if nxt is not None and (graph_task is None or not graph_task.exec_info) or self.should_compute_output(0):
            # should_compute_output(0)'s answer without exec_info first, inline (every tanh of the MLP-like graph)
            out[0] = ops.tanh_backward(grad, self.result)


class SigmoidBackward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.sigmoid_backward(grad, self.result)


class ReluBackward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.threshold_backward(grad, self.result, 0)


class SqrtBackward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad / (2 * result)
            out[0] = ops.div(grad, ops.mul_scalar(self.result, 2))


class AbsBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mul(grad, ops.sgn(self.self))


class SgnBackward0(_Generated):
    """sgn's grad is torch's immutable ZeroTensor for real inputs; it saves self and result as torch does."""

    __slots__ = ("self", "result")
    _saved_tensor_names = ("self", "result")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.zeros_like_data(grad)
            out[0]._zerotensor = True


# -- reductions -----------------------------------------------------------------------------------------
def _sum_backward(grad, sizes: tuple, dims: tuple, keepdim: bool):
    if not keepdim and len(sizes) > 0:
        grad = _unsqueeze_multiple(grad, dims, len(sizes))
    return ops.expand(grad, sizes)


class SumBackward0(_Generated):
    __slots__ = ("self_sym_sizes",)
    _saved_values = ("self_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.expand(grad, self.self_sym_sizes)


class SumBackward1(_Generated):
    __slots__ = ("self_sym_sizes", "dim", "keepdim")
    _saved_values = ("dim", "keepdim", "self_sym_sizes")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = _sum_backward(grad, self.self_sym_sizes, self.dim, self.keepdim)


class MeanBackward0(_Generated):
    __slots__ = ("self_sym_sizes", "self_sym_numel")
    _saved_values = ("self_sym_numel", "self_sym_sizes")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.div_scalar(ops.expand(grad, self.self_sym_sizes), self.self_sym_numel)  # an int, as in torch


class MeanBackward1(_Generated):
    __slots__ = ("self_sym_sizes", "self_sym_numel", "dim", "keepdim")
    _saved_values = ("dim", "keepdim", "self_sym_numel", "self_sym_sizes")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            sizes = self.self_sym_sizes
            n = 1
            for d in _wrapped(self.dim, len(sizes)) if sizes else ():
                n *= sizes[d]
            out[0] = ops.div_scalar(_sum_backward(grad, sizes, self.dim, self.keepdim), n)


def _written(t, writes: int):
    """`t`, a grad this formula just made, counted as written in place `writes` times: torch's formula builds it
    with in-place ops (`zeros.scatter_(...)`, `.masked_fill_(...)`), which the engine's out-of-place ops do not
    count."""
    for _ in range(writes):
        bump(t._data)
    return t


class MaxBackward1(_Generated):
    __slots__ = ("self", "result")
    _saved_tensor_names = ("self", "result")

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # evenly_distribute_backward
            s, r = self.self._data, self.result._data
            mask_np = np.isnan(s) if np.isnan(r) else s == r
            mask = ops.make_tensor(mask_np, device=grad._device)
            count = ops.make_tensor(np.asarray(mask_np.sum(), dtype=np.int64), device=grad._device)
            out[0] = _written(ops.masked_fill(ops.zeros_like_data(self.self), mask, ops.div(grad, count)), 1)


class MaxBackward0(_Generated):
    __slots__ = ("dim", "keepdim", "indices", "self_sym_sizes")
    _saved_tensor_names = ("indices",)
    _saved_values = ("dim", "keepdim", "self_sym_sizes")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # value_selecting_reduction_backward
            sizes, d = self.self_sym_sizes, self.dim
            zeros = ops.zeros_of(sizes, grad)
            if not self.keepdim and sizes:
                res = ops.scatter(zeros, d, ops.unsqueeze(self.indices, d), ops.unsqueeze(grad, d))
            else:
                res = ops.scatter(zeros, d, self.indices, grad)
            out[0] = _written(res, 2)  # measured on torch 2.13: the zeros' fill and scatter_ both count


class ScatterBackward0(_Generated):
    __slots__ = ("dim", "index")
    _saved_tensor_names = ("index",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.scatter(grad, self.dim, self.index, 0)
        if self.should_compute_output(1):
            out[1] = ops.gather(grad, self.dim, self.index)


class ScatterBackward1(_Generated):
    __slots__ = ("dim", "index")
    _saved_tensor_names = ("index",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.scatter(grad, self.dim, self.index, 0)


class ScatterAddBackward0(_Generated):
    __slots__ = ("dim", "index")
    _saved_tensor_names = ("index",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad
        if self.should_compute_output(1):
            out[1] = ops.gather(grad, self.dim, self.index)


class GatherBackward0(_Generated):
    __slots__ = ("dim", "index", "self", "sparse_grad")
    _saved_tensor_names = ("index", "self")
    _saved_values = ("dim", "sparse_grad")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # gather_backward: zeros.scatter_add(dim, index, grad)
            sizes = self.self._data.shape
            out[0] = _written(ops.scatter_add(ops.zeros_of(sizes, grad), self.dim, self.index, grad), 1)


class MaximumBackward0(_Generated):
    __slots__ = ("self", "other")
    _saved_tensor_names = ("other", "self")

    def _part(self, grad, ufunc):
        s, o = self.self, self.other
        from ._inplace import masked_fill_  # torch's formula writes in place: the grad keeps where's layout

        w = ops.where(ops.compare(np.equal, s, o), ops.div_scalar(grad, 2), grad)
        return masked_fill_(w, ops.compare(ufunc, s, o), 0)

    def formulas(self, grad, out):
        if self.should_compute_output(1):
            out[1] = self._part(grad, np.greater)
        if self.should_compute_output(0):
            out[0] = self._part(grad, np.less)


# -- linear algebra -------------------------------------------------------------------------------------
def _mm_mat1_backward(grad, mat2, sizes, strides):
    if _col_major(sizes, strides):
        return ops.t(ops.mm(mat2, ops.t(grad)))
    if _plain_mm(grad, mat2, 1, 1):
        return make_tensor(grad._data @ mat2._data.T, device=grad._device)
    return ops.mm(grad, ops.t(mat2))


def _mm_mat2_backward(grad, mat1, sizes, strides):
    if _col_major(sizes, strides):
        return ops.t(ops.mm(ops.t(grad), mat1))
    if _plain_mm(grad, mat1, 0, 0):
        return make_tensor(mat1._data.T @ grad._data, device=grad._device)
    return ops.mm(ops.t(mat1), grad)


def _plain_mm(grad, saved, grad_dim: int, saved_dim: int) -> bool:
    """Whether mm of `grad` and the transposed `saved` (contracting over those dims) may be computed directly:
    the same new tensor as ops.mm with ops.t, whose view and node bookkeeping records nothing when grad mode
    is off (no create_graph), and whose checks would pass. Not while tracer/fx wraps the ops namespace to see
    the formula's ops (it then holds other functions than the engine's)."""
    g, s = grad._data, saved._data
    return (not tls.grad_enabled and g.ndim == 2 and s.ndim == 2 and g.shape[grad_dim] == s.shape[saved_dim]
            and g.dtype == s.dtype and grad._device == saved._device and ops.mm is _ops_linalg.mm
            and ops.t is _ops_shape.t)


_dot = np.dot
_matmul = np.matmul


def _mm_both_direct(node, grad):
    """How both of mm's grads may be computed directly, or None when they may not: _plain_mm for each (checked once
    for the pair), both edges valid with no exec_info to consult, and neither saved operand column-major (whose
    grad torch computes transposed, with other strides). The product is np.dot when the three arrays are
    contiguous: for 2-dim arrays the same BLAS call as `@` (the same values and strides), without the gufunc's
    setup; other strides may take another loop, with other roundings, so they keep np.matmul."""
    if tls.grad_enabled or ops.mm is not _ops_linalg.mm or ops.t is not _ops_shape.t:
        return None
    edges = node.next_edges
    if edges[0][0] is None or edges[1][0] is None:
        return None
    graph_task = tls.current_graph_task
    if graph_task is not None and graph_task.exec_info:
        return None
    saved_self, mat2 = node.self, node.mat2
    g, s, m = grad._data, saved_self._data, mat2._data
    if g.ndim != 2 or s.ndim != 2 or m.ndim != 2:
        return None
    g_shape = g.shape
    device = grad._device
    if (g_shape[0] != s.shape[0] or g_shape[1] != m.shape[1] or g.dtype != s.dtype or g.dtype != m.dtype
            or saved_self._device != device or mat2._device != device):
        return None
    sizes, strides = node.mat2_sym_sizes, node.mat2_sym_strides  # _col_major(), inline, for both
    if strides[0] == 1 and strides[1] == sizes[0]:
        return None
    sizes, strides = node.self_sym_sizes, node.self_sym_strides
    if strides[0] == 1 and strides[1] == sizes[0]:
        return None
    flags = g.flags  # a new flags object per read of .flags
    if flags.c_contiguous or flags.f_contiguous:
        flags = s.flags
        if flags.c_contiguous or flags.f_contiguous:
            flags = m.flags
            if flags.c_contiguous or flags.f_contiguous:
                return _dot
    return _matmul


class MmBackward0(_Generated):
    __slots__ = ("self", "mat2", "self_sym_sizes", "self_sym_strides", "mat2_sym_sizes", "mat2_sym_strides")
    _saved_tensor_names = ("mat2", "self")
    _saved_values = ("mat2_sym_sizes", "mat2_sym_strides", "self_sym_sizes", "self_sym_strides")

    def formulas(self, grad, out):
        product = _mm_both_direct(self, grad)
        if product is not None:  # the MLP's every layer: both grads computed at once, nothing recorded
            g = grad._data
            device = grad._device
            out[1] = make_tensor(product(self.self._data.T, g), False, device)
            out[0] = make_tensor(product(g, self.mat2._data.T), False, device)
            return
        if self.should_compute_output(1):
            out[1] = _mm_mat2_backward(grad, self.self, self.mat2_sym_sizes, self.mat2_sym_strides)
        if self.should_compute_output(0):
            out[0] = _mm_mat1_backward(grad, self.mat2, self.self_sym_sizes, self.self_sym_strides)


class AddmmBackward0(_Generated):
    __slots__ = ("mat1", "mat2", "alpha", "beta", "mat1_sym_sizes", "mat1_sym_strides", "mat2_sym_sizes",
                 "mat2_sym_strides")
    _saved_tensor_names = ("mat1", "mat2")
    _saved_values = ("alpha", "beta", "mat1_sym_sizes", "mat1_sym_strides", "mat2_sym_sizes", "mat2_sym_strides")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad if self.beta == 1 else ops.mul_scalar(grad, self.beta)
        if self.should_compute_output(1):
            g = _mm_mat1_backward(grad, self.mat2, self.mat1_sym_sizes, self.mat1_sym_strides)
            out[1] = g if self.alpha == 1 else ops.mul_scalar(g, self.alpha)
        if self.should_compute_output(2):
            g = _mm_mat2_backward(grad, self.mat1, self.mat2_sym_sizes, self.mat2_sym_strides)
            out[2] = g if self.alpha == 1 else ops.mul_scalar(g, self.alpha)


class DotBackward0(_Generated):
    __slots__ = ("self", "tensor")
    _saved_tensor_names = ("self", "tensor")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mul(grad, self.tensor)
        if self.should_compute_output(1):
            out[1] = ops.mul(grad, self.self)


class MvBackward0(_Generated):
    __slots__ = ("self", "vec")
    _saved_tensor_names = ("self", "vec")

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad.ger(vec) = grad.reshape(n, 1) * vec
            out[0] = ops.mul(ops.reshape(grad, (grad._data.shape[0], 1)), self.vec)
        if self.should_compute_output(1):
            out[1] = ops.mv(ops.t(self.self), grad)


# -- shape ops ------------------------------------------------------------------------------------------
class TBackward0(_Generated):
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.t(grad)


class PermuteBackward0(_Generated):
    __slots__ = ("dims",)
    _saved_values = ("dims",)
    _saved_int64 = ("dims",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            inverse = [0] * len(self.dims)
            for i, d in enumerate(self.dims):
                inverse[d] = i
            out[0] = ops.permute(grad, inverse)


class TransposeBackward0(_Generated):
    __slots__ = ("dim0", "dim1")
    _saved_values = ("dim0", "dim1")
    _saved_int64 = ("dim0", "dim1")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.transpose(grad, self.dim0, self.dim1)


class ViewBackward0(_Generated):
    __slots__ = ("self_sym_sizes",)
    _saved_values = ("self_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.reshape(grad, self.self_sym_sizes)


class UnsafeViewBackward0(ViewBackward0):
    __slots__ = ()


class AliasBackward0(_Generated):
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad


class UnsqueezeBackward0(_Generated):
    __slots__ = ("dim",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.squeeze(grad, self.dim)


class SqueezeBackward0(_Generated):
    __slots__ = ("self_sym_sizes",)
    _saved_values = ("self_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # unsqueeze_to: every size-1 dim, in order
            for d, size in enumerate(self.self_sym_sizes):
                if size == 1:
                    grad = ops.unsqueeze(grad, d)
            out[0] = grad


class SqueezeBackward1(_Generated):
    """squeeze(dim) with one dim."""

    __slots__ = ("self_sym_sizes", "dim")
    _saved_values = ("dim", "self_sym_sizes")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # unsqueeze_to: every size-1 dim among `dim`, ascending
            sizes = self.self_sym_sizes
            for d in _wrapped((self.dim,) if isinstance(self.dim, int) else self.dim, len(sizes)) if sizes else ():
                if sizes[d] == 1:
                    grad = ops.unsqueeze(grad, d)
            out[0] = grad


class SqueezeBackward2(SqueezeBackward1):
    """squeeze(dims) with a tuple of dims."""

    __slots__ = ()


class SqueezeBackward4(SqueezeBackward1):
    """The in-place squeeze_(dim) (matmul's 1-D @ 2-D path)."""

    __slots__ = ()


class ExpandBackward0(_Generated):
    __slots__ = ("self_sym_sizes",)
    _saved_values = ("self_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.sum_to(grad, self.self_sym_sizes)


class SelectBackward0(_Generated):
    __slots__ = ("self_sym_sizes", "dim", "index")
    _saved_values = ("dim", "index", "self_sym_sizes")
    _saved_int64 = ("dim", "index")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.select_backward(grad, self.self_sym_sizes, self.dim, self.index)


class SliceBackward0(_Generated):
    __slots__ = ("self_sym_sizes", "dim", "start", "end", "step")
    _saved_values = ("dim", "end", "self_sym_sizes", "start", "step")
    _saved_int64 = ("dim", "end", "start", "step")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.slice_backward(grad, self.self_sym_sizes, self.dim, self.start, self.end, self.step)


class CatBackward0(_Generated):
    __slots__ = ("dim", "sizes")
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        # cat_tensors_backward slices every input, needed or not, along the wrapped dim, once any is needed (the
        # list is one argument to the generated code's task_should_compute_output)
        if not any(self.should_compute_output(i) for i in range(len(self.sizes))):
            return
        offset = 0
        d = _wrap_dim(self.dim, grad._data.ndim)
        for i, size in enumerate(self.sizes):
            extent = size[d] if size else 0
            out[i] = ops.slice_(grad, d, offset, offset + extent)
            offset += extent


class StackBackward0(_Generated):
    __slots__ = ("dim", "n")
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if not any(self.should_compute_output(i) for i in range(self.n)):  # as CatBackward0's
            return
        for i in range(self.n):  # stack_tensors_backward: grad.select(dim, i) with the dim as saved
            out[i] = ops.select(grad, self.dim, i)


class CloneBackward0(_Generated):
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad


class CopyBackwards(_Generated):
    __slots__ = ("src_dtype", "src_device")
    _name = "torch::autograd::CopyBackwards"

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.zeros_like_data(grad)
        if self.should_compute_output(1):  # grad.to(src's options); validate_outputs sums it to src's shape
            dtype = getattr(self, "src_dtype", None)
            out[1] = grad if dtype is None else ops.to(grad, dtype, self.src_device)


class ZeroBackward0(_Generated):
    """zero_ with history: nothing of the old value reaches the output."""
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.zeros_like_data(grad)


class FillBackward2(ZeroBackward0):
    """fill_ with a number: zero_'s formula."""
    __slots__ = ()


class FillBackward3(ZeroBackward0):
    """fill_ with a 0-dim tensor: zero_'s formula, and the value gets the sum of the grad."""
    __slots__ = ()

    def formulas(self, grad, out):
        super().formulas(grad, out)
        if self.should_compute_output(1):
            out[1] = ops.sum(grad, None, False, None)


class ToCopyBackward0(_Generated):
    __slots__ = ("self_dtype", "self_device")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.to(grad, self.self_dtype, self.self_device)


# -- selection ------------------------------------------------------------------------------------------
class WhereBackward0(_Generated):
    __slots__ = ("condition",)
    _saved_tensor_names = ("condition",)

    def formulas(self, grad, out):
        if self.should_compute_output(1):
            out[1] = ops.where(self.condition, ops.zeros_scalar(grad), grad)
        if self.should_compute_output(0):
            out[0] = ops.where(self.condition, grad, ops.zeros_scalar(grad))


class MaskedFillBackward0(_Generated):
    __slots__ = ("mask",)
    _saved_tensor_names = ("mask",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.masked_fill(grad, self.mask, 0)


class MaskedFillBackward1(_Generated):
    __slots__ = ("mask",)
    _saved_tensor_names = ("mask",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.masked_fill(grad, self.mask, 0)
        if self.should_compute_output(1):
            out[1] = ops.sum(ops.where(self.mask, grad, ops.zeros_scalar(grad)))


# -- softmax, losses and the nodes of derivative formulas -----------------------------------------------
class SoftmaxBackward0(_Generated):
    __slots__ = ("dim", "result")
    _saved_tensor_names = ("result",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.softmax_backward_data(grad, self.result, self.dim)


class LogSoftmaxBackward0(_Generated):
    __slots__ = ("dim", "result")
    _saved_tensor_names = ("result",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.log_softmax_backward_data(grad, self.result, self.dim)


class MseLossBackward0(_Generated):
    __slots__ = ("self", "target", "reduction")
    _saved_tensor_names = ("self", "target")
    _saved_values = ("reduction",)
    _saved_int64 = ("reduction",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.mse_loss_backward(grad, self.self, self.target, self.reduction)
        if self.should_compute_output(1):
            out[1] = ops.mse_loss_backward(grad, self.target, self.self, self.reduction)


class TanhBackwardBackward0(_Generated):
    __slots__ = ("grad_output", "output")
    _saved_tensor_names = ("grad_output", "output")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.tanh_backward(grad, self.output)
        if self.should_compute_output(1):  # grad * (-2 * output * grad_output)
            out[1] = ops.mul(grad, ops.mul(ops.mul_scalar(self.output, -2), self.grad_output))


class SigmoidBackwardBackward0(_Generated):
    __slots__ = ("grad_output", "output")
    _saved_tensor_names = ("grad_output", "output")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.sigmoid_backward(grad, self.output)
        if self.should_compute_output(1):  # grad * grad_output * (-2 * output + 1)
            right = ops.add_scalar(ops.mul_scalar(self.output, -2), 1)
            out[1] = ops.mul(ops.mul(grad, self.grad_output), right)


class ThresholdBackwardBackward0(_Generated):
    __slots__ = ("self", "threshold")
    _saved_tensor_names = ("self",)
    _saved_values = ("threshold",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.threshold_backward(grad, self.self, self.threshold)
        if self.should_compute_output(1):
            out[1] = ops.zeros_like_data(grad)


class SoftmaxBackwardDataBackward0(_Generated):
    __slots__ = ("grad_output", "output", "dim")
    _saved_tensor_names = ("grad_output", "output")
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        go, o, d = self.grad_output, self.output, self.dim
        if self.should_compute_output(0):
            out[0] = ops.softmax_backward_data(grad, o, d)
        if self.should_compute_output(1):
            # grad_output * grad - (output * grad_output).sum(dim, true) * grad
            #   - grad_output * (output * grad).sum(dim, true), its operands built right to left (C, B, A)
            c = ops.mul(go, ops.sum(ops.mul(o, grad), d, keepdim=True))
            b = ops.mul(ops.sum(ops.mul(o, go), d, keepdim=True), grad)
            out[1] = ops.sub(ops.sub(ops.mul(go, grad), b), c)


class LogSoftmaxBackwardDataBackward0(_Generated):
    __slots__ = ("grad_output", "output", "dim")
    _saved_tensor_names = ("grad_output", "output")
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        go, o, d = self.grad_output, self.output, self.dim
        if self.should_compute_output(0):  # grad - (grad * output.exp()).sum(dim, true)
            out[0] = ops.sub(grad, ops.sum(ops.mul(grad, ops.exp(o)), d, keepdim=True))
        if self.should_compute_output(1):  # -grad_output.sum(dim, true) * output.exp() * grad (exp built first)
            e = ops.exp(o)
            out[1] = ops.mul(ops.mul(ops.neg(ops.sum(go, d, keepdim=True)), e), grad)


class MseLossBackwardBackward0(_Generated):
    __slots__ = ("grad_output", "self", "target", "reduction")
    _saved_tensor_names = ("grad_output", "self", "target")
    _saved_values = ("reduction",)
    _saved_int64 = ("reduction",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # validate_outputs sums it to grad_output's shape, after the others
            out[0] = ops.mse_loss_backward(grad, self.self, self.target, self.reduction)
        if self.should_compute_output(1):
            out[1] = self._double_backward(grad, self.self)
        if self.should_compute_output(2):
            out[2] = ops.neg(self._double_backward(grad, self.target))

    def _double_backward(self, grad, like):
        """mse_loss_double_backward(grad * grad_output, like, reduction): 2 * g, divided in place by the numel
        under mean reduction (one version)."""
        g = ops.mul_scalar(ops.mul(grad, self.grad_output), 2)  # torch saves the int 2
        if self.reduction == 1:
            g = _written(ops.div_scalar(g, like._data.size), 1)  # torch's `/=`
        return g


class SelectBackwardBackward0(_Generated):
    __slots__ = ("dim", "index")
    _saved_values = ("dim", "index")
    _saved_int64 = ("dim", "index")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.select(grad, self.dim, self.index)


class SliceBackwardBackward0(_Generated):
    __slots__ = ("dim", "start", "end", "step")
    _saved_values = ("dim", "end", "start", "step")
    _saved_int64 = ("dim", "end", "start", "step")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.slice_(grad, self.dim, self.start, self.end, self.step)


# -- the Tensor surface -------------------------------------------------------------------------------
class _MultiOutput(Node):
    """Base of generated nodes with several differentiable outputs (unbind, split): one grad slot each."""

    __slots__ = ()

    def apply(self, grads: list) -> list:
        self.check_saved()
        if all(g is None for g in grads):
            return [None] * len(self.next_edges)
        out: list = [None] * len(self.next_edges)
        if self.should_compute_output(0):
            out[0] = self.formula(grads)
        return out

    def formula(self, grads: list):
        raise NotImplementedError


class UnbindBackward0(_MultiOutput):
    __slots__ = ("dim",)
    _saved_values = ("dim",)
    _saved_int64 = ("dim",)

    def formula(self, grads):  # unbind_backward: undefined grads are zeros({}).expand(sizes); then stack
        like = next(g for g in grads if g is not None)
        zero = ops.zeros_of((), like)
        return ops.stack([g if g is not None else ops.expand(zero, like._data.shape) for g in grads], self.dim)


class SplitBackward0(_MultiOutput):
    __slots__ = ("dim", "sizes", "self_sym_sizes", "split_size")
    _saved_values = ("dim", "self_sym_sizes", "split_size")
    _saved_int64 = ("dim", "split_size")

    def formula(self, grads):  # split_with_sizes_backward: undefined grads are zeros; then cat
        like = next(g for g in grads if g is not None)
        parts = []
        d = _wrap_dim(self.dim, len(self.self_sym_sizes))
        for g, n in zip(grads, self.sizes, strict=True):
            if g is None:
                shape = list(self.self_sym_sizes)
                shape[d] = n
                g = ops.zeros_of(tuple(shape), like)
            parts.append(g)
        return ops.cat(parts, d)


class SplitWithSizesBackward0(SplitBackward0):
    __slots__ = ("split_sizes",)
    _saved_values = ("dim", "self_sym_sizes", "split_sizes")
    _saved_int64 = ("dim", "split_sizes")


def _where_zero(cond, grad):
    """where(cond, grad, at::scalar_tensor(0., grad.options()))."""
    return ops.where(cond, grad, ops.zeros_scalar(grad))


def _logical_(op, a, b):
    """a.logical_and_(b) / a.logical_or_(b) of torch's clamp formulas: in place, so `b` must broadcast to `a`'s
    shape (with tensor bounds of other shapes than self, torch's backward raises here)."""
    shape = np.broadcast_shapes(a._data.shape, b._data.shape)
    if shape != a._data.shape:
        raise RuntimeError(f"output with shape {list(a._data.shape)} doesn't match the broadcast shape "
                           f"{list(shape)}")
    return op(a, b)


def _clamp_backward(grad, s, lo, hi):
    """clamp_backward: the grad passes where min <= self <= max (the bounds themselves included)."""
    if lo is not None and hi is not None:
        cond = _logical_(ops.logical_and, ops.compare(np.greater_equal, s, lo), ops.compare(np.less_equal, s, hi))
    elif lo is not None:
        cond = ops.compare(np.greater_equal, s, lo)
    else:
        cond = ops.compare(np.less_equal, s, hi)
    return _where_zero(cond, grad)


class ClampBackward1(_Generated):
    __slots__ = ("self", "min", "max")
    _saved_tensor_names = ("self",)
    _saved_values = ("max", "min")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = _clamp_backward(grad, self.self, self.min, self.max)


class ClampBackward0(_Generated):
    """clamp with tensor bounds; a bound's grad is where self passed it (both given: min only if min < max)."""
    __slots__ = ("self", "min", "max")
    _saved_tensor_names = ("max", "min", "self")

    def formulas(self, grad, out):
        s, lo, hi = self.self, self.min, self.max  # the bounds' grads first, as torch's generated code
        if lo is not None and hi is not None:  # clamp_backward_min_max
            if self.should_compute_output(1):
                cond = _logical_(ops.logical_and, ops.compare(np.less, s, lo), ops.compare(np.less, lo, hi))
                out[1] = _where_zero(cond, grad)
            if self.should_compute_output(2):
                cond = _logical_(ops.logical_or, ops.compare(np.greater, s, hi), ops.compare(np.less, hi, lo))
                out[2] = _where_zero(cond, grad)
        elif lo is not None and self.should_compute_output(1):
            out[1] = _where_zero(ops.compare(np.less, s, lo), grad)
        elif hi is not None and self.should_compute_output(2):
            out[2] = _where_zero(ops.compare(np.greater, s, hi), grad)
        if self.should_compute_output(0):
            out[0] = _clamp_backward(grad, s, lo, hi)


class ClampMinBackward0(_Generated):
    __slots__ = ("self", "min")
    _saved_tensor_names = ("self",)
    _saved_values = ("min",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = _where_zero(ops.compare(np.greater_equal, self.self, self.min), grad)


class ClampMaxBackward0(_Generated):
    __slots__ = ("self", "max")
    _saved_tensor_names = ("self",)
    _saved_values = ("max",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = _where_zero(ops.compare(np.less_equal, self.self, self.max), grad)


class ClampMinBackward1(_Generated):
    __slots__ = ("self", "min")
    _saved_tensor_names = ("min", "self")

    def formulas(self, grad, out):
        if self.should_compute_output(1):  # the bound's grad first, as torch's generated code
            out[1] = _where_zero(ops.compare(np.less, self.self, self.min), grad)
        if self.should_compute_output(0):
            out[0] = _where_zero(ops.compare(np.greater_equal, self.self, self.min), grad)


class ClampMaxBackward1(_Generated):
    __slots__ = ("self", "max")
    _saved_tensor_names = ("max", "self")

    def formulas(self, grad, out):
        if self.should_compute_output(1):  # the bound's grad first, as torch's generated code
            out[1] = _where_zero(ops.compare(np.greater, self.self, self.max), grad)
        if self.should_compute_output(0):
            out[0] = _where_zero(ops.compare(np.less_equal, self.self, self.max), grad)


class Log1PBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad / (self + 1)
            out[0] = ops.div(grad, ops.add_scalar(self.self, 1))


class Expm1Backward0(_Generated):
    __slots__ = ("result",)
    _saved_tensor_names = ("result",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad * (result + 1)
            out[0] = ops.mul(grad, ops.add_scalar(self.result, 1))


class SignBackward0(_Generated):
    """sign saves nothing; its grad is plain zeros (zeros_like(grad)), not sgn's ZeroTensor."""

    __slots__ = ()
    _saved_tensor_names = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = ops.zeros_like_data(grad)


class MinBackward0(MaxBackward0):
    __slots__ = ()


class MinBackward1(MaxBackward1):
    __slots__ = ()


def _unsqueeze_multiple(t, dims: tuple | None, ndim: int):
    """unsqueeze_multiple: one dim is passed on as saved (maybe negative); several are wrapped, ascending."""
    if dims and len(dims) == 1:
        return ops.unsqueeze(t, dims[0])
    for d in _wrapped(dims or (), ndim):
        t = ops.unsqueeze(t, d)
    return t


def _var_backward(grad, self_, dims, correction, keepdim: bool):
    """var_backward: (2 / dof) * grad * (self - self.mean(dim, keepdim=True)); a None correction means 1.

    Over all elements with dof <= 0, torch's formula is grad * where(self == self.mean(), nan, inf) instead: the
    where of two numbers is float32 (the default dtype), so a (1,)-shaped input's grad is float32 and cast back
    by validate_outputs; with a dim, a negative dof is a plain negative factor."""
    correction = correction_value(correction)
    if self_._data.ndim == 0 or dims is None:
        dof = self_._data.size - correction
        if dof <= 0:
            same = ops.compare(np.equal, self_, ops.mean(self_))
            return ops.mul(grad, ops.where(same, math.nan, math.inf))
        right = ops.sub(self_, ops.mean(self_))
        return ops.mul(ops.mul_scalar(grad, 2.0 / dof), right)
    if not keepdim and self_._data.ndim > 1:
        grad = _unsqueeze_multiple(grad, dims, self_._data.ndim)
    n = 1
    for d in _wrapped(dims, self_._data.ndim):
        n *= self_._data.shape[d]
    dof = n - correction
    right = ops.sub(self_, ops.mean(self_, dims, True))
    return ops.mul(ops.mul_scalar(grad, 2.0 / dof if dof != 0 else math.inf), right)


class VarBackward0(_Generated):
    __slots__ = ("self", "dim", "correction", "keepdim")
    _saved_tensor_names = ("self",)
    _saved_values = ("correction", "dim", "keepdim")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = _var_backward(grad, self.self, self.dim, self.correction, self.keepdim)


class StdBackward0(_Generated):
    __slots__ = ("self", "dim", "correction", "keepdim", "result")
    _saved_tensor_names = ("self", "result")
    _saved_values = ("correction", "dim", "keepdim")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # (grad / (result * 2)).masked_fill_(result == 0, 0), then var's
            g = ops.div(grad, ops.mul_scalar(self.result, 2))
            g = ops.masked_fill(g, ops.compare(np.equal, self.result, 0), 0)
            out[0] = _var_backward(g, self.self, self.dim, self.correction, self.keepdim)


class LogsumexpBackward0(_Generated):
    __slots__ = ("self", "dim", "keepdim", "result")
    _saved_tensor_names = ("self", "result")
    _saved_values = ("dim", "keepdim")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad * (self - result).exp()
            result = self.result
            if not self.keepdim and self.self._data.ndim:
                grad = _unsqueeze_multiple(grad, self.dim, self.self._data.ndim)
                result = _unsqueeze_multiple(result, self.dim, self.self._data.ndim)
            out[0] = ops.mul(grad, ops.exp(ops.sub(self.self, result)))


class LinalgVectorNormBackward0(_Generated):
    __slots__ = ("self", "ord", "dim", "keepdim", "result")
    _saved_tensor_names = ("self", "result")
    _saved_values = ("dim", "keepdim", "ord")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if not self.should_compute_output(0):
            return
        s, norm, p = self.self, self.result, float(self.ord)  # norm_backward
        ndim = s._data.ndim
        if not self.keepdim and ndim:
            grad = _unsqueeze_multiple(grad, self.dim, ndim)
            norm = _unsqueeze_multiple(norm, self.dim, ndim)
        if p == 0.0:
            return  # the count of nonzeros has no gradient: an undefined grad
        if p == 1.0:
            out[0] = ops.mul(ops.sgn(s), grad)
        elif p == 2.0:
            from ._inplace import masked_fill_  # torch writes self / norm in place: it keeps self's layout

            scaled = masked_fill_(ops.div(s, norm), ops.compare(np.equal, norm, 0), 0)
            out[0] = ops.mul(grad, scaled)
        elif math.isinf(p):
            out[0] = _max_norm_backward(grad, s, norm, tuple(_wrapped(self.dim, ndim)) if self.dim else
                                        tuple(range(ndim)))
        elif p < 1.0:  # 0 at a zero element, whatever p - 1 makes of it
            powed = ops.masked_fill(_pow_inplace(ops.abs(s), p - 1), ops.compare(np.equal, s, 0), 0)
            self_scaled = ops.mul(ops.sgn(s), powed)
            right = ops.pow(norm, 1 - p)
            out[0] = ops.mul(ops.mul(self_scaled, grad), right)
        else:  # self * self.abs().pow_(p - 2), or self.sgn() * self.abs().pow_(p - 1) for p < 2
            if p < 2.0:
                powed = _pow_inplace(ops.abs(s), p - 1)
                self_scaled = ops.mul(ops.sgn(s), powed)
            else:
                powed = _pow_inplace(ops.abs(s), p - 2)
                self_scaled = ops.mul(s, powed)
            scale_v = ops.div(grad, ops.pow(norm, p - 1))
            if scale_v._zerotensor:  # torch's scale_v.masked_fill_ writes it in place: a ZeroTensor grad refuses
                raise RuntimeError(ERR_ZEROTENSOR_IMMUTABLE)
            scale_v = ops.masked_fill(scale_v, ops.compare(np.equal, norm, 0), 0)
            out[0] = ops.mul(self_scaled, scale_v)


def _max_norm_backward(grad, s, norm, dims: tuple):
    """inf and -inf norms: the grad is shared evenly by the elements whose magnitude is the norm (or NaN),
    with their sign: self.sgn() * ((grad / mask.sum(dim, true)) * mask)."""
    self_abs = ops.abs(s)
    mask = ops.logical_or(ops.compare(np.equal, self_abs, norm), ops.isnan(self_abs))
    count = ops.sum(mask, dims, True)
    right = ops.mul(ops.div(grad, count), mask)
    return ops.mul(ops.sgn(s), right)


class IndexSelectBackward0(_Generated):
    __slots__ = ("dim", "index", "self_sym_sizes")
    _saved_tensor_names = ("index",)
    _saved_values = ("dim", "self_sym_sizes")
    _saved_int64 = ("dim",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # zeros(self_sizes).index_add_(dim, index, grad)
            out[0] = _written(ops.index_add(ops.zeros_of(self.self_sym_sizes, grad), self.dim, self.index, grad), 1)


class IndexAddBackward0(_Generated):
    __slots__ = ("dim", "index", "source", "alpha", "source_dim")
    _saved_tensor_names = ("index", "source")
    _saved_values = ("alpha", "dim", "source_dim")
    _saved_int64 = ("dim", "source_dim")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            out[0] = grad
        if self.should_compute_output(1):  # grad.index_select(dim, index).expand_as(source), times alpha
            g = ops.index_select(grad, self.dim, self.index)
            if self.source_dim > 0:
                g = ops.expand(g, self.source._data.shape)
            out[1] = g if self.alpha == 1 else ops.mul_scalar(g, self.alpha)


class IndexBackward0(_Generated):
    """`key` is the numpy key the engine indexes with; `indices` the index tensors as torch saves them (a mask as
    given, None for a dim indexed whole), a list of saved tensors."""

    __slots__ = ("key", "indices", "self_sym_sizes")
    _saved_tensor_names = ("indices",)
    _saved_values = ("self_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # zeros(self_sizes).index_put_(indices, grad, accumulate=True)
            zeros = ops.zeros_of(self.self_sym_sizes, grad)
            out[0] = _written(ops.index_put_accumulate(zeros, self.key, grad, self.indices), 1)


class IndexPutImplBackward0(_Generated):
    __slots__ = ("key", "indices", "accumulate")
    _saved_tensor_names = ("indices",)
    _saved_values = ("accumulate",)

    def formulas(self, grad, out):
        if self.should_compute_output(1):
            out[1] = ops.index_key(grad, self.key, self.indices)
        if self.should_compute_output(0):
            out[0] = grad


class BmmBackward0(_Generated):
    __slots__ = ("self", "mat2")
    _saved_tensor_names = ("mat2", "self")

    def formulas(self, grad, out):
        if self.should_compute_output(1):  # self.transpose(1, 2).bmm(grad)
            out[1] = ops.bmm(ops.transpose(self.self, 1, 2), grad)
        if self.should_compute_output(0):  # grad.bmm(mat2.transpose(1, 2))
            out[0] = ops.bmm(grad, ops.transpose(self.mat2, 1, 2))


class ReshapeAliasBackward0(_Generated):
    __slots__ = ("self_sym_sizes",)
    _saved_values = ("self_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):  # grad.reshape_symint(self.sym_sizes())
            out[0] = ops.reshape(grad, self.self_sym_sizes)


def _pow_inplace(t, exponent: float):
    """t.pow_(exponent) on a fresh tensor, recorded as generated in-place code does: PowBackward0 takes its seq_nr,
    then `original_self = self.clone()` (CloneBackward0), and that clone is what the node saves (and packs)."""
    return ops.with_original_self(t, ops.pow, exponent)


# -- views written in place (engine/_views.py) ------------------------------------------------------------
class AsStridedBackward0(_Generated):
    """The grad_fn a view gets when its memory was written in place since its own was set."""

    __slots__ = ("size", "stride", "storage_offset", "self_geometry")
    _saved_values = ("size", "storage_offset", "stride")  # the offset None when not given: the input's own

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            offset = self.self_geometry[2] if self.storage_offset is None else self.storage_offset
            out[0] = ops.as_strided_backward(grad, self.self_geometry, self.size, self.stride, offset)


class CopySlices(Node):
    """The base's grad_fn after an in-place op with history on one of its views: runs the op's node `fn` on
    the view's part of the base's grad and passes the rest through (PyTorch's CopySlices)."""

    __slots__ = ("base_geometry", "view_geometry", "fn")
    _name = "torch::autograd::CopySlices"

    def apply(self, grads: list) -> list:
        grad = grads[0]
        n = len(self.next_edges)
        if grad is None:
            return [None] * n
        from ._inplace import copy_  # it imports this module

        if self.fn is None:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        result = ops.empty_like_geometry(grad, self.base_geometry)
        copy_(result, grad)
        grad_slice = ops.as_strided(result, *self.view_geometry)
        self._update_exec_info()
        res = self.fn.apply([ops.clone(grad_slice)])
        out: list = [None] * n
        for i in range(n):
            if self.should_compute_output(i) and res[i] is not None:  # an undefined grad counts as zeros
                if i == 0:
                    copy_(grad_slice, res[0])
                    out[0] = result
                else:
                    out[i] = res[i]
        return out

    def _update_exec_info(self) -> None:
        """Under autograd.grad's pruning, mark `fn`'s first next node (the view's old history, which the
        engine never walked to) as needed when this node's first output is: so `fn` computes it."""
        graph_task = tls.current_graph_task
        if graph_task is None or not graph_task.exec_info:
            return
        node = self.fn.next_edges[0][0]
        if node is not None and node not in graph_task.exec_info and self.should_compute_output(0):
            info = graph_task.exec_info[node] = ExecInfo()
            info.needed = True

    def release_variables(self) -> None:
        self.fn = None
        self._released = True
