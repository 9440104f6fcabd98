"""nn.LSTM on engine and torch, run by test_rnn_parity.py: torch's native per-step path (float64, or float32 with
oneDNN off) in PROGRAMS, and its oneDNN path (float32: one MkldnnRnnLayerBackward0 per layer and direction) in
MKLDNN_PROGRAMS.

MKLDNN_PROGRAMS stay out of test_saved_parity.py's sweep over PROGRAMS dicts: torch's node also saves oneDNN's
uint8 workspace (`_saved_result3`, sized by oneDNN), which the engine does not make.
"""
from __future__ import annotations

from typing import Callable

from tests.engine.parity_layers import _load, data

PROGRAMS: dict[str, Callable] = {}
MKLDNN_PROGRAMS: dict[str, Callable] = {}
FLOAT32_GRADS: dict[str, list] = {}  # the float32 grads each side computed, compared numerically by the test


def _weights(layers: int, directions: int, bias: bool, input_size: int = 3, hidden: int = 2) -> dict:
    weights = {}
    seed = 0
    for layer in range(layers):
        for direction in range(directions):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            cols = input_size if layer == 0 else hidden * directions
            weights[f"weight_ih{suffix}"] = [[v / 2 for v in row] for row in data(4 * hidden, cols, seed=seed)]
            weights[f"weight_hh{suffix}"] = [[v / 2 for v in row] for row in data(4 * hidden, hidden, seed=seed + 1)]
            if bias:
                weights[f"bias_ih{suffix}"] = data(4 * hidden, seed=seed + 2)
                weights[f"bias_hh{suffix}"] = data(4 * hidden, seed=seed + 3)
            seed += 4
    return weights


def _lstm(t, p, dtype: str, layers: int = 1, batch_first: bool = False, bidirectional: bool = False,
          state: bool = False, bias: bool = True, unbatched: bool = False, mkldnn: bool = True, key: str = ""):
    nn = t.nn
    dt = getattr(t, dtype)
    m = nn.LSTM(3, 2, num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidirectional, dtype=dt)
    directions = 2 if bidirectional else 1
    _load(t, p, m, "lstm", **_weights(layers, directions, bias))
    shape = (3, 3) if unbatched else ((2, 3, 3) if batch_first else (3, 2, 3))
    x = p.leaf("x", data(*shape, seed=20), dtype=dtype)
    hx = None
    if state:
        lead = (layers * directions,) + (() if unbatched else (2,))
        hx = (p.leaf("h0", data(*lead, 2, seed=21), dtype=dtype), p.leaf("c0", data(*lead, 2, seed=22), dtype=dtype))
    previous = t.backends.mkldnn.enabled
    t.backends.mkldnn.enabled = mkldnn
    try:
        out, (h, c) = m(x, hx)
    finally:
        t.backends.mkldnn.enabled = previous
    p.watch(out, h, c)
    p.counter("forward")
    p.value("shapes", (tuple(out.shape), tuple(h.shape), tuple(c.shape), out.stride()))
    weight = p.const(data(*out.shape, seed=23), dtype=dtype)
    p.run("backward", lambda: ((out * weight).sum() + (h * 2).sum() + (c * 3).sum()).backward())
    grads = tuple(q.grad for q in m.parameters()) + (x.grad,) + ((hx[0].grad, hx[1].grad) if state else ())
    if dtype == "float64":
        p.value("values", (out, h, c))
        p.value("grads", grads)
    else:  # numpy's and torch's float32 sums round differently: dtypes and shapes here, values in the test
        p.value("dtypes", tuple((str(g.dtype), tuple(g.shape)) for g in grads + (out, h, c)))
        FLOAT32_GRADS.setdefault(key, []).append([g.detach().double().tolist() for g in grads + (out, h, c)])
    p.value("repr", repr(m))


_CASES = {
    "one_layer": {},
    "two_layers": {"layers": 2},
    "batch_first": {"batch_first": True},
    "state": {"state": True},
    "two_layers_state_no_bias": {"layers": 2, "state": True, "bias": False},
    "bidirectional": {"bidirectional": True},
    "bidirectional_two_layers_batch_first_state": {"bidirectional": True, "layers": 2, "batch_first": True,
                                                   "state": True},
    "unbatched": {"unbatched": True, "state": True},
}
for _name, _kw in _CASES.items():
    PROGRAMS[f"rnn_lstm_float64_{_name}"] = lambda t, p, kw=_kw: _lstm(t, p, "float64", **kw)
    PROGRAMS[f"rnn_lstm_float32_no_mkldnn_{_name}"] = \
        lambda t, p, kw=_kw, n=_name: _lstm(t, p, "float32", mkldnn=False, key=f"native {n}", **kw)
    MKLDNN_PROGRAMS[f"rnn_lstm_float32_{_name}"] = \
        lambda t, p, kw=_kw, n=_name: _lstm(t, p, "float32", key=f"mkldnn {n}", **kw)


def _lstm_errors(t, p):
    m = t.nn.LSTM(3, 2, dtype=t.float64)
    x = p.leaf("x", data(3, 2, 3))
    h = p.const(data(1, 2, 2))
    return {
        "4d input": lambda: m(x.unsqueeze(0)),
        "input size": lambda: m(p.leaf("x4", data(3, 2, 4))),
        "dtype": lambda: m(x.float()),
        "hidden size": lambda: m(x, (p.const(data(1, 3, 2)), h)),
        "cell size": lambda: m(x, (h, p.const(data(2, 2, 2)))),
        "hidden rank": lambda: m(x, (h[0], h[0])),
        "dropout": lambda: t.nn.LSTM(3, 2, dropout=1.5),
        "bias type": lambda: t.nn.LSTM(3, 2, bias=1),
    }


