"""The recurrent layers as PyTorch 2.13 runs them on CPU: at::lstm_cell's decomposition into linear, add,
unsafe_chunk (UnsafeSplitBackward0) and the gates' pointwise ops, node for node and in torch's order; at::lstm's
native path (the input projected over all steps, then those cells) and its oneDNN path (float32: one
MkldnnRnnLayerBackward0 per layer and direction)."""
from __future__ import annotations

import numpy as np

from .. import _functions as fn
from .._node import Node
from .._tensor import Tensor, _wrap_dim
from ._common import _out, needs_grad, record_outputs, save_inputs
from .arith import add, mul
from .linalg import linear
from .nn_extra import _record_many
from .pointwise import sigmoid, tanh


class UnsafeSplitBackward0(fn.SplitBackward0):
    """unsafe_split's node: split's, with outputs that are not autograd views."""

    __slots__ = ()


def unsafe_chunk(a: Tensor, chunks: int, dim: int) -> tuple[Tensor, ...]:
    """`chunks` equal pieces along `dim` (the last smaller) → UnsafeSplitBackward0; the pieces share `a`'s memory
    but are not views to autograd (in-place ops on them are allowed)."""
    d = _wrap_dim(dim, a._data.ndim)
    size = a._data.shape[d]
    step = (size + chunks - 1) // chunks
    node = UnsafeSplitBackward0() if needs_grad(a) else None
    sizes = [min(step, size - i) for i in range(0, size, step)] if step else [0]
    starts = np.cumsum([0] + sizes[:-1])
    outs = tuple(_out(a._data[(slice(None),) * d + (slice(int(s), int(s) + n),)], a)
                 for s, n in zip(starts, sizes, strict=True))
    if node is not None:
        node.dim, node.sizes, node.self_sym_sizes, node.split_size = dim, sizes, a._data.shape, step
        record_outputs(node, (a,), outs)
    return outs


def _size(t: Tensor, i: int) -> int:
    return t._data.shape[i]


def lstm_cell(x: Tensor, hx: tuple, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
              b_hh: Tensor | None) -> tuple[Tensor, Tensor]:
    """at::lstm_cell on CPU: gates = linear(h, w_hh, b_hh) + linear(x, w_ih, b_ih); i, f, g, o = chunks (sigmoid,
    sigmoid, tanh, sigmoid); c' = f * c + i * g; h' = o * tanh(c')."""
    if len(hx) != 2:
        raise RuntimeError("lstm_cell expects two hidden states")
    if _size(x, 1) != _size(w_ih, 1):
        raise RuntimeError(f"input has inconsistent input_size: got {_size(x, 1)} expected {_size(w_ih, 1)}")
    for label, h in enumerate(hx):
        if _size(x, 0) != _size(h, 0):
            raise RuntimeError(f"Input batch size {_size(x, 0)} doesn't match hidden{label} batch size {_size(h, 0)}")
        if _size(h, 1) != _size(w_hh, 1):
            raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {_size(h, 1)}, expected "
                               f"{_size(w_hh, 1)}")
    h, c = hx
    gates = add(linear(h, w_hh, b_hh), linear(x, w_ih, b_ih))
    i, f, g, o = unsafe_chunk(gates, 4, 1)
    i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
    cy = add(mul(f, c), mul(i, g))
    return mul(o, tanh(cy)), cy


# -- nn.LSTM ------------------------------------------------------------------------------------------------
def _lstm_layer_steps(inputs: list, hidden: tuple, w_hh: Tensor, b_hh: Tensor | None) -> tuple[list, tuple]:
    """FullLayer's loop with pre-computed input projections: per step linear_hh(h).add_(x_t), unsafe_chunk, the
    gates in place (sigmoid_, sigmoid_, tanh_, sigmoid_), cy = (f * c).add_(i * g), hy = o * cy.tanh()."""
    h, c = hidden
    outputs = []
    for x_t in inputs:
        gates = add(linear(h, w_hh, b_hh), x_t)
        i, f, g, o = unsafe_chunk(gates, 4, 1)
        i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
        c = add(mul(f, c), mul(i, g))
        h = mul(o, tanh(c))
        outputs.append(h)
    return outputs, (h, c)


def _full_layer(x: Tensor, hidden: tuple, weights: tuple, reverse: bool = False) -> tuple[Tensor, tuple]:
    """One direction of one layer on CPU: linear_ih over all steps, unbind, the steps, stack."""
    from .shape import stack, unbind
    w_ih, w_hh, b_ih, b_hh = weights
    steps = list(unbind(linear(x, w_ih, b_ih), 0))
    if reverse:
        steps.reverse()
    outputs, final = _lstm_layer_steps(steps, hidden, w_hh, b_hh)
    if reverse:
        outputs.reverse()
    return stack(outputs, 0), final


