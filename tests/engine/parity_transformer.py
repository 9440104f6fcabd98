"""nn.TransformerDecoderLayer, TransformerDecoder and Transformer, scaled_dot_product_attention's math path (dropout,
a mask that requires grad, 3-d inputs), dropout between an RNN's layers, and Tensor.narrow / new_* on engine and
torch, run by test_transformer_parity.py.

Each is `fn(t, p)`; see parity.py. Weights are written-out data, so node names, seq_nrs, order, values, grads and
errors are compared; where dropout draws (training with p > 0), each library draws from its own generator, so the
graph, the counter and the grads' shapes are compared, not the values.
"""
from __future__ import annotations

import warnings
from typing import Callable

from tests.engine.parity_attention import _layer_weights, _mha_weights
from tests.engine.parity_layers import F, _load, data
from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}
MKLDNN_PROGRAMS: dict[str, Callable] = {}
"""float32 LSTMs (oneDNN's MkldnnRnnLayerBackward0, whose workspace the engine does not save): out of
test_saved_parity.py's sweep over PROGRAMS dicts, as parity_rnn.MKLDNN_PROGRAMS."""


def _decoder_layer_weights(prefix: str, seed: int) -> dict:
    weights = _layer_weights(prefix, seed)
    weights.update({f"{prefix}multihead_attn.{k}": v for k, v in _mha_weights(4, seed + 20).items()})
    weights.update({f"{prefix}norm3.weight": data(4, seed=seed + 13), f"{prefix}norm3.bias": data(4, seed=seed + 14)})
    return weights


def _causal(t):
    return t.nn.Transformer.generate_square_subsequent_mask(3, dtype=t.float64)


def _finish(t, p, model, y, *leaves):
    p.watch(y)
    p.counter("forward")
    p.value("y", y)
    p.run("backward", lambda: (y * p.const(data(*y.shape, seed=12))).sum().backward())
    p.value("grads", tuple(q.grad for q in model.parameters()) + tuple(x.grad for x in leaves))


def _decoder(t, p, layers: int, norm_first: bool = False, activation: str = "relu", batch_first: bool = False,
             masks: str = "", final_norm: bool = False):
    nn = t.nn
    layer = nn.TransformerDecoderLayer(4, 2, dim_feedforward=6, dropout=0.0, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first, dtype=t.float64)
    if layers == 0:
        model, weights = layer, _decoder_layer_weights("", 0)
    else:
        model = nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(4, dtype=t.float64) if final_norm else None)
        weights = {}
        for i in range(layers):
            weights.update(_decoder_layer_weights(f"layers.{i}.", i))
    _load(t, p, model, "dec", **weights)
    shape = (lambda s: (2, s, 4)) if batch_first else (lambda s: (s, 2, 4))
    tgt, memory = p.leaf("tgt", data(*shape(3), seed=11)), p.leaf("memory", data(*shape(5), seed=13))
    kw = {}
    if "causal" in masks:
        kw["tgt_mask"] = _causal(t)
    if "is_causal" in masks:
        kw["tgt_is_causal"] = True
    if "padding" in masks:
        kw["memory_key_padding_mask"] = t.tensor([[False, False, False, True, True], [False] * 5])
        kw["tgt_key_padding_mask"] = t.tensor([[False, False, True], [False, False, False]])
    if "memory_mask" in masks:
        kw["memory_mask"] = t.tensor(data(3, 5, seed=17), dtype=t.float64)
    _finish(t, p, model, model(tgt, memory, **kw), tgt, memory)


for _nf in (False, True):
    for _act in ("relu", "gelu"):
        for _bf in (False, True):
            PROGRAMS[f"transformer_decoder_layer_{'pre' if _nf else 'post'}_{_act}_{'bf' if _bf else 'sf'}"] = \
                lambda t, p, nf=_nf, a=_act, bf=_bf: _decoder(t, p, 0, nf, a, bf)
