"""Attention on engine and torch, run by test_attention_parity.py: F.scaled_dot_product_attention (torch's fused CPU
kernel), nn.MultiheadAttention, nn.TransformerEncoderLayer / TransformerEncoder and a GPT-style training step.

Each is `fn(t, p)`; see parity.py. Inputs and weights are written-out data (parity_layers.data), so node names,
seq_nrs, order, grads and errors are compared.
"""
from __future__ import annotations

from typing import Callable

from tests.engine.parity_layers import F, _load, data
from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}


def program_(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _sdpa(name: str, shapes: tuple, dtype: str = "float64", grad: tuple = (True, True, True), create_graph=False,
          **kw) -> None:
    """SDPA of leaves q, k, v of `shapes`; `mask` in kw is built by a function of t."""
    def fn(t, p):
        q, k, v = (p.leaf(n, data(*s, seed=i), requires_grad=g, dtype=dtype)
                   for i, (n, s, g) in enumerate(zip("qkv", shapes, grad, strict=True)))
        args = {a: (b(t) if callable(b) else b) for a, b in kw.items()}
        live = [x for x in (q, k, v) if x.requires_grad]
        if dtype == "float64":
            _forward_and_grads(t, p, lambda *xs: F(t).scaled_dot_product_attention(q, k, v, **args), *live,
                               create_graph=create_graph)
            return
        y = F(t).scaled_dot_product_attention(q, k, v, **args)
        p.watch(y)
        p.run("backward", lambda: (y * y).sum().backward())
        # float32 values: numpy and torch round differently, so dtypes and shapes only (float64 checks the values)
        p.value("dtypes", tuple((str(g.dtype), tuple(g.shape)) for g in tuple(x.grad for x in live) + (y,)))
    PROGRAMS[f"attention_sdpa_{name}"] = fn


def _errors(name: str, cases: Callable) -> None:
    """A program that runs each case of `cases(t, p)` and records its exception, with the counter after each."""
    def fn(t, p):
        for tag, case in cases(t, p).items():
            p.run(tag, case)
            p.counter(tag)
    PROGRAMS[f"attention_errors_{name}"] = fn


_QKV = ((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 3))
_sdpa("plain", _QKV)
_sdpa("float32", _QKV, dtype="float32")
_sdpa("causal", _QKV, is_causal=True)
_sdpa("causal_longer_keys", ((1, 2, 3, 3), (1, 2, 5, 3), (1, 2, 5, 3)), is_causal=True)
_sdpa("bool_mask", _QKV, attn_mask=lambda t: t.tensor([[True, False, True, False], [True] * 4,
                                                        [False, True, True, False], [True, True, False, True]]))
_sdpa("float_mask", _QKV, attn_mask=lambda t: t.tensor(data(2, 1, 4, 4, seed=5), dtype=t.float64))
_sdpa("float32_mask_on_float64", _QKV, attn_mask=lambda t: t.tensor(data(4, 4, seed=5)))
_sdpa("masked_row", _QKV, attn_mask=lambda t: t.tensor([[True] * 4, [False] * 4, [True, False] * 2, [True] * 4]))
_sdpa("mask_and_causal", _QKV, attn_mask=lambda t: t.tensor(data(4, 4, seed=6), dtype=t.float64), is_causal=True)
_sdpa("scale", _QKV, scale=0.7)
_sdpa("query_only", _QKV, grad=(True, False, False))
_sdpa("value_only", _QKV, grad=(False, False, True))
# create_graph: the grads' grad_fn is a NotImplemented node (seq 2**64-1) over grad_out, the inputs and the output,
# and the second-order grad raises torch's error
_sdpa("create_graph", _QKV, create_graph=True)
_sdpa("create_graph_query_only", _QKV, grad=(True, False, False), create_graph=True)


@program_("attention_sdpa_output_layout")
def _sdpa_layout(t, p):
    """The output takes the query's strides (a (B, L, H, E) layout here), so that a view of it works as in torch."""
    x = p.leaf("x", data(2, 4, 2, 6))
    q = x.transpose(1, 2)
    y = F(t).scaled_dot_product_attention(q, q * 2, q)
    p.value("strides", y.stride())
    z = p.run("view", lambda: y.transpose(1, 2).view(2, 4, 12))
    p.watch(z)
    p.run("backward", lambda: (z * z).sum().backward())
    p.value("grad", x.grad)


def _sdpa_errors(t, p):
    q = p.leaf("q", data(1, 2, 3, 4))
    return {
        "dtypes": lambda: F(t).scaled_dot_product_attention(q, q.detach().float(), q),
        "long mask": lambda: F(t).scaled_dot_product_attention(q, q, q, attn_mask=t.zeros(3, 3, dtype=t.int64)),
    }


_errors("sdpa", _sdpa_errors)


# -- nn.MultiheadAttention ------------------------------------------------------------------------------------
def _mha_weights(e: int, seed: int = 0, separate: tuple | None = None) -> dict:
    weights = {"out_proj.weight": data(e, e, seed=seed + 2), "out_proj.bias": data(e, seed=seed + 3),
               "in_proj_bias": data(3 * e, seed=seed + 1)}
    if separate is None:
        weights["in_proj_weight"] = [[v / 2 for v in row] for row in data(3 * e, e, seed=seed)]
    else:
        for i, (name, cols) in enumerate(zip(("q", "k", "v"), (e,) + separate, strict=True)):
            weights[f"{name}_proj_weight"] = data(e, cols, seed=seed + 4 + i)
    return weights


def _mha(t, p, batch_first: bool, need_weights: bool, mask: str | None = None, cross: bool = False,
         eval_mode: bool = False, average: bool = True, separate: bool = False, unbatched: bool = False,
         padding: bool = False):
    nn = t.nn
    kdim = (4, 5) if separate else (None, None)
    m = nn.MultiheadAttention(6, 2, batch_first=batch_first, kdim=kdim[0], vdim=kdim[1], dtype=t.float64)
    _load(t, p, m, "mha", **_mha_weights(6, separate=(4, 5) if separate else None))
    if eval_mode:
        m.eval()
    lead = (4,) if unbatched else ((3, 4) if batch_first else (4, 3))
    x = p.leaf("x", data(*lead, 6, seed=7))
    if separate:
        key, value = p.leaf("k", data(*lead, 4, seed=8)), p.leaf("v", data(*lead, 5, seed=9))
    elif cross:
        key = value = p.leaf("mem", data(*lead, 6, seed=8))
    else:
        key = value = x
    kw = {}
    if mask == "bool":
        kw["attn_mask"] = t.tensor([[False, True, True, True], [False, False, True, True], [False] * 3 + [True],
                                    [False] * 4])
    elif mask == "float":
        kw["attn_mask"] = p.const(data(4, 4, seed=10))
    elif mask == "causal":
        kw["attn_mask"] = t.tensor([[False, True, True, True], [False, False, True, True], [False] * 3 + [True],
                                    [False] * 4])
        kw["is_causal"] = True
    if padding:
        kw["key_padding_mask"] = t.tensor([[False, False, False, True], [False] * 4, [False, True, False, False]])
    out, w = m(x, key, value, need_weights=need_weights, average_attn_weights=average, **kw)
    p.watch(out)
    p.counter("forward")
    p.value("out", out)
    p.value("weights", w)
    loss = (out * out).sum() + (w.sum() * 0.5 if w is not None else 0)
    p.run("backward", lambda: loss.backward())
    p.value("grads", tuple(q.grad for q in m.parameters()) + (x.grad,))
    p.value("repr", repr(m))


for _bf in (False, True):
    for _nw in (True, False):
        _tag = f"{'batch_first' if _bf else 'seq_first'}_{'weights' if _nw else 'no_weights'}"
        PROGRAMS[f"attention_mha_{_tag}"] = lambda t, p, bf=_bf, nw=_nw: _mha(t, p, bf, nw)
        PROGRAMS[f"attention_mha_{_tag}_bool_mask"] = lambda t, p, bf=_bf, nw=_nw: _mha(t, p, bf, nw, "bool")
        PROGRAMS[f"attention_mha_{_tag}_eval"] = lambda t, p, bf=_bf, nw=_nw: _mha(t, p, bf, nw, eval_mode=True)
        PROGRAMS[f"attention_mha_{_tag}_cross"] = lambda t, p, bf=_bf, nw=_nw: _mha(t, p, bf, nw, cross=True)
        PROGRAMS[f"attention_mha_{_tag}_padding"] = lambda t, p, bf=_bf, nw=_nw: _mha(t, p, bf, nw, padding=True)
PROGRAMS["attention_mha_float_mask"] = lambda t, p: _mha(t, p, False, True, "float")
PROGRAMS["attention_mha_causal_no_weights"] = lambda t, p: _mha(t, p, True, False, "causal")
PROGRAMS["attention_mha_causal_weights"] = lambda t, p: _mha(t, p, True, True, "causal")
PROGRAMS["attention_mha_per_head_weights"] = lambda t, p: _mha(t, p, False, True, average=False)
PROGRAMS["attention_mha_kdim_vdim"] = lambda t, p: _mha(t, p, False, True, separate=True)
PROGRAMS["attention_mha_kdim_vdim_no_weights"] = lambda t, p: _mha(t, p, True, False, separate=True)
PROGRAMS["attention_mha_unbatched"] = lambda t, p: _mha(t, p, False, True, unbatched=True)
PROGRAMS["attention_mha_unbatched_no_weights"] = lambda t, p: _mha(t, p, False, False, "float", unbatched=True)


def _mha_errors(t, p):
    m = t.nn.MultiheadAttention(6, 2, dtype=t.float64)
    x = p.leaf("x", data(4, 3, 6))
    return {
        "heads": lambda: t.nn.MultiheadAttention(6, 4),
        "zero heads": lambda: t.nn.MultiheadAttention(6, 0),
        "4d query": lambda: m(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0)),
        "key rank": lambda: m(x, x[0], x[0]),
        "mask shape": lambda: m(x, x, x, attn_mask=t.zeros(3, 4, dtype=t.float64)),
        "mask dtype": lambda: m(x, x, x, attn_mask=t.zeros(4, 4, dtype=t.int64)),
        "causal without mask": lambda: m(x, x, x, is_causal=True),
        "embed dim": lambda: m(p.leaf("y", data(4, 3, 4)), p.leaf("y2", data(4, 3, 4)), p.leaf("y3", data(4, 3, 4))),
        "padding shape": lambda: m(x, x, x, key_padding_mask=t.zeros(2, 4, dtype=t.bool)),
    }


