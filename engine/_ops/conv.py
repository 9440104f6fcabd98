"""at::convolution on CPU for 1-d and 2-d inputs → ConvolutionBackward0, as PyTorch 2.13 records it.

The kernel is im2col over a strided window view of the zero-padded input, one matmul per group. Backward computes
(grad_input, grad_weight, grad_bias) in numpy for the slots asked for. Under create_graph torch's formula records
ConvolutionBackwardBackward0; the engine refuses that graph with NotImplementedError rather than record it wrongly.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dtype import c_type_name, scalar_type_name
from .._functions import _Generated
from .._tensor import Tensor
from ._common import _out, common_device, needs_grad, save_inputs
from .nn_extra import _record_many


def _sizes(shape: tuple) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def windows(xp: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out: tuple) -> np.ndarray:
    """A read-only view (N, C, *out, *kernel) of the padded input `xp` (N, C, *spatial): element [n, c, o.., k..]
    is xp[n, c, o*stride + k*dilation ..]."""
    st = xp.strides
    nd = len(kernel)
    shape = xp.shape[:2] + tuple(out) + tuple(kernel)
    strides = st[:2] + tuple(st[2 + i] * stride[i] for i in range(nd)) + tuple(st[2 + i] * dilation[i]
                                                                                for i in range(nd))
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def scatter_windows(gwin: np.ndarray, padded: tuple, kernel: tuple, stride: tuple, dilation: tuple,
                    out: tuple) -> np.ndarray:
    """The adjoint of windows(): sum each window element of `gwin` (N, C, *out, *kernel) back into a zero array of
    the padded input's shape."""
    res = np.zeros(padded, dtype=gwin.dtype)
    for kk in np.ndindex(*kernel):
        key = (slice(None), slice(None)) + tuple(
            slice(k * d, k * d + s * (o - 1) + 1, s) for k, d, s, o in zip(kk, dilation, stride, out, strict=True))
        res[key] += gwin[(Ellipsis,) + kk]
    return res


def _unpad(a: np.ndarray, padding: tuple) -> np.ndarray:
    return a[(slice(None), slice(None)) + tuple(slice(p, a.shape[2 + i] - p) for i, p in enumerate(padding))]


class ConvolutionBackward0(_Generated):
    __slots__ = ("input", "weight", "bias_sym_sizes_opt", "stride", "padding", "dilation", "transposed",
                 "output_padding", "groups")
    _saved_tensor_names = ("input", "weight")
    _saved_values = ("bias_sym_sizes_opt", "dilation", "groups", "output_padding", "padding", "stride", "transposed")

    def formulas(self, grad, out):
        mask = [self.should_compute_output(i) for i in range(3)]
        if any(mask):
            if needs_grad(grad, self.input, self.weight):
                raise NotImplementedError("agdb's engine does not record convolution_backward's graph "
                                          "(ConvolutionBackwardBackward0); take this grad without create_graph=True")
            backward = transposed_backward if self.transposed else convolution_backward
            res = backward(grad._data, self.input._data, self.weight._data, self.stride, self.padding,
                           self.dilation, self.groups, mask)
            for i in range(3):
                if mask[i]:
                    out[i] = _out(res[i], self.input)


def _check(a: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple, padding: tuple, dilation: tuple,
           groups: int) -> None:
    """check_shape_forward's checks, in its order (made after the node took its seq_nr)."""
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    ws, xs = weight._data.shape, a._data.shape
    if len(ws) != len(xs):
        raise RuntimeError(f"Expected {len(ws)}-dimensional input for {len(ws)}-dimensional weight {_sizes(ws)}, but "
                           f"got {len(xs)}-dimensional input of size {_sizes(xs)} instead")
    if ws[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                           f"weight of size {_sizes(ws)} instead")
    if ws[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{_sizes(ws)}] instead")
    if xs[1] != ws[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {_sizes(ws)}, expected input{_sizes(xs)} to have "
                           f"{ws[1] * groups} channels, but got {xs[1]} channels instead")
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != ws[0]):
        raise RuntimeError(f"Given weight of size {_sizes(ws)}, expected bias to be 1-dimensional with {ws[0]} "
                           f"elements, but got bias of size {_sizes(bias._data.shape)} instead")
    padded = [xs[2 + i] + 2 * padding[i] for i in range(len(xs) - 2)]
    kernel = [dilation[i] * (ws[2 + i] - 1) + 1 for i in range(len(xs) - 2)]
    if any(p < k for p, k in zip(padded, kernel, strict=True)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input "
                           "size")