PROGRAMS["transformer_decoder_layer_causal"] = lambda t, p: _decoder(t, p, 0, masks="causal")
PROGRAMS["transformer_decoder_layer_padding_memory_mask"] = lambda t, p: _decoder(t, p, 0, True, "gelu", True,
                                                                                  "padding memory_mask")
PROGRAMS["transformer_decoder_two_layers_causal"] = lambda t, p: _decoder(t, p, 2, masks="causal")
PROGRAMS["transformer_decoder_two_layers_norm_first_padding"] = lambda t, p: _decoder(
    t, p, 2, True, "gelu", True, "causal padding", final_norm=True)


def _transformer_weights(model, seed: int = 0) -> dict:
    return {name: (data(*q.shape, seed=seed + i) if q.dim() > 1 else data(q.shape[0], seed=seed + i))
            for i, (name, q) in enumerate(model.named_parameters())}


def _transformer(t, p, batch_first: bool = False, norm_first: bool = False, masks: bool = False):
    nn = t.nn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the encoder's nested-tensor warning
        model = nn.Transformer(4, 2, 1, 2, dim_feedforward=6, dropout=0.0, batch_first=batch_first,
                               norm_first=norm_first, dtype=t.float64)
    p.value("parameters", tuple((n, tuple(q.shape)) for n, q in model.named_parameters()))
    _load(t, p, model, "tf", **_transformer_weights(model))
    shape = (lambda s: (2, s, 4)) if batch_first else (lambda s: (s, 2, 4))
    src, tgt = p.leaf("src", data(*shape(5), seed=11)), p.leaf("tgt", data(*shape(3), seed=13))
    kw = {"tgt_mask": _causal(t), "src_key_padding_mask": t.tensor([[False] * 4 + [True], [False] * 5]),
          "memory_key_padding_mask": t.tensor([[False] * 4 + [True], [False] * 5])} if masks else {}
    _finish(t, p, model, model(src, tgt, **kw), src, tgt)


PROGRAMS["transformer_seq_first"] = lambda t, p: _transformer(t, p)
PROGRAMS["transformer_batch_first_norm_first_masks"] = lambda t, p: _transformer(t, p, True, True, True)


def _surface(t, p):
    """Constructor defaults, the init's draws (xavier on every matrix: shapes only), errors and the causal mask."""
    nn = t.nn
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = nn.Transformer(4, 2, 1, 1, 6, 0.1, dtype=t.float64)
    p.value("warnings", tuple(str(w.message) for w in caught))
    p.value("attributes", (model.d_model, model.nhead, model.batch_first, model.encoder.num_layers,
                           model.decoder.num_layers, type(model.decoder.norm).__name__,
                           model.decoder.layers[0].dropout3.p, model.decoder.layers[0].norm_first))
    p.value("modules", tuple(name for name, _ in model.named_modules()))
    bound = (6 / 8) ** 0.5  # xavier_uniform_ of the (4, 4) out_proj.weight
    p.value("xavier in bounds", bool((model.decoder.layers[0].self_attn.out_proj.weight.abs() <= bound).all()))
    p.value("mask", nn.Transformer.generate_square_subsequent_mask(4))
    x = t.zeros(3, 2, 4, dtype=t.float64)
    p.run("batch mismatch", lambda: model(x, t.zeros(3, 1, 4, dtype=t.float64)))
    p.run("feature mismatch", lambda: model(x, t.zeros(3, 2, 5, dtype=t.float64)))
    p.run("activation", lambda: nn.TransformerDecoderLayer(4, 2, activation="tanh"))
    custom = nn.Transformer(4, 2, custom_encoder=nn.Identity(), custom_decoder=nn.Identity())
    p.value("custom", (type(custom.encoder).__name__, type(custom.decoder).__name__))
    p.counter("end")


PROGRAMS["transformer_module_surface"] = _surface


