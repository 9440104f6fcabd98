"""`torch.feature_dropout`, at::feature_dropout on CPU: the kernel of nn.functional's dropout1d/2d/3d.

It draws one Bernoulli value per (sample, channel), a noise tensor of shape (N, C, 1, ...) scaled by 1/(1-p), and
multiplies: MulBackward0, as at::dropout does on CPU.
"""
from __future__ import annotations

import numpy as np

from .. import _random
from .._dispatch import public
from .._tensor import Tensor, make_tensor
from .arith import mul


def check_dropout_p(p: float) -> None:
    """torch's Python-level check of a dropout probability (F.dropout, F.dropout1d/2d/3d, the Dropout modules)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


@public("feature_dropout", torch=True)
def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002 - torch's names
    """input * noise, the noise shaped (N, C, 1, ...) → MulBackward0; the input itself when p == 0, not training
    or empty; input * zeros(()) when p == 1."""
    if not isinstance(input, Tensor):
        raise TypeError(f"feature_dropout(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input._data.size == 0:
        return input
    dtype = input._data.dtype
    if p == 1:
        return mul(input, make_tensor(np.zeros((), dtype=dtype), device=input._device))
    if input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if input._device != "cpu":
        raise NotImplementedError("agdb's engine implements dropout on CPU only; move the tensor to 'cpu'")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    keep = _random.rng("feature_dropout", None).random(shape) >= p
    return mul(input, make_tensor((keep / (1.0 - p)).astype(dtype), device=input._device))