_errors("mha", _mha_errors)


# -- TransformerEncoderLayer and TransformerEncoder -----------------------------------------------------------
def _layer_weights(prefix: str, seed: int) -> dict:
    weights = {f"{prefix}self_attn.{k}": v for k, v in _mha_weights(4, seed).items()}
    weights.update({f"{prefix}linear1.weight": data(6, 4, seed=seed + 5), f"{prefix}linear1.bias": data(6, seed=seed),
                    f"{prefix}linear2.weight": data(4, 6, seed=seed + 6), f"{prefix}linear2.bias": data(4, seed=seed),
                    f"{prefix}norm1.weight": data(4, seed=seed + 7), f"{prefix}norm1.bias": data(4, seed=seed + 8),
                    f"{prefix}norm2.weight": data(4, seed=seed + 9), f"{prefix}norm2.bias": data(4, seed=seed + 1)})
    return weights


def _encoder(t, p, layers: int, norm_first: bool, activation: str, batch_first: bool, mask: str | None = None,
             final_norm: bool = False):
    nn = t.nn
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first, dtype=t.float64)
    if layers == 0:
        model, weights = layer, _layer_weights("", 0)
    else:
        model = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(4, dtype=t.float64) if final_norm else None,
                                      enable_nested_tensor=False)
        weights = {}
        for i in range(layers):
            weights.update(_layer_weights(f"layers.{i}.", i))
    _load(t, p, model, "enc", **weights)
    x = p.leaf("x", data(*((2, 3) if batch_first else (3, 2)), 4, seed=11))
    kw = {}
    if mask == "causal":
        kw["mask" if layers else "src_mask"] = nn.Transformer.generate_square_subsequent_mask(3, dtype=t.float64) \
            if hasattr(nn, "Transformer") else t.tensor([[0.0, -float("inf"), -float("inf")], [0.0, 0.0, -float("inf")],
                                                        [0.0, 0.0, 0.0]], dtype=t.float64)
    elif mask == "padding":
        kw["src_key_padding_mask"] = t.tensor([[False, False, True], [False, False, False]])
    y = model(x, **kw)
    p.watch(y)
    p.counter("forward")
    p.value("y", y)
    p.run("backward", lambda: (y * p.const(data(*y.shape, seed=12))).sum().backward())
    p.value("grads", tuple(q.grad for q in model.parameters()) + (x.grad,))