def _out_sizes(xs: tuple, ws: tuple, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    return tuple((xs[2 + i] + 2 * padding[i] - dilation[i] * (ws[2 + i] - 1) - 1) // stride[i] + 1
                 for i in range(len(xs) - 2))


def _pad(x: np.ndarray, padding: tuple) -> np.ndarray:
    if not any(padding):
        return x
    return np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])


def _im2col(x: np.ndarray, ws: tuple, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> tuple:
    """(cols (g, N*P, cg*K), out sizes): each output position's window, per group, as one row."""
    n, c = x.shape[:2]
    out = _out_sizes(x.shape, ws, stride, padding, dilation)
    win = windows(_pad(x, padding), ws[2:], stride, dilation, out)  # (N, C, *out, *kernel)
    nd = len(out)
    p, k = math.prod(out), math.prod(ws[2:])
    win = win.reshape((n, groups, c // groups, p, k))
    cols = win.transpose(1, 0, 3, 2, 4).reshape(groups, n * p, (c // groups) * k)
    return cols, out, nd


def convolution(a: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple, padding: tuple, dilation: tuple,
                groups: int, output_padding: tuple | None = None) -> Tensor:
    """at::convolution (not transposed) → ConvolutionBackward0 with slots (input, weight, bias). `padding` and
    `output_padding` are kept as given (padding='valid' passes `(0,)` for both); one value means every dim."""
    node = save_inputs(ConvolutionBackward0(), input=a, weight=weight,
                       bias_sym_sizes_opt=(0,) if bias is None else tuple(bias._data.shape), stride=stride,
                       padding=padding, dilation=dilation, transposed=False,
                       output_padding=(0,) * len(stride) if output_padding is None else output_padding,
                       groups=groups) if needs_grad(a, weight, bias) else None
    nd = a._data.ndim - 2
    padding = padding * nd if len(padding) == 1 else padding
    _check(a, weight, bias, stride, padding, dilation, groups)
    common_device(a, weight, bias)
    if weight._data.dtype != a._data.dtype:  # the CPU kernel's check, after the shape checks
        raise RuntimeError(f"expected scalar type {scalar_type_name(a)} but found {scalar_type_name(weight)}")
    y = _convolve(a._data, weight._data, stride, padding, dilation, groups)
    if bias is not None:
        y = y + bias._data.reshape((-1,) + (1,) * (y.ndim - 2))
    result = _out(np.ascontiguousarray(y, dtype=a._data.dtype), a)
    if node is not None:
        _record_many(node, (a, weight, bias), [result])
    return result


def _convolve(x: np.ndarray, w: np.ndarray, stride: tuple, padding: tuple, dilation: tuple,
              groups: int) -> np.ndarray:
    """The convolution of `x` (N, C, *spatial) with `w` (O, C/groups, *kernel), no bias."""
    ws = w.shape
    cols, out, nd = _im2col(x, ws, stride, padding, dilation, groups)
    og = ws[0] // groups
    wmat = w.reshape(groups, og, -1).transpose(0, 2, 1)  # (g, cg*K, og)
    res = np.matmul(cols, wmat)  # (g, N*P, og)
    n = x.shape[0]
    y = res.reshape((groups, n) + out + (og,))
    y = np.moveaxis(y, -1, 1).reshape((groups * og, n) + out)  # channel = g*og + o
    return np.moveaxis(y, 0, 1)


def convolution_backward(g: np.ndarray, x: np.ndarray, w: np.ndarray, stride: tuple, padding: tuple,
                         dilation: tuple, groups: int, mask: list) -> list:
    """(grad_input, grad_weight, grad_bias) as arrays, None where `mask` is False."""
    ws = w.shape
    n = x.shape[0]
    og = ws[0] // groups
    out = g.shape[2:]
    nd = len(out)
    padding = padding * nd if len(padding) == 1 else padding
    gmat = np.moveaxis(g, 1, -1).reshape((n,) + tuple(out) + (groups, og))
    gmat = np.moveaxis(gmat, -2, 0).reshape(groups, -1, og)  # (g, N*P, og)
    res: list = [None, None, None]
    if mask[0]:
        wmat = w.reshape(groups, og, -1)  # (g, og, cg*K)
        gcols = np.matmul(gmat, wmat)  # (g, N*P, cg*K)
        cg = ws[1]
        gwin = gcols.reshape((groups, n) + tuple(out) + (cg,) + ws[2:])
        # to (N, g, cg, *out, *kernel)
        gwin = np.moveaxis(gwin, 2 + nd, 1)  # (g, cg, N, *out, *kernel)
        gwin = np.moveaxis(gwin, 2, 0).reshape((n, groups * cg) + tuple(out) + ws[2:])
        padded = x.shape[:2] + tuple(x.shape[2 + i] + 2 * padding[i] for i in range(nd))
        gx = scatter_windows(gwin, padded, ws[2:], stride, dilation, tuple(out))
        res[0] = np.ascontiguousarray(_unpad(gx, padding), dtype=x.dtype)
    if mask[1]:
        cols, _, _ = _im2col(x, ws, stride, padding, dilation, groups)
        gw = np.matmul(cols.transpose(0, 2, 1), gmat)  # (g, cg*K, og)
        res[1] = np.ascontiguousarray(gw.transpose(0, 2, 1).reshape(ws), dtype=x.dtype)
    if mask[2]:
        res[2] = np.asarray(g.sum(axis=(0,) + tuple(range(2, 2 + nd))), dtype=x.dtype)
    return res


def expand_param(value: Any, nd: int, name: str = "") -> tuple:
    """An int or a sequence for each spatial dim, as torch's IntArrayRef argument expands it."""
    if isinstance(value, int):
        return (value,) * nd
    value = tuple(int(v) for v in value)
    if len(value) == 1 and nd > 1:
        return value * nd
    return value


def _same_padding(weight: Tensor, dilation: tuple, nd: int) -> tuple:
    pads = []
    for i in range(nd):
        total = dilation[i] * (weight._data.shape[2 + i] - 1)
        if total % 2:
            raise NotImplementedError("agdb's engine does not implement padding='same' with an even effective kernel "
                                      "size (torch pads the input asymmetrically with constant_pad_nd first); run "
                                      "the program on real torch with `agdb torch SCRIPT`")
        pads.append(total // 2)
    return tuple(pads)


def conv_nd(name: str, nd: int, a: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
            dilation: Any, groups: int) -> Tensor:
    """at::conv1d / at::conv2d: batchify an unbatched input (UnsqueezeBackward0 before, SqueezeBackward1 after),
    resolve a padding string, then convolution."""
    from .shape import squeeze, unsqueeze

    if bias is not None and bias._data.dtype != a._data.dtype:
        raise RuntimeError(f"Input type ({c_type_name(a)}) and bias type ({c_type_name(bias)}) should be the same")
    dim = a._data.ndim
    if dim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got input of "
                           f"size: {_sizes(a._data.shape)}")
    batched = dim == nd + 2
    output_padding = None
    x = a if batched else unsqueeze(a, 0)
    stride_t, dilation_t = expand_param(stride, nd), expand_param(dilation, nd)
    if isinstance(padding, str):
        if padding == "valid":
            pad_t, output_padding = (0,), (0,)
        elif padding == "same":
            if any(s != 1 for s in stride_t):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pad_t = _same_padding(weight, dilation_t, nd)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pad_t = expand_param(padding, nd)
    out = convolution(x, weight, bias, stride_t, pad_t, dilation_t, groups, output_padding)
    return out if batched else squeeze(out, 0)


# -- transposed convolution: the adjoint of the convolution above, with weight (C_in, C_out/groups, *kernel) --------

def transposed_sizes(xs: tuple, ws: tuple, stride: tuple, padding: tuple, output_padding: tuple,
                     dilation: tuple) -> tuple:
    return tuple((xs[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ws[2 + i] - 1) + output_padding[i] + 1
                 for i in range(len(xs) - 2))


def _check_transposed(a: Tensor, weight: Tensor, bias: Tensor | None, groups: int) -> None:
    """check_shape_forward's checks for transposed=1, in its order."""
    ws, xs = weight._data.shape, a._data.shape
    if len(ws) != len(xs):
        raise RuntimeError(f"Expected {len(ws)}-dimensional input for {len(ws)}-dimensional weight {_sizes(ws)}, but "
                           f"got {len(xs)}-dimensional input of size {_sizes(xs)} instead")
    if xs[1] != ws[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {_sizes(ws)}, expected input{_sizes(xs)} to have "
                           f"{ws[0]} channels, but got {xs[1]} channels instead")
    if bias is not None and (bias._data.ndim != 1 or bias._data.shape[0] != ws[1] * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {_sizes(ws)}, expected bias to be 1-dimensional with "
                           f"{ws[1] * groups} elements, but got bias of size {_sizes(bias._data.shape)} instead")


def convolution_transposed(a: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple, padding: tuple,
                           output_padding: tuple, groups: int, dilation: tuple) -> Tensor:
    """at::convolution with transposed=True → ConvolutionBackward0 (transposed saved True); the tuples have one
    value per spatial dim. The result is convolution's grad_input for a grad of `a`'s values."""
    node = save_inputs(ConvolutionBackward0(), input=a, weight=weight,
                       bias_sym_sizes_opt=(0,) if bias is None else tuple(bias._data.shape), stride=stride,
                       padding=padding, dilation=dilation, transposed=True, output_padding=output_padding,
                       groups=groups) if needs_grad(a, weight, bias) else None
    _check_transposed(a, weight, bias, groups)
    common_device(a, weight, bias)
    if weight._data.dtype != a._data.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(a)} but found {scalar_type_name(weight)}")
    x, w = a._data, weight._data
    out = transposed_sizes(x.shape, w.shape, stride, padding, output_padding, dilation)
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, x.shape[2:]))}). Calculated output "
                           f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
    shape = (x.shape[0], w.shape[1] * groups) + out
    y = convolution_backward(x, np.empty(shape, x.dtype), w, stride, padding, dilation, groups,
                             [True, False, False])[0]
    if bias is not None:
        y = y + bias._data.reshape((-1,) + (1,) * len(out))
    result = _out(np.ascontiguousarray(y, dtype=x.dtype), a)
    if node is not None:
        _record_many(node, (a, weight, bias), [result])
    return result


def transposed_backward(g: np.ndarray, x: np.ndarray, w: np.ndarray, stride: tuple, padding: tuple,
                        dilation: tuple, groups: int, mask: list) -> list:
    """(grad_input, grad_weight, grad_bias) of a transposed convolution: grad_input is the convolution of the grad,
    grad_weight the convolution's weight grad with the roles of input and grad swapped."""
    res: list = [None, None, None]
    if mask[0]:
        gx = _convolve(g, w, stride, padding, dilation, groups)
        res[0] = np.ascontiguousarray(gx[(Ellipsis,) + tuple(slice(0, s) for s in x.shape[2:])], dtype=x.dtype)
    if mask[1]:
        res[1] = convolution_backward(x, g, w, stride, padding, dilation, groups, [False, True, False])[1]
    if mask[2]:
        res[2] = np.asarray(g.sum(axis=(0,) + tuple(range(2, g.ndim))), dtype=x.dtype)
    return res


def conv_transpose_nd(name: str, nd: int, a: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
                      padding: Any, output_padding: Any, groups: int, dilation: Any) -> Tensor:
    """at::conv_transpose1d / 2d: batchify an unbatched input (UnsqueezeBackward0 before, SqueezeBackward1 after),
    then a transposed convolution."""
    from .shape import squeeze, unsqueeze

    dim = a._data.ndim
    if dim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got input of "
                           f"size: {_sizes(a._data.shape)}")
    batched = dim == nd + 2
    x = a if batched else unsqueeze(a, 0)
    out = convolution_transposed(x, weight, bias, expand_param(stride, nd), expand_param(padding, nd),
                                 expand_param(output_padding, nd), groups, expand_param(dilation, nd))
    return out if batched else squeeze(out, 0)
