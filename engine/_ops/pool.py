"""2-d pooling on CPU as PyTorch 2.13 records it: max_pool2d_with_indices (MaxPool2DWithIndicesBackward0),
avg_pool2d (AvgPool2DBackward0) and adaptive_avg_pool2d (AdaptiveAvgPool2DBackward0, or a mean over the last two
dims for a 1x1 output, as torch's composite takes it).

Each node is made, and saves its inputs, before the kernel's checks (torch's order), so a refused call has taken its
seq_nr. Under create_graph torch's formulas record *BackwardBackward0 nodes; the engine refuses those graphs with
NotImplementedError rather than record them wrongly.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._functions import _Generated
from .._tensor import Tensor
from ._common import _out, needs_grad, record, save_inputs
from .conv import windows


def _sizes(shape: tuple) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _no_double_backward(name: str, *tensors: Tensor) -> None:
    if needs_grad(*tensors):
        raise NotImplementedError(f"agdb's engine does not record {name}'s graph (create_graph=True through it); take "
                                  "this grad without create_graph=True")


def output_size(size: int, k: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """pooling_output_shape, with its checks."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > ((k - 1) * dilation + 1) // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, kernel_size={k} "
                           f"and dilation={dilation}")
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _shape_check(a: Tensor, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple) -> None:
    """pool2d_shape_check."""
    if k[0] <= 0 or k[1] <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {k[0]} kW: {k[1]}")
    if s[0] <= 0 or s[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {s[0]} dW: {s[1]}")
    if d[0] <= 0 or d[1] <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {d[0]} dilationW: {d[1]}")
    shape = a._data.shape
    nd = len(shape)
    valid = nd >= 3 and shape[1] != 0 and shape[2] != 0
    if not ((nd == 3 and shape[0] != 0 and valid) or (nd == 4 and valid and shape[3] != 0)):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                           f"got:{_sizes(shape)}")
    if not (k[1] // 2 >= p[1] and k[0] // 2 >= p[0]):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padW = {p[1]}, "
                           f"padH = {p[0]}, kW = {k[1]}, kH = {k[0]}")
    if out[0] < 1 or out[1] < 1:
        raise RuntimeError(f"Given input size: ({shape[-3]}x{shape[-2]}x{shape[-1]}). Calculated output size: "
                           f"({shape[-3]}x{out[0]}x{out[1]}). Output size is too small")


def _params(op: str, kernel_size: tuple, stride: tuple, padding: tuple, dilation: tuple | None = None) -> tuple:
    """The meta function's reading of its int lists: (k, s, p, d) as pairs."""
    if len(kernel_size) not in (1, 2):
        raise RuntimeError(f"{op}: kernel_size must either be a single int, or a tuple of two ints")
    k = (kernel_size[0], kernel_size[-1])
    if len(stride) not in (0, 1, 2):
        raise RuntimeError(f"{op}: stride must either be omitted, a single int, or a tuple of two ints")
    s = k if not stride else (stride[0], stride[-1])
    if len(padding) not in (1, 2):
        raise RuntimeError(f"{op}: padding must either be a single int, or a tuple of two ints")
    p = (padding[0], padding[-1])
    if dilation is None:
        return k, s, p, (1, 1)
    if len(dilation) not in (1, 2):
        raise RuntimeError(f"{op}: dilation must be either a single int, or a tuple of two ints")
    return k, s, p, (dilation[0], dilation[-1])