for _nf in (False, True):
    for _act in ("relu", "gelu"):
        for _bf in (False, True):
            PROGRAMS[f"attention_encoder_layer_{'pre' if _nf else 'post'}_{_act}_{'bf' if _bf else 'sf'}"] = \
                lambda t, p, nf=_nf, a=_act, bf=_bf: _encoder(t, p, 0, nf, a, bf)
PROGRAMS["attention_encoder_layer_causal"] = lambda t, p: _encoder(t, p, 0, False, "relu", True, "causal")
PROGRAMS["attention_encoder_layer_padding"] = lambda t, p: _encoder(t, p, 0, True, "gelu", False, "padding")
PROGRAMS["attention_encoder_two_layers"] = lambda t, p: _encoder(t, p, 2, False, "relu", False)
PROGRAMS["attention_encoder_two_layers_norm_first_causal"] = lambda t, p: _encoder(t, p, 2, True, "gelu", True,
                                                                                   "causal", final_norm=True)
PROGRAMS["attention_encoder_padding"] = lambda t, p: _encoder(t, p, 1, False, "relu", True, "padding")


# -- a GPT-style block, trained for two steps -----------------------------------------------------------------
def _gpt(t, p, sdpa: bool):
    """minGPT/nanoGPT's shape: token and position embeddings, a pre-norm block (LayerNorm, causal self-attention by
    SDPA or by a masked softmax, GELU MLP), a final LayerNorm and head, cross_entropy with ignore_index; AdamW."""
    nn, fn = t.nn, t.nn.functional
    n_embd, n_head, block, vocab = 4, 2, 3, 5

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(n_embd, dtype=t.float64), nn.LayerNorm(n_embd, dtype=t.float64)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, dtype=t.float64)
            self.c_proj = nn.Linear(n_embd, n_embd, dtype=t.float64)
            self.fc = nn.Linear(n_embd, 2 * n_embd, dtype=t.float64)
            self.proj = nn.Linear(2 * n_embd, n_embd, dtype=t.float64)
            self.register_buffer("bias", t.tensor([[1.0, 0, 0], [1, 1, 0], [1, 1, 1]]).view(1, 1, block, block))

        def attn(self, x):
            b, s, c = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(b, s, n_head, c // n_head).transpose(1, 2)
            q = q.view(b, s, n_head, c // n_head).transpose(1, 2)
            v = v.view(b, s, n_head, c // n_head).transpose(1, 2)
            if sdpa:
                y = fn.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
                att = att.masked_fill(self.bias[:, :, :s, :s] == 0, float("-inf"))
                y = fn.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, s, c))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.proj(fn.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, n_embd, dtype=t.float64), nn.Embedding(block, n_embd,
                                                                                            dtype=t.float64)
            self.h = nn.ModuleList([Block()])
            self.ln_f = nn.LayerNorm(n_embd, dtype=t.float64)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False, dtype=t.float64)

        def forward(self, idx, targets):
            pos = t.arange(0, idx.size(1), dtype=t.long)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return fn.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    model = GPT()
    weights = {}
    for i, (name, q) in enumerate(model.named_parameters()):
        weights[name] = data(*q.shape, seed=i) if q.dim() else 0.1
    _load(t, p, model, "gpt", **weights)
    optimizer = t.optim.AdamW(model.parameters(), lr=0.05)
    idx = t.tensor([[1, 4, 2], [0, 3, 3]])
    targets = t.tensor([[4, 2, -1], [3, 3, 1]])
    for step in range(2):
        optimizer.zero_grad(set_to_none=True)
        loss = model(idx, targets)
        p.watch(loss, tag=f"graph {step}")
        p.counter(f"forward {step}")
        p.value("loss", loss)
        p.run("backward", lambda loss=loss: loss.backward())
        p.value("grads", tuple(q.grad for q in model.parameters()))
        optimizer.step()
    p.value("params", tuple(model.parameters()))


