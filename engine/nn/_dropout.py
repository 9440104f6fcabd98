"""Channel-wise dropout: nn.functional's dropout1d, dropout2d and dropout3d as torch 2.13 writes them in Python
around `torch.feature_dropout` (engine/_ops/dropout.py), and the Dropout1d/2d/3d modules. dropout2d on a 2-D input
is torch's deprecated path: a warning, then the same kernel, whose noise then has the input's own shape.

Imported by nn/functional.py before it builds its table, so these entries are among its names.
"""
from __future__ import annotations

import warnings

from .._dispatch import public
from .._ops.dropout import check_dropout_p, feature_dropout
from .._tensor import Tensor
from .module import Module


class _VariableFunctions:
    """torch._VF: where nn.functional's Python looks its kernels up at each call (so they can be replaced)."""

    feature_dropout = staticmethod(feature_dropout)


_VF = _VariableFunctions()


def _no_inplace(inplace: bool) -> None:
    if inplace:
        raise NotImplementedError("agdb's engine does not implement inplace= here; leave it at its default")


@public("dropout1d", functional=True)
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """Zero whole channels of a (N, C, L) or (C, L) input → MulBackward0 (with Unsqueeze/Squeeze for (C, L))."""
    check_dropout_p(p)
    _no_inplace(inplace)
    inp_dim = input.dim()
    if inp_dim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {inp_dim}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    is_batched = inp_dim == 3
    if not is_batched:
        input = input.unsqueeze(0)
    result = _VF.feature_dropout(input, p, training)
    return result if is_batched else result.squeeze(0)


@public("dropout2d", functional=True)
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """Zero whole channels of a (N, C, H, W) input → MulBackward0; other ranks warn as torch does and take the
    same kernel (a 3-D input as (N, C, L))."""
    check_dropout_p(p)
    _no_inplace(inplace)
    inp_dim = input.dim()
    if inp_dim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {inp_dim}-D input to dropout2d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).",
                      stacklevel=3)
    if inp_dim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=3)
    return _VF.feature_dropout(input, p, training)


@public("dropout3d", functional=True)
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:  # noqa: A002
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input → MulBackward0 (with Unsqueeze/Squeeze for
    the unbatched form); other ranks warn as torch does."""
    check_dropout_p(p)
    _no_inplace(inplace)
    inp_dim = input.dim()
    if inp_dim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {inp_dim}-D input to dropout3d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).",
                      stacklevel=3)
    is_batched = inp_dim == 5
    if not is_batched:
        input = input.unsqueeze(0)
    result = _VF.feature_dropout(input, p, training)
    return result if is_batched else result.squeeze(0)


class _DropoutNd(Module):
    _functional = ""
    """The nn.functional entry forward calls, looked up at each call as torch's `F.dropout2d(...)` is."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        check_dropout_p(p)
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        from . import functional as F  # noqa: N812 - torch's alias; imported here, as functional imports this module
        return getattr(F, self._functional)(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    _functional = "dropout1d"


class Dropout2d(_DropoutNd):
    _functional = "dropout2d"


class Dropout3d(_DropoutNd):
    _functional = "dropout3d"
