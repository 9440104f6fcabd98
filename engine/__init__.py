"""agdb's autograd engine: a numpy implementation of PyTorch 2.13's autograd, with a torch-compatible API.

A PyTorch snippet runs
on it unchanged (`import engine as torch`), producing the same backward nodes, sequence numbers and
execution order as PyTorch 2.13 on CPU.
"""
from __future__ import annotations

import warnings

from . import _dispatch, _factories, _inplace, _ops  # noqa: F401 - importing an op module declares its ops
from ._device import device
from ._dtype import Size, bfloat16, dtype, float16, float32, float64, get_default_dtype, int32, int64
from ._dtype import bool_ as bool  # noqa: A001 - torch.bool
from ._factories import is_tensor
from ._legacy import BoolTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor
from ._observer import add_observer
from ._ops import amax as _amax  # noqa: F401 - its nodes subclass _functions', loaded by now
from ._ops import attention as _attention  # noqa: F401 - declares baddbmm and unflatten before the table
from ._ops import dropout as _dropout  # noqa: F401 - declares feature_dropout before the table
from ._ops import hyperbolic_grid as _hyperbolic_grid  # noqa: F401 - the same
from ._ops import leaky_relu as _leaky_relu  # noqa: F401 - the same (relu_)
from ._ops import sampling as _sampling  # noqa: F401 - the same
from ._ops import tensor_ops as _tensor_ops  # noqa: F401 - the same
from ._random import Generator, default_generator, manual_seed
from ._state import enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled
from ._tensor import Tensor
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled
from .serialization import load, save

# PyTorch computes inf * 0 or 0 / 0 without a word; numpy warns (RuntimeWarning) from the engine line that called
# it. Those warnings are dropped, and only those: a script's own numpy calls, and the engine's other warnings
# (UserWarning, as torch's), still show.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"(agdb\.)?engine(\.|$)",
                        message=r"(invalid value|divide by zero|overflow|underflow) encountered")

globals().update(_dispatch.table("torch"))  # engine.exp, engine.matmul, ...: the ops declared as torch=
_dispatch.install()  # Tensor's methods, operators and properties

from . import accelerator, amp, autograd, backends, cuda, distributed, linalg, mps, nn, optim, utils  # noqa: E402 - needs the Tensor methods installed

float = float32  # noqa: A001 - torch.float
double = float64
half = float16
long = int64
int = int32  # noqa: A001 - torch.int

__version__ = "2.13.0+agdb"

__all__ = [
    "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "BoolTensor", "manual_seed",
    "Generator",
    "default_generator", "is_tensor", "float32", "float64", "float16", "bfloat16", "half", "int64", "int32", "int",
    "bool", "float", "double", "long", "dtype",
    "Size", "device", "get_default_dtype", "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled",
    "inference_mode", "is_inference_mode_enabled",
    "accelerator", "amp", "autograd", "backends", "cuda", "distributed", "linalg", "mps", "nn", "optim", "utils",
    "add_observer", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    *_dispatch.table("torch"),
]