PROGRAMS["attention_gpt_block_sdpa"] = lambda t, p: _gpt(t, p, True)
PROGRAMS["attention_gpt_block_masked_softmax"] = lambda t, p: _gpt(t, p, False)


@program_("attention_eval_no_grad_fast_paths")
def _fast_paths(t, p):
    """Eval mode under no_grad: torch's fused fast paths; no node, the same values (and the nested-tensor encoder's
    zeros at padded positions)."""
    nn = t.nn
    m = nn.MultiheadAttention(4, 2, batch_first=True, dtype=t.float64)
    _load(t, p, m, "mha", **_mha_weights(4))
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, batch_first=True, dtype=t.float64)
    _load(t, p, layer, "layer", **_layer_weights("", 0))
    enc = nn.TransformerEncoder(layer, 2)
    m.eval()
    enc.eval()
    x = p.const(data(2, 3, 4, seed=11))
    pad = t.tensor([[False, False, True], [False, False, False]])
    with t.no_grad():
        out, w = m(x, x, x)
        p.value("mha", (out, w))
        out, w = m(x, x, x, key_padding_mask=pad, need_weights=False)
        p.value("mha padded", (out, w))
        p.value("layer", layer(x))
        p.value("layer padded", layer(x, src_key_padding_mask=pad))
        p.value("encoder", enc(x))
        p.value("encoder padded", enc(x, src_key_padding_mask=pad))
        p.value("encoder padded first", enc(x, src_key_padding_mask=t.tensor([[True, False, False]] * 2)))
        normed = nn.TransformerEncoder(layer, 1, norm=nn.LayerNorm(4, dtype=t.float64))
        normed.eval()
        p.value("encoder padded, final norm", normed(x, src_key_padding_mask=pad))
    p.counter("after")
