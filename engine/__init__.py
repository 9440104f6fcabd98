"""agdb's autograd engine: a numpy implementation of PyTorch 2.13's autograd, with a torch-compatible API.

A PyTorch snippet runs
on it unchanged (`import engine as torch`), producing the same backward nodes, sequence numbers and
execution order as PyTorch 2.13 on CPU.
"""
from __future__ import annotations

from . import _tensor_methods
from ._device import device
from ._dtype import Size, dtype, float32, float64, get_default_dtype, int64
from ._dtype import bool_ as bool  # noqa: A001 - torch.bool
from ._factories import (
                         arange,
                         empty,
                         full,
                         is_tensor,
                         manual_seed,
                         ones,
                         ones_like,
                         rand,
                         randn,
                         tensor,
                         zeros,
                         zeros_like,
)
from ._observer import add_observer
from ._ops import (
                         abs,
                         addmm,
                         argmax,
                         cat,
                         clone,
                         cos,
                         dot,
                         exp,
                         flatten,
                         isnan,
                         log,
                         log_softmax,
                         matmul,
                         max,
                         maximum,
                         mean,
                         mm,
                         mv,
                         pow,
                         relu,
                         reshape,
                         sigmoid,
                         sin,
                         softmax,
                         sqrt,
                         squeeze,
                         stack,
                         sum,
                         tanh,
                         transpose,
                         unsqueeze,
                         where,
)
from ._ops import t as t
from ._state import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._tensor import Tensor
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled

_tensor_methods.install()

from . import autograd, nn  # noqa: E402 - needs the Tensor methods installed

float = float32  # noqa: A001 - torch.float
double = float64
long = int64

__version__ = "2.13.0+agdb"

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "zeros_like", "ones_like", "full", "empty", "arange", "randn", "rand",
    "manual_seed", "is_tensor", "float32", "float64", "int64", "bool", "float", "double", "long", "dtype",
    "Size", "device", "get_default_dtype", "exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "sqrt", "abs",
    "matmul", "mm", "mv", "dot", "addmm", "cat", "stack", "where", "maximum", "max", "argmax", "sum", "mean", "pow",
    "reshape", "flatten", "transpose", "t", "squeeze", "unsqueeze", "clone", "softmax", "log_softmax", "isnan",
    "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled", "autograd", "nn", "add_observer",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
]
