"""`engine.nn.functional`'s CNN layers (conv1d, conv2d, conv_transpose1d/2d, max_pool2d, avg_pool2d,
adaptive_avg_pool2d, batch_norm) and scaled_dot_product_attention, declared on the dispatch point.

engine/nn/functional.py imports this module before it builds its table, so these names are part of it.
"""
from __future__ import annotations

from typing import Any

from .._dispatch import public
from .._ops import attention, conv, pool
from .._ops import batch_norm as batch_norm_op
from .._tensor import Tensor


@public("conv1d", functional=True)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-d convolution of (N, C, L) or (C, L) → ConvolutionBackward0 (unbatched: Unsqueeze/Squeeze around it)."""
    return conv.conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@public("conv2d", functional=True)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-d convolution of (N, C, H, W) or (C, H, W) → ConvolutionBackward0."""
    return conv.conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@public("conv_transpose1d", functional=True)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """1-d transposed convolution of (N, C, L) or (C, L) → ConvolutionBackward0."""
    return conv.conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                                  dilation)


@public("conv_transpose2d", functional=True)
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """2-d transposed convolution of (N, C, H, W) or (C, H, W) → ConvolutionBackward0."""
    return conv.conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                                  dilation)


def _ints(value: Any) -> tuple:
    """An IntArrayRef argument as torch's parser reads it: an int repeats for both dims, None is empty."""
    if value is None:
        return ()
    if isinstance(value, int):
        return (value, value)
    return tuple(int(v) for v in value)


@public("max_pool2d", functional=True)
def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Window maxima → MaxPool2DWithIndicesBackward0; with return_indices, (values, indices)."""
    values, indices = pool.max_pool2d_with_indices(input, _ints(kernel_size), _ints(stride), _ints(padding),
                                                   _ints(dilation), ceil_mode)
    return (values, indices) if return_indices else values


@public("avg_pool2d", functional=True)
def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Window means → AvgPool2DBackward0."""
    return pool.avg_pool2d(input, _ints(kernel_size), _ints(stride), _ints(padding), ceil_mode, count_include_pad,
                           divisor_override)


@public("adaptive_avg_pool2d", functional=True)
def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Means over adaptive bins → AdaptiveAvgPool2DBackward0 (a 1x1 output: MeanBackward1). None keeps a size."""
    if not isinstance(output_size, int):
        defaults = input.size()
        if len(defaults) <= len(output_size):
            raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
        output_size = [v if v is not None else d for v, d in zip(output_size, defaults[-len(output_size):],
                                                                  strict=False)]
    return pool.adaptive_avg_pool2d(input, output_size)


@public("batch_norm", functional=True)
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) by the batch's statistics (training; the running ones updated in place) or by
    the running ones → NativeBatchNormBackward0."""
    if training:
        size = input.size()
        size_prods = size[0]
        for i in range(len(size) - 2):
            size_prods *= size[i + 2]
        if size_prods == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    return batch_norm_op.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


@public("scaled_dot_product_attention", functional=True)
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + attn_mask) @ value → ScaledDotProductFlashAttentionForCpuBackward0 (the fused
    CPU kernel; the calls torch sends down its math path are refused)."""
    return attention.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                  enable_gqa)