def _eval_fast_paths(t, p):
    """Eval mode under no_grad: torch's fast paths for the encoder and the attentions (no node, the same values)."""
    nn = t.nn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = nn.Transformer(4, 2, 1, 1, dim_feedforward=6, dropout=0.2, batch_first=True, dtype=t.float64)
    _load(t, p, model, "tf", **_transformer_weights(model))
    model.eval()
    src, tgt = p.const(data(2, 5, 4, seed=11)), p.const(data(2, 3, 4, seed=13))
    pad = t.tensor([[False] * 4 + [True], [False] * 5])
    with t.no_grad():
        p.value("plain", model(src, tgt))
        p.value("causal", model(src, tgt, tgt_mask=_causal(t), tgt_is_causal=True))
        p.value("padded", model(src, tgt, src_key_padding_mask=pad, memory_key_padding_mask=pad))
        p.value("decoder layer", model.decoder.layers[0](tgt, src))
    p.value("eval with grad", model(src, tgt))
    p.counter("end")


PROGRAMS["transformer_eval_no_grad_fast_paths"] = _eval_fast_paths


def _train_dropout(t, p, batch_first: bool):
    """Training with dropout: F.dropout in the layers, at::dropout inside the attentions' math path; the graph and
    the grads' shapes (each library draws its own masks)."""
    nn = t.nn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = nn.Transformer(4, 2, 1, 1, dim_feedforward=6, dropout=0.5, batch_first=batch_first, dtype=t.float64)
    _load(t, p, model, "tf", **_transformer_weights(model))
    shape = (lambda s: (2, s, 4)) if batch_first else (lambda s: (s, 2, 4))
    src, tgt = p.leaf("src", data(*shape(5), seed=11)), p.leaf("tgt", data(*shape(3), seed=13))
    y = model(src, tgt, tgt_mask=_causal(t))
    p.watch(y)
    p.counter("forward")
    p.run("backward", lambda: y.sum().backward())
    p.value("grad shapes", tuple(tuple(q.grad.shape) for q in model.parameters()))


PROGRAMS["transformer_train_dropout_seq_first"] = lambda t, p: _train_dropout(t, p, False)
PROGRAMS["transformer_train_dropout_batch_first"] = lambda t, p: _train_dropout(t, p, True)


# -- scaled_dot_product_attention's math path -----------------------------------------------------------------
def _sdpa_math(name: str, shapes: tuple, mask=None, mask_grad: bool = False, **kw) -> None:
    def fn(t, p):
        q, k, v = (p.leaf(n, data(*s, seed=i)) for i, (n, s) in enumerate(zip("qkv", shapes, strict=True)))
        leaves = [q, k, v]
        m = None
        if mask is not None:
            m = mask(t) if callable(mask) else p.leaf("mask", mask, requires_grad=mask_grad)
            if mask_grad:
                leaves.append(m)
        _forward_and_grads(t, p, lambda *xs: F(t).scaled_dot_product_attention(q, k, v, attn_mask=m, **kw), *leaves,
                           create_graph=False)
    PROGRAMS[f"transformer_sdpa_math_{name}"] = fn


_sdpa_math("3d", ((2, 3, 4), (2, 5, 4), (2, 5, 4)))
_sdpa_math("3d_causal_scale", ((2, 3, 4), (2, 3, 4), (2, 3, 4)), is_causal=True, scale=0.3)
_sdpa_math("negative_scale", ((2, 3, 4), (2, 5, 4), (2, 5, 4)), scale=-0.4)
_sdpa_math("mask_grad", ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)), mask=data(3, 5, seed=7), mask_grad=True)
_sdpa_math("bool_mask_3d", ((2, 3, 4), (2, 5, 4), (2, 5, 4)),
           mask=lambda t: t.tensor([[True, False, True, True, False]] * 3))
_sdpa_math("masked_row_3d", ((2, 3, 4), (2, 5, 4), (2, 5, 4)),
           mask=lambda t: t.tensor([[-float("inf")] * 5] + [[0.0] * 5] * 2, dtype=t.float64))
