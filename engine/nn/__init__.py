"""`engine.nn`: Module, Parameter, the layers, containers and losses, `functional` and `init`."""
from __future__ import annotations

from . import functional, init, parallel, utils
from . import module as _module
from . import modules as _modules
from ._dropout import Dropout1d, Dropout2d, Dropout3d
from .layers import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    MaxPool2d,
)
from .losses import BCELoss, HuberLoss, SmoothL1Loss
from .module import Module
from .modules import (
    GELU,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    L1Loss,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    ModuleDict,
    ModuleList,
    MSELoss,
    NLLLoss,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from .parameter import Parameter
from .rnn import GRU, LSTM, GRUCell, LSTMCell
from .transformer import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

_modules.module = _module  # torch.nn.modules.module: where torch keeps the global module hook functions

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "Linear",
    "ReLU", "LeakyReLU", "Tanh", "Sigmoid", "GELU", "Softmax", "LogSoftmax", "Flatten", "Identity", "Dropout",
    "Dropout1d", "Dropout2d", "Dropout3d", "Embedding",
    "LayerNorm", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d",
    "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "LSTMCell", "LSTM", "GRUCell", "GRU", "MultiheadAttention",
    "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCEWithLogitsLoss",
    "SmoothL1Loss", "HuberLoss", "BCELoss",
]