def _between_layers(x: Tensor, layer: int, num_layers: int, dropout_p: float, train: bool) -> Tensor:
    """at::dropout of a layer's output before the next layer (training only, never after the last one), as
    RNN.cpp's layer stacks do: MulBackward0 with noise from the engine's generator."""
    if dropout_p == 0 or not train or layer == num_layers - 1:
        return x
    from .. import _random
    from .nn_extra import dropout
    return dropout(x, dropout_p, True, _random.rng("dropout", None))


def lstm_steps(x: Tensor, hx: Tensor, cx: Tensor, weights: list, num_layers: int, bidirectional: bool,
               batch_first: bool, dropout_p: float = 0.0, train: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """at::lstm's native CPU path (_lstm_impl): hx and cx unbound per layer, each layer a FullLayer (or a
    FullBidirectionalLayer: forward, then the reversed steps, cat), then cy and hy stacked (cy first, as GCC
    evaluates make_tuple's arguments)."""
    from .shape import cat, stack, transpose, unbind
    if batch_first:
        x = transpose(x, 0, 1)
    layer_hx, layer_cx = unbind(hx, 0), unbind(cx, 0)
    directions = 2 if bidirectional else 1
    final_h, final_c = [], []
    for layer in range(num_layers):
        outs = []
        for direction in range(directions):
            index = layer * directions + direction
            out, (h, c) = _full_layer(x, (layer_hx[index], layer_cx[index]), weights[index], reverse=direction > 0)
            outs.append(out)
            final_h.append(h)
            final_c.append(c)
        x = _between_layers(outs[0] if directions == 1 else cat(outs, outs[0].dim() - 1), layer, num_layers,
                            dropout_p, train)
    cy = stack(final_c, 0)
    hy = stack(final_h, 0)
    if batch_first:
        x = transpose(x, 0, 1)
    return x, hy, cy


class MkldnnRnnLayerBackward0(Node):
    """One oneDNN LSTM layer (one direction) over all steps: slots (input, weight0..3 = w_ih, w_hh, b_ih, b_hh, hx_,
    cx_), outputs (output, hy, cy); its backward is the whole backpropagation through time."""

    __slots__ = ("input", "weight0", "weight1", "weight2", "weight3", "hx_", "cx_", "result0", "result1", "result2",
                 "reverse", "batch_sizes", "mode", "hidden_size", "num_layers", "has_biases", "bidirectional",
                 "batch_first", "train")
    _saved_tensor_names = ("cx_", "hx_", "input", "weight0", "weight1", "weight2", "weight3", "result0", "result1",
                           "result2")
    _saved_values = ("batch_first", "batch_sizes", "bidirectional", "has_biases", "hidden_size", "mode", "num_layers",
                     "reverse", "train")

    def apply(self, grads: list) -> list:
        self.check_saved()
        out: list = [None] * 7
        if all(g is None for g in grads):
            return out
        if needs_grad(*(g for g in grads if g is not None)):
            raise NotImplementedError("agdb's engine does not record mkldnn_rnn_layer_backward's graph; take this "
                                      "grad without create_graph=True")
        x = self.input._data.astype(np.float64)
        w_ih, w_hh = self.weight0._data.astype(np.float64), self.weight1._data.astype(np.float64)
        b = _bias(self.weight2, self.weight3, self.has_biases, w_hh.shape[0])
        steps, cache = _mkldnn_forward(x, w_ih, w_hh, b, self.hx_._data.astype(np.float64),
                                       self.cx_._data.astype(np.float64), self.reverse)
        zero = np.zeros(self.hx_._data.shape)
        g_out = np.zeros(x.shape[:2] + (w_hh.shape[1],)) if grads[0] is None else grads[0]._data.astype(np.float64)
        dh = zero if len(grads) < 2 or grads[1] is None else grads[1]._data.astype(np.float64)
        dc = zero if len(grads) < 3 or grads[2] is None else grads[2]._data.astype(np.float64)
        dx, dw_ih, dw_hh, db = np.zeros_like(x), np.zeros_like(w_ih), np.zeros_like(w_hh), np.zeros_like(b)
        for t in reversed(steps):
            i, f, g, o, c_prev, h_prev, c = cache[t]
            dh = dh + g_out[t]
            tc = np.tanh(c)
            dc = dc + dh * o * (1 - tc * tc)
            dgates = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                                     dh * tc * o * (1 - o)], axis=1)
            dx[t] = dgates @ w_ih
            dw_ih += dgates.T @ x[t]
            dw_hh += dgates.T @ h_prev
            db += dgates.sum(axis=0)
            dh, dc = dgates @ w_hh, dc * f
        values = (dx, dw_ih, dw_hh, db, db, dh, dc)
        likes = (self.input, self.weight0, self.weight1, self.weight2, self.weight3, self.hx_, self.cx_)
        for slot, (v, like) in enumerate(zip(values, likes, strict=True)):
            if self.should_compute_output(slot):
                out[slot] = _out(np.ascontiguousarray(v, dtype=like._data.dtype), like)
        return out


