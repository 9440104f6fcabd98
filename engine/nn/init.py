"""`engine.nn.init`: fill tensors in place under no_grad, as torch.nn.init does.

Random fills draw from the engine's generator (engine.manual_seed), so values differ from PyTorch's.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _random
from .._state import no_grad
from .._tensor import Tensor, make_tensor


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        tensor.copy_(make_tensor(np.asarray(values, dtype=tensor._data.dtype), device=tensor._device))
    return tensor


def _rng() -> Any:
    return _random.rng("init", None)  # the default generator's, as it is now


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity, as torch.nn.init.calculate_gain."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    dimensions = tensor.dim()
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.size(1)
    num_output_fmaps = tensor.size(0)
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def zeros_(tensor: Tensor) -> Tensor:
    return _fill(tensor, np.zeros(tensor._data.shape))


def ones_(tensor: Tensor) -> Tensor:
    return _fill(tensor, np.ones(tensor._data.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill(tensor, np.full(tensor._data.shape, val))


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    return _fill(tensor, _rng().uniform(a, b, tensor._data.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    return _fill(tensor, _rng().normal(mean, std, tensor._data.shape))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Any = None) -> Tensor:
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


__all__ = ["calculate_gain", "zeros_", "ones_", "constant_", "uniform_", "normal_", "xavier_uniform_",
           "kaiming_uniform_"]
