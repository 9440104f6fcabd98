"""engine.nn's recurrent cells (LSTMCell), with PyTorch 2.13's constructor arguments, checks, init and repr; the
forward records torch's CPU decomposition (engine/_ops/rnn.py)."""
from __future__ import annotations

import math
from typing import Any

from .._factories import zeros
from .._ops import rnn as rnn_ops
from .._ops.shape import squeeze, unsqueeze
from .._tensor import Tensor
from . import init
from .module import Module
from .modules import _empty
from .parameter import Parameter


class RNNCellBase(Module):
    """weight_ih (chunks * hidden, input), weight_hh (chunks * hidden, hidden) and, with bias, bias_ih and bias_hh,
    all uniform in ±1/sqrt(hidden_size)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(_empty(num_chunks * hidden_size, input_size, **kw))
        self.weight_hh = Parameter(_empty(num_chunks * hidden_size, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(_empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(_empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += f", bias={self.bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)


class LSTMCell(RNNCellBase):
    """One LSTM step: (h', c') from input (N, in) or (in,) and (h, c) (zeros when not given)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Tensor]:
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = unsqueeze(input, 0)
        if hx is None:
            z = zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
            hx = (z, z)
        else:
            hx = (unsqueeze(hx[0], 0), unsqueeze(hx[1], 0)) if not is_batched else hx
        ret = rnn_ops.lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        if not is_batched:
            ret = (squeeze(ret[0], 0), squeeze(ret[1], 0))
        return ret