def _bias(b_ih: Tensor, b_hh: Tensor, has_biases: bool, gates: int) -> np.ndarray:
    """The gates' bias: b_ih + b_hh, or none without biases (torch passes zeros shaped as the weights then)."""
    if not has_biases:
        return np.zeros(gates)
    return b_ih._data.astype(np.float64) + b_hh._data.astype(np.float64)


def _mkldnn_forward(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, b: np.ndarray, h: np.ndarray, c: np.ndarray,
                    reverse: bool) -> tuple[list, dict]:
    """The layer's steps in float64: the order they ran in, and per step (i, f, g, o, c_prev, h_prev, c)."""
    steps = list(range(x.shape[0]))[::-1] if reverse else list(range(x.shape[0]))
    cache = {}
    n = w_hh.shape[1]
    for t in steps:
        gates = x[t] @ w_ih.T + h @ w_hh.T + b
        i, f = 1 / (1 + np.exp(-gates[:, :n])), 1 / (1 + np.exp(-gates[:, n:2 * n]))
        g, o = np.tanh(gates[:, 2 * n:3 * n]), 1 / (1 + np.exp(-gates[:, 3 * n:]))
        c_new = f * c + i * g
        cache[t] = (i, f, g, o, c, h, c_new)
        h, c = o * np.tanh(c_new), c_new
    return steps, cache


def mkldnn_rnn_layer(x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor, hx: Tensor, cx: Tensor,
                     reverse: bool, num_layers: int, has_biases: bool, bidirectional: bool, batch_first: bool,
                     train: bool) -> tuple[Tensor, Tensor, Tensor]:
    """at::mkldnn_rnn_layer for an LSTM: (output (T, N, H), hy, cy) → MkldnnRnnLayerBackward0."""
    node = None
    if needs_grad(x, w_ih, w_hh, b_ih, b_hh, hx, cx):
        node = save_inputs(MkldnnRnnLayerBackward0(), input=x, weight0=w_ih, weight1=w_hh, weight2=b_ih,
                           weight3=b_hh, hx_=hx, cx_=cx, reverse=reverse, batch_sizes=(), mode=2,
                           hidden_size=hx._data.shape[-1], num_layers=num_layers, has_biases=has_biases,
                           bidirectional=bidirectional, batch_first=batch_first, train=train)
    xd = x._data.astype(np.float64)
    steps, cache = _mkldnn_forward(xd, w_ih._data.astype(np.float64), w_hh._data.astype(np.float64),
                                   _bias(b_ih, b_hh, has_biases, w_hh._data.shape[0]),
                                   hx._data.astype(np.float64), cx._data.astype(np.float64), reverse)
    dtype = x._data.dtype
    hs = np.stack([cache[t][3] * np.tanh(cache[t][6]) for t in range(xd.shape[0])])
    last = cache[steps[-1]]
    outs = [_out(np.ascontiguousarray(v, dtype=dtype), x) for v in (hs, last[3] * np.tanh(last[6]), last[6])]
    if node is not None:
        node.result0, node.result1, node.result2 = outs
        _record_many(node, (x, w_ih, w_hh, b_ih, b_hh, hx, cx), outs)
    return tuple(outs)


def lstm_mkldnn(x: Tensor, hx: Tensor, cx: Tensor, weights: list, has_biases: bool, num_layers: int,
                bidirectional: bool, batch_first: bool, train: bool,
                dropout_p: float = 0.0) -> tuple[Tensor, Tensor, Tensor]:
    """at::lstm's oneDNN path (float32 on CPU): input made (T, N, *) and contiguous, one mkldnn_rnn_layer per layer
    and direction (hx[index] and cx[index] selected first; zeros for absent biases), cat of the directions, then
    hy and cy stacked."""
    from .._factories import zeros
    from .shape import cat, contiguous, select, stack, transpose
    if batch_first:
        x = transpose(x, 0, 1)
    x = contiguous(x)
    hx, cx = contiguous(hx), contiguous(cx)
    directions = 2 if bidirectional else 1
    layer_hy, layer_cy = [], []
    for layer in range(num_layers):
        outs = []
        for direction in range(directions):
            index = layer * directions + direction
            w_ih, w_hh, b_ih, b_hh = weights[index]
            h, c = select(hx, 0, index), select(cx, 0, index)
            if not has_biases:
                b_ih = zeros(*w_ih.shape, dtype=w_ih.dtype)
                b_hh = zeros(*w_hh.shape, dtype=w_hh.dtype)
            out, hy, cy = mkldnn_rnn_layer(x, w_ih, w_hh, b_ih, b_hh, h, c, direction > 0, num_layers, has_biases,
                                           bidirectional, batch_first, train)
            outs.append(out)
            layer_hy.append(hy)
            layer_cy.append(cy)
        x = _between_layers(outs[0] if directions == 1 else cat(outs, -1), layer, num_layers, dropout_p, train)
    hy, cy = stack(layer_hy, 0), stack(layer_cy, 0)
    if batch_first:
        x = transpose(x, 0, 1)
    return x, hy, cy


