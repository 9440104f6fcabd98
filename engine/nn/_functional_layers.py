"""`engine.nn.functional`'s CNN layers: conv1d, conv2d (more to come beside them), declared on the dispatch point.

engine/nn/functional.py imports this module before it builds its table, so these names are part of it.
"""
from __future__ import annotations

from typing import Any

from .._dispatch import public
from .._ops import conv
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
