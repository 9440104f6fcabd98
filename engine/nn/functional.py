"""`engine.nn.functional`: activations, softmax, linear, embedding, layer_norm, dropout and the losses.

Arguments PyTorch has but the engine does not implement (`max_norm=`, in-place forms, the deprecated
`size_average`/`reduce`) raise NotImplementedError naming them.
"""
from __future__ import annotations

import warnings
from typing import Any

from .. import _ops, _random
from .._dispatch import public, table
from .._ops import leaky_relu as _leaky_relu
from .._ops import nn_extra
from .._tensor import Tensor
from . import _dropout, _functional_more  # noqa: F401 - declare their entries before the table below is built


def _no_legacy(size_average: Any, reduce: Any) -> None:
    if size_average is not None or reduce is not None:
        raise NotImplementedError("size_average and reduce are deprecated; use reduction=")


def _unsupported(**args: Any) -> None:
    for name, value in args.items():
        if value:
            raise NotImplementedError(f"agdb's engine does not implement {name}= here; leave it at its default")


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


@public("mse_loss", functional=True)
def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean") -> Tensor:
    """Mean squared error → MseLossBackward0."""
    _no_legacy(size_average, reduce)
    return _ops.mse_loss(input, target, reduction)


@public("linear", functional=True)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.t() + bias → TBackward0 and AddmmBackward0 (bias, input, weight.t())."""
    return _ops.linear(input, weight, bias)


@public("softmax", functional=True)
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Softmax along `dim` → SoftmaxBackward0."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return _ops.softmax(input, dim, dtype)


@public("log_softmax", functional=True)
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Log-softmax along `dim` → LogSoftmaxBackward0."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return _ops.log_softmax(input, dim, dtype)


@public("relu", functional=True)
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0) → ReluBackward0 (in place: torch.relu_, whose ReluBackward0 saves the written result)."""
    return _leaky_relu.relu_(input) if inplace else _ops.relu(input)


@public("relu_", functional=True)
def relu_(input: Tensor) -> Tensor:
    """max(input, 0) in place → ReluBackward0."""
    return _leaky_relu.relu_(input)


@public("leaky_relu", functional=True)
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """max(input, 0) + negative_slope * min(input, 0) → LeakyReluBackward0 (in place: LeakyReluBackward1)."""
    if inplace:
        return _leaky_relu.leaky_relu_(input, negative_slope)
    return _leaky_relu.leaky_relu(input, negative_slope)


@public("leaky_relu_", functional=True)
def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """leaky_relu in place → LeakyReluBackward1."""
    return _leaky_relu.leaky_relu_(input, negative_slope)


@public("sigmoid", functional=True)
def sigmoid(input: Tensor) -> Tensor:
    """Logistic sigmoid → SigmoidBackward0."""
    return _ops.sigmoid(input)


@public("tanh", functional=True)
def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent → TanhBackward0."""
    return _ops.tanh(input)


@public("gelu", functional=True)
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU (exact, or approximate='tanh') → GeluBackward0."""
    return nn_extra.gelu(input, approximate)


@public("dropout", functional=True)
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p) → MulBackward0 on CPU.

    Returns `input` itself when not training or p == 0, as PyTorch does. The mask comes from the engine's
    generator (engine.manual_seed), so its values differ from PyTorch's.
    """
    _unsupported(inplace=inplace)
    return nn_extra.dropout(input, p, training, _random.rng("dropout", None))


@public("embedding", functional=True)
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` picked by the Long `input` → EmbeddingBackward0."""
    if padding_idx is not None:
        n = weight.size(0)
        if padding_idx > 0:
            assert padding_idx < n, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -n, "Padding_idx must be within num_embeddings"
            padding_idx = n + padding_idx
    else:
        padding_idx = -1
    _unsupported(max_norm=max_norm is not None, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
    return nn_extra.embedding(weight, input, padding_idx)


@public("layer_norm", functional=True)
def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing `normalized_shape` dims → NativeLayerNormBackward0."""
    if not isinstance(normalized_shape, (tuple, list)) or not all(isinstance(s, int) for s in normalized_shape):
        raise TypeError(f"layer_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not "
                        f"{type(normalized_shape).__name__}")
    return nn_extra.layer_norm(input, normalized_shape, weight, bias, eps)


@public("nll_loss", functional=True)
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of (C,) or (N, C) log-probabilities → NllLossBackward0."""
    _no_legacy(size_average, reduce)
    return nn_extra.nll_loss(input, target, nn_extra.reduction_enum(reduction), ignore_index, weight)


@public("cross_entropy", functional=True)
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim, then nll_loss → NllLossBackward0 over LogSoftmaxBackward0 (with
    label_smoothing, torch's composite around them)."""
    _no_legacy(size_average, reduce)
    return nn_extra.cross_entropy(input, target, nn_extra.reduction_enum(reduction), ignore_index, weight,
                                  label_smoothing)


@public("binary_cross_entropy_with_logits", functional=True)
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid + binary cross entropy in one stable op → BinaryCrossEntropyWithLogitsBackward0."""
    _no_legacy(size_average, reduce)
    enum = nn_extra.reduction_enum(reduction)
    return nn_extra.binary_cross_entropy_with_logits(input, target, enum, weight, pos_weight)


@public("l1_loss", functional=True)
def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean") -> Tensor:
    """Mean absolute error, composite as in PyTorch: SubBackward0, AbsBackward0, MeanBackward0/SumBackward0."""
    _no_legacy(size_average, reduce)
    return nn_extra.l1_loss(input, target, reduction)


# declare conv1d, conv2d, ..., scaled_dot_product_attention and multi_head_attention_forward before the table
from . import _attention_functional, _functional_layers  # noqa: E402,F401

globals().update(table("nn.functional"))  # the names above, now passing through the dispatch point
__all__ = list(table("nn.functional"))
