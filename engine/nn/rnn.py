"""engine.nn's recurrent layers (LSTMCell, GRUCell, LSTM, GRU), with PyTorch 2.13's constructor arguments, checks,
init and repr; the forward records torch's CPU paths (engine/_ops/rnn.py)."""
from __future__ import annotations

import math
import warnings
from typing import Any

from .. import backends
from .._dtype import float32
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


class RNNBase(Module):
    """A multi-layer recurrent layer over (T, N, in) (or (N, T, in) with batch_first, or unbatched (T, in)):
    parameters weight_ih_l{k}[_reverse], weight_hh_l{k}[_reverse], bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse],
    uniform in ±1/sqrt(hidden_size)."""

    _gates = 4

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                             "being zeroed")
        if proj_size:
            raise NotImplementedError(f"agdb's engine does not implement nn.{mode}'s proj_size")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        kw = {"device": device, "dtype": dtype}
        directions = 2 if bidirectional else 1
        self._flat_weights_names: list = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else hidden_size * directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                rows = self._gates * hidden_size
                params = [("weight_ih", (rows, layer_input)), ("weight_hh", (rows, hidden_size))]
                if bias:
                    params += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
                for name, shape in params:
                    setattr(self, name + suffix, Parameter(_empty(*shape, **kw)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _check_forward_args(self, input: Tensor, hx: tuple) -> None:
        if input.dtype != self._flat_weights[0].dtype:
            w = self._flat_weights[0].dtype
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w}). Convert input: "
                             f"input.to({w}), or convert model: model.to({input.dtype})")
        if input.dim() != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.size(-1)}")
        batch = input.size(0) if self.batch_first else input.size(1)
        expected = (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        if isinstance(hx, tuple):
            for i, h in enumerate(hx):
                if tuple(h.size()) != expected:
                    raise RuntimeError(f"Expected hidden[{i}] size {expected}, got {list(h.size())}")
        elif tuple(hx.size()) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {list(hx.size())}")

    def _weight_groups(self) -> list:
        """(w_ih, w_hh, b_ih, b_hh) per layer and direction (None biases without bias)."""
        weights = self._flat_weights
        per = 4 if self.bias else 2
        return [tuple(weights[i:i + per]) + ((None, None) if not self.bias else ()) for i in
                range(0, len(weights), per)]


class LSTM(RNNBase):
    """A multi-layer LSTM; float32 with torch.backends.mkldnn.enabled takes torch's oneDNN path, else its native
    per-step path."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)


    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        batch_dim = 0 if self.batch_first else 1
        is_batched = input.dim() == 3
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        if not is_batched:
            input = unsqueeze(input, batch_dim)
        batch = input.size(0) if self.batch_first else input.size(1)
        if hx is None:
            size = (self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
            z = zeros(*size, dtype=input.dtype, device=input.device)
            hx = (z, zeros(*size, dtype=input.dtype, device=input.device))
        else:
            want = 3 if is_batched else 2
            if hx[0].dim() != want or hx[1].dim() != want:
                kind = "batched 3-D input" if is_batched else "unbatched 2-D input"
                raise RuntimeError(f"For {kind}, hx and cx should also be {want}-D but got ({hx[0].dim()}-D, "
                                   f"{hx[1].dim()}-D) tensors")
            if not is_batched:
                hx = (unsqueeze(hx[0], 1), unsqueeze(hx[1], 1))
        self._check_forward_args(input, hx)
        groups = self._weight_groups()
        if input.dtype == float32 and backends.mkldnn.enabled and input.numel() != 0:
            out, h, c = rnn_ops.lstm_mkldnn(input, hx[0], hx[1], groups, self.bias, self.num_layers,
                                            self.bidirectional, self.batch_first, self.training, self.dropout)
        else:
            out, h, c = rnn_ops.lstm_steps(input, hx[0], hx[1], groups, self.num_layers, self.bidirectional,
                                           self.batch_first, self.dropout, self.training)
        if not is_batched:
            out, h, c = squeeze(out, batch_dim), squeeze(h, 1), squeeze(c, 1)
        return out, (h, c)


class GRU(RNNBase):
    """A multi-layer GRU (torch's native per-step path on CPU, in float32 too)."""

    _gates = 3

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if input.dim() not in (2, 3):
            raise ValueError(f"GRU: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batch_dim = 0 if self.batch_first else 1
        is_batched = input.dim() == 3
        if not is_batched:
            input = unsqueeze(input, batch_dim)
            if hx is not None:
                if hx.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
                hx = unsqueeze(hx, 1)
        elif hx is not None and hx.dim() != 3:
            raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        if hx is None:
            batch = input.size(0) if self.batch_first else input.size(1)
            hx = zeros(self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size, dtype=input.dtype,
                       device=input.device)
        self._check_forward_args(input, hx)
        out, h = rnn_ops.gru_steps(input, hx, self._weight_groups(), self.num_layers, self.bidirectional,
                                   self.batch_first, self.dropout, self.training)
        if not is_batched:
            out, h = squeeze(out, batch_dim), squeeze(h, 1)
        return out, h


class GRUCell(RNNCellBase):
    """One GRU step: h' from input (N, in) or (in,) and h (zeros when not given)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if input.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = unsqueeze(input, 0)
        if hx is None:
            hx = zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
        elif not is_batched:
            hx = unsqueeze(hx, 0)
        ret = rnn_ops.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return squeeze(ret, 0) if not is_batched else ret