# -- nn.GRUCell and nn.GRU ----------------------------------------------------------------------------------
def _gru_step(igates: tuple, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """torch's GRUCell: hgates = linear_hh(h).unsafe_chunk(3, 1); r = hgates[0].add_(igates[0]).sigmoid_(),
    z = hgates[1].add_(igates[1]).sigmoid_(), n = igates[2].add(hgates[2].mul_(r)).tanh_(),
    h' = (h - n).mul_(z).add_(n). Each mul_ saves a clone of the value it overwrites (CloneBackward0: a seq_nr
    that no edge reaches)."""
    hgates = unsafe_chunk(linear(h, w_hh, b_hh), 3, 1)
    reset = sigmoid(hgates[0].add_(igates[0]))
    update = sigmoid(hgates[1].add_(igates[1]))
    new = tanh(add(igates[2], hgates[2].mul_(reset)))
    return (h - new).mul_(update).add_(new)


def _check_cell(x: Tensor, hidden: tuple, w_ih: Tensor, w_hh: Tensor) -> None:
    """check_rnn_cell_forward_input and check_rnn_cell_forward_hidden."""
    if _size(x, 1) != _size(w_ih, 1):
        raise RuntimeError(f"input has inconsistent input_size: got {_size(x, 1)} expected {_size(w_ih, 1)}")
    for label, h in enumerate(hidden):
        if _size(x, 0) != _size(h, 0):
            raise RuntimeError(f"Input batch size {_size(x, 0)} doesn't match hidden{label} batch size {_size(h, 0)}")
        if _size(h, 1) != _size(w_hh, 1):
            raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {_size(h, 1)}, expected "
                               f"{_size(w_hh, 1)}")


def gru_cell(x: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None, b_hh: Tensor | None) -> Tensor:
    """at::gru_cell on CPU: linear_ih(x) chunked, then the cell's ops."""
    _check_cell(x, (hx,), w_ih, w_hh)
    return _gru_step(unsafe_chunk(linear(x, w_ih, b_ih), 3, 1), hx, w_hh, b_hh)


class TransposeBackward1(fn.TransposeBackward0):
    """transpose_'s node: transpose's formula."""

    __slots__ = ()


def _transpose_(t: Tensor) -> Tensor:
    """t.transpose_(0, 1) on a result that is not a view: the same memory read with dims 0 and 1 swapped, one more
    version, and TransposeBackward1 as its grad_fn."""
    from .. import _version
    from .._inplace import _set_history
    from .._tensor import make_tensor
    from ._common import record
    node = TransposeBackward1() if needs_grad(t) else None
    swapped = np.swapaxes(t._data, 0, 1)
    if node is not None:
        node.dim0, node.dim1 = 0, 1
        result = make_tensor(swapped, device=t._device)
        record(node, (t,), result)
    t._data = swapped
    _version.bump_tensor(t)
    if node is not None:
        _set_history(t, node, 0)
    return t


def gru_steps(x: Tensor, hx: Tensor, weights: list, num_layers: int, bidirectional: bool,
              batch_first: bool, dropout_p: float = 0.0, train: bool = False) -> tuple[Tensor, Tensor]:
    """at::gru's CPU path: like lstm_steps with one hidden state (each step's input projection chunked first);
    output, then hy stacked, then the output transposed in place for batch_first."""
    from .shape import cat, stack, transpose, unbind
    if batch_first:
        x = transpose(x, 0, 1)
    layer_hx = unbind(hx, 0)
    directions = 2 if bidirectional else 1
    finals = []
    for layer in range(num_layers):
        outs = []
        for direction in range(directions):
            w_ih, w_hh, b_ih, b_hh = weights[layer * directions + direction]
            steps = list(unbind(linear(x, w_ih, b_ih), 0))
            if direction:
                steps.reverse()
            h = layer_hx[layer * directions + direction]
            outputs = []
            for x_t in steps:
                h = _gru_step(unsafe_chunk(x_t, 3, 1), h, w_hh, b_hh)
                outputs.append(h)
            if direction:
                outputs.reverse()
            outs.append(stack(outputs, 0))
            finals.append(h)
        x = _between_layers(outs[0] if directions == 1 else cat(outs, outs[0].dim() - 1), layer, num_layers,
                            dropout_p, train)
    hy = stack(finals, 0)
    if batch_first:
        x = _transpose_(x)
    return x, hy