def _padded(x: np.ndarray, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple, fill: float) -> np.ndarray:
    """x (M, H, W) padded with `fill`: p before, and after as far as the last window reaches (ceil_mode)."""
    after = [max(p[i], (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - x.shape[1 + i] - p[i]) for i in range(2)]
    return np.pad(x, [(0, 0), (p[0], after[0]), (p[1], after[1])], constant_values=fill)


def _planes(a: Tensor) -> np.ndarray:
    x = a._data
    return x.reshape((-1,) + x.shape[-2:])


# -- max_pool2d ---------------------------------------------------------------------------------------------
class MaxPool2DWithIndicesBackward0(_Generated):
    __slots__ = ("self", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "result1")
    _saved_tensor_names = ("self", "result1")
    _saved_values = ("ceil_mode", "dilation", "kernel_size", "padding", "stride")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            _no_double_backward("max_pool2d_with_indices_backward", grad)
            x = self.self._data
            planes = int(np.prod(x.shape[:-2], dtype=np.int64))
            hw = x.shape[-2] * x.shape[-1]
            res = np.zeros(planes * hw, dtype=x.dtype)
            idx = self.result1._data.reshape(planes, -1) + (np.arange(planes) * hw)[:, None]
            np.add.at(res, idx.ravel(), grad._data.reshape(planes, -1).ravel())
            out[0] = _out(res.reshape(x.shape), self.self)


def max_pool2d_with_indices(a: Tensor, kernel_size: tuple, stride: tuple, padding: tuple, dilation: tuple,
                            ceil_mode: bool) -> tuple[Tensor, Tensor]:
    """(values, indices into each H*W plane) → MaxPool2DWithIndicesBackward0 (indices saved as result1)."""
    node = save_inputs(MaxPool2DWithIndicesBackward0(), self=a, kernel_size=kernel_size, stride=stride,
                       padding=padding, dilation=dilation, ceil_mode=ceil_mode) if needs_grad(a) else None
    k, s, p, d = _params("max_pool2d", kernel_size, stride, padding, dilation)
    shape = a._data.shape
    if len(shape) not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    out = (output_size(shape[-2], k[0], p[0], s[0], d[0], ceil_mode),
           output_size(shape[-1], k[1], p[1], s[1], d[1], ceil_mode))
    _shape_check(a, k, s, p, d, out)
    x = _planes(a)
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    win = windows(_padded(x, k, s, p, d, out, low)[:, None], k, s, d, out)[:, 0]  # (M, OH, OW, KH, KW)
    flat = win.reshape(win.shape[:3] + (-1,))
    arg = flat.argmax(axis=-1)  # the first maximum, as the kernel's strict `>` keeps
    values = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    kh, kw = np.divmod(arg, k[1])
    rows = np.arange(out[0])[:, None] * s[0] - p[0] + kh * d[0]
    cols = np.arange(out[1])[None, :] * s[1] - p[1] + kw * d[1]
    indices = (rows * shape[-1] + cols).astype(np.int64)
    oshape = shape[:-2] + out
    result = _out(np.ascontiguousarray(values.reshape(oshape)), a)
    idx = _out(np.ascontiguousarray(indices.reshape(oshape)), a)
    if node is not None:
        node.result1 = idx
        record(node, (a,), result)
    return result, idx


# -- avg_pool2d ---------------------------------------------------------------------------------------------
class AvgPool2DBackward0(_Generated):
    __slots__ = ("self", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
    _saved_tensor_names = ("self",)
    _saved_values = ("ceil_mode", "count_include_pad", "divisor_override", "kernel_size", "padding", "stride")

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            _no_double_backward("avg_pool2d_backward", grad)
            x = self.self._data
            k, s, p, d = _params("avg_pool2d", self.kernel_size, self.stride, self.padding)
            osize = grad._data.shape[-2:]
            div = _divisors(x.shape[-2:], k, s, p, osize, self.count_include_pad, self.divisor_override)
            g = grad._data.reshape((-1,) + tuple(osize)) / div
            padded = _padded(np.zeros_like(_planes(self.self)), k, s, p, d, osize, 0)
            for i in range(k[0]):
                for j in range(k[1]):
                    padded[:, i:i + s[0] * (osize[0] - 1) + 1:s[0], j:j + s[1] * (osize[1] - 1) + 1:s[1]] += g
            h, w = x.shape[-2:]
            out[0] = _out(np.ascontiguousarray(padded[:, p[0]:p[0] + h, p[1]:p[1] + w]).reshape(x.shape).astype(
                x.dtype, copy=False), self.self)


def _divisors(size: tuple, k: tuple, s: tuple, p: tuple, out: tuple, count_include_pad: bool,
              divisor_override: int | None) -> np.ndarray:
    """(OH, OW) divisors: the override, or each window's size within the padded input (count_include_pad), or
    within the input."""
    if divisor_override is not None:
        return np.full(out, float(divisor_override))
    per_dim = []
    for i in range(2):
        start = np.arange(out[i]) * s[i] - p[i]
        end = np.minimum(start + k[i], size[i] + p[i])
        if count_include_pad:
            per_dim.append(end - start)
        else:
            per_dim.append(np.minimum(end, size[i]) - np.maximum(start, 0))
    return np.outer(per_dim[0], per_dim[1]).astype(np.float64)


def avg_pool2d(a: Tensor, kernel_size: tuple, stride: tuple, padding: tuple, ceil_mode: bool,
               count_include_pad: bool, divisor_override: int | None) -> Tensor:
    """Window means → AvgPool2DBackward0."""
    node = save_inputs(AvgPool2DBackward0(), self=a, kernel_size=kernel_size, stride=stride, padding=padding,
                       ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                       divisor_override=divisor_override) if needs_grad(a) else None
    k, s, p, d = _params("avg_pool2d", kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    shape = a._data.shape
    for dim in (-3, -2, -1):
        if -dim > len(shape):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-len(shape)}, {len(shape) - 1}], "
                             f"but got {dim})")
    out = (output_size(shape[-2], k[0], p[0], s[0], 1, ceil_mode),
           output_size(shape[-1], k[1], p[1], s[1], 1, ceil_mode))
    _shape_check(a, k, s, p, d, out)
    x = _planes(a)
    xp = _padded(x, k, s, p, d, out, 0)
    total = np.zeros((x.shape[0],) + out, dtype=np.float64 if x.dtype.kind != "f" else x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            total += xp[:, i:i + s[0] * (out[0] - 1) + 1:s[0], j:j + s[1] * (out[1] - 1) + 1:s[1]]
    div = _divisors(shape[-2:], k, s, p, out, count_include_pad, divisor_override)
    res = np.trunc(total / div) if x.dtype.kind != "f" else total / div  # integer kernels divide with C++'s `/`
    result = _out(np.ascontiguousarray(res.reshape(shape[:-2] + out).astype(x.dtype, copy=False)), a)
    if node is not None:
        record(node, (a,), result)
    return result


# -- adaptive_avg_pool2d ------------------------------------------------------------------------------------
def _bins(size: int, out: int) -> list:
    return [(math.floor(i * size / out), math.ceil((i + 1) * size / out)) for i in range(out)]


class AdaptiveAvgPool2DBackward0(_Generated):
    __slots__ = ("self",)
    _saved_tensor_names = ("self",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            _no_double_backward("_adaptive_avg_pool2d_backward", grad)
            x = self.self._data
            g = grad._data.reshape((-1,) + grad._data.shape[-2:])
            res = np.zeros((g.shape[0],) + x.shape[-2:], dtype=x.dtype)
            for i, (h0, h1) in enumerate(_bins(x.shape[-2], g.shape[-2])):
                for j, (w0, w1) in enumerate(_bins(x.shape[-1], g.shape[-1])):
                    res[:, h0:h1, w0:w1] += (g[:, i, j] / ((h1 - h0) * (w1 - w0)))[:, None, None]
            out[0] = _out(res.reshape(x.shape), self.self)


def adaptive_avg_pool2d(a: Tensor, output_size: Any) -> Tensor:
    """at::adaptive_avg_pool2d: a 1x1 output is mean(-1, -2, keepdim) (MeanBackward1), else
    _adaptive_avg_pool2d → AdaptiveAvgPool2DBackward0."""
    from .reduce import mean

    size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if len(size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if size[0] < 0 or size[1] < 0:
        raise RuntimeError(f"adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but "
                           f"received {{{size[0]}, {size[1]}}}")
    if size == (1, 1):
        return mean(a, [-1, -2], True)
    node = save_inputs(AdaptiveAvgPool2DBackward0(), self=a) if needs_grad(a) else None
    shape = a._data.shape
    if len(shape) not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {_sizes(shape)}")
    for i in (-2, -1):
        if shape[i] <= 0:
            raise RuntimeError(f"adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {_sizes(shape)} with dimension {i + len(shape)} "
                               "being empty")
    x = _planes(a)
    res = np.empty((x.shape[0],) + size, dtype=x.dtype)
    for i, (h0, h1) in enumerate(_bins(shape[-2], size[0])):
        for j, (w0, w1) in enumerate(_bins(shape[-1], size[1])):
            res[:, i, j] = x[:, h0:h1, w0:w1].mean(axis=(1, 2))
    result = _out(res.reshape(shape[:-2] + size), a)
    if node is not None:
        record(node, (a,), result)
    return result