_sdpa_math("broadcast_batch", ((2, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)))


def _sdpa_dropout(t, p):
    q, k, v = (p.leaf(n, data(2, 2, 3, 4, seed=i)) for i, n in enumerate("qkv"))
    y = F(t).scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    p.watch(y)
    p.counter("forward")
    p.run("backward", lambda: y.sum().backward())
    p.value("shapes", tuple(tuple(x.grad.shape) for x in (q, k, v)))
    z = F(t).scaled_dot_product_attention(q, k, v, dropout_p=1.0)
    p.watch(z)
    p.value("p=1", z)


PROGRAMS["transformer_sdpa_math_dropout"] = _sdpa_dropout


# -- dropout between an RNN's layers --------------------------------------------------------------------------
def _rnn_dropout(t, p, kind: str, dtype: str, bidirectional: bool):
    nn = t.nn
    rnn = getattr(nn, kind)(3, 4, num_layers=3, dropout=0.5, bidirectional=bidirectional, dtype=getattr(t, dtype))
    x = p.leaf("x", data(2, 2, 3), dtype=dtype)
    out, _ = rnn(x)
    p.watch(out)
    p.counter("forward")
    p.run("backward", lambda: out.sum().backward())
    p.value("grad shapes", tuple(tuple(q.grad.shape) for q in rnn.parameters()))
    rnn.eval()
    out2, _ = rnn(x)
    p.watch(out2, tag="eval graph")
    p.counter("eval")


for _kind in ("LSTM", "GRU"):
    for _dtype in ("float32", "float64"):
        for _bi in (False, True):
            programs = MKLDNN_PROGRAMS if (_kind, _dtype) == ("LSTM", "float32") else PROGRAMS
            programs[f"transformer_rnn_dropout_{_kind}_{_dtype}{'_bi' if _bi else ''}"] = \
                lambda t, p, k=_kind, d=_dtype, b=_bi: _rnn_dropout(t, p, k, d, b)


# -- Tensor.narrow and new_* ----------------------------------------------------------------------------------
def _narrow(t, p):
    x = p.leaf("x", data(4, 3))
    y = x.narrow(0, 1, 2)
    z = t.narrow(y, -1, -2, 2)
    _forward_and_grads(t, p, lambda *xs: x.narrow(1, 1, 2) * 2, x, create_graph=False)
    p.made("views", y, z)
    p.value("saved", (z.grad_fn._saved_dim, z.grad_fn._saved_start, z.grad_fn._saved_end))
    p.value("tensor start", x.narrow(0, t.tensor(1), 2))
    for tag, args in (("too long", (0, 3, 2)), ("dim", (2, 0, 1)), ("start", (0, -5, 1)), ("length", (0, 1, -1)),
                      ("end", (0, 4, 0)), ("negative start", (1, -1, 1))):
        p.run(tag, lambda a=args, tag=tag: p.value(tag, x.narrow(*a)))
    p.run("0-dim", lambda: t.tensor(1.0).narrow(0, 0, 1))
    p.counter("end")


def _new(t, p):
    w = p.leaf("w", data(2, 3))
    p.value("zeros", w.new_zeros(2, 3))
    p.value("zeros tuple", w.new_zeros((1, 2)))
    p.value("ones int", w.new_ones(2, dtype=t.int64))
    p.value("full", w.new_full((2,), 3))
    p.value("empty shape", tuple(w.new_empty(0, 2).shape))
    r = w.new_zeros(2, requires_grad=True)
    p.value("requires grad", (r.requires_grad, r.is_leaf, r.grad_fn))
    p.value("int self", t.tensor([1, 2]).new_zeros(2))
    p.counter("end")


PROGRAMS["transformer_narrow"] = _narrow
PROGRAMS["transformer_new_factories"] = _new