def _errors(t, p):
    for tag, case in _lstm_errors(t, p).items():
        p.run(tag, case)
        p.counter(tag)


PROGRAMS["rnn_errors_lstm"] = _errors


# -- GRU and GRUCell: torch's per-step path in float32 too ------------------------------------------------------
def _gru_weights(layers: int, directions: int, bias: bool) -> dict:
    return {k: v[:len(v) * 3 // 4] if k.startswith(("weight", "bias")) else v
            for k, v in _weights(layers, directions, bias).items()}


def _gru(t, p, dtype: str = "float64", layers: int = 1, batch_first: bool = False, bidirectional: bool = False,
         state: bool = False, bias: bool = True, unbatched: bool = False, key: str = ""):
    nn = t.nn
    m = nn.GRU(3, 2, num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidirectional,
               dtype=getattr(t, dtype))
    directions = 2 if bidirectional else 1
    _load(t, p, m, "gru", **_gru_weights(layers, directions, bias))
    shape = (3, 3) if unbatched else ((2, 3, 3) if batch_first else (3, 2, 3))
    x = p.leaf("x", data(*shape, seed=20), dtype=dtype)
    hx = p.leaf("h0", data(layers * directions, *(() if unbatched else (2,)), 2, seed=21), dtype=dtype) \
        if state else None
    out, h = m(x, hx)
    p.watch(out, h)
    p.counter("forward")
    p.value("shapes", (tuple(out.shape), tuple(h.shape), out.stride(), out._version))
    weight = p.const(data(*out.shape, seed=23), dtype=dtype)
    p.run("backward", lambda: ((out * weight).sum() + (h * 2).sum()).backward())
    grads = tuple(q.grad for q in m.parameters()) + (x.grad,) + ((hx.grad,) if state else ())
    if dtype == "float64":
        p.value("values", (out, h))
        p.value("grads", grads)
    else:
        p.value("dtypes", tuple((str(g.dtype), tuple(g.shape)) for g in grads + (out, h)))
        FLOAT32_GRADS.setdefault(key, []).append([g.detach().double().tolist() for g in grads + (out, h)])
    p.value("repr", repr(m))


for _name, _kw in _CASES.items():
    PROGRAMS[f"rnn_gru_float64_{_name}"] = lambda t, p, kw=_kw: _gru(t, p, **kw)
PROGRAMS["rnn_gru_float32_batch_first"] = lambda t, p: _gru(t, p, "float32", batch_first=True, key="gru bf")
PROGRAMS["rnn_gru_float32_bidirectional_state"] = lambda t, p: _gru(t, p, "float32", bidirectional=True, state=True,
                                                                    key="gru bi")


def _gru_cell(t, p, batched: bool, state: bool, bias: bool):
    """GRUCell over two steps: linear_ih chunked, linear_hh chunked, the gates with torch's in-place add_/mul_ (each
    mul_ a hidden CloneBackward0)."""
    cell = t.nn.GRUCell(3, 2, bias=bias, dtype=t.float64)
    weights = {"weight_ih": data(6, 3), "weight_hh": data(6, 2, seed=1)}
    if bias:
        weights.update(bias_ih=data(6, seed=2), bias_hh=data(6, seed=3))
    _load(t, p, cell, "cell", **weights)
    lead = (2,) if batched else ()
    xs = [p.leaf(f"x{i}", data(*lead, 3, seed=4 + i)) for i in range(2)]
    h = p.leaf("h0", data(*lead, 2, seed=6)) if state else None
    for i, x in enumerate(xs):
        h = cell(x, h)
        p.watch(h, tag=f"step {i}")
        p.counter(f"step {i}")
    p.value("h", h)
    p.value("repr", repr(cell))
    p.run("backward", lambda: (h * p.const(data(*lead, 2, seed=8))).sum().backward())
    p.value("grads", tuple(x.grad for x in xs) + tuple(q.grad for q in cell.parameters()))


for _b in (True, False):
    for _s in (True, False):
        PROGRAMS[f"rnn_gru_cell_{'batched' if _b else 'unbatched'}_{'state' if _s else 'zeros'}"] = \
            lambda t, p, _b=_b, _s=_s: _gru_cell(t, p, _b, _s, True)
PROGRAMS["rnn_gru_cell_no_bias"] = lambda t, p: _gru_cell(t, p, True, True, False)


def _gru_errors(t, p):
    m = t.nn.GRU(3, 2, dtype=t.float64)
    cell = t.nn.GRUCell(3, 2, dtype=t.float64)
    x = p.leaf("x", data(3, 2, 3))
    return {
        "4d input": lambda: m(x.unsqueeze(0)),
        "hidden size": lambda: m(x, p.const(data(1, 3, 2))),
        "hidden rank": lambda: m(x, p.const(data(3, 2))),
        "unbatched hidden rank": lambda: m(x[0], p.const(data(1, 1, 2))),
        "cell 3d": lambda: cell(x),
        "cell input size": lambda: cell(p.leaf("x4", data(2, 4))),
        "cell hidden batch": lambda: cell(x[0], p.const(data(3, 2))),
        "cell hidden size": lambda: cell(x[0], p.const(data(2, 3))),
    }


def _errors_gru(t, p):
    for tag, case in _gru_errors(t, p).items():
        p.run(tag, case)
        p.counter(tag)


PROGRAMS["rnn_errors_gru"] = _errors_gru
