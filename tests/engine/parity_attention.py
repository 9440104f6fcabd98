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


def _sdpa(name: str, shapes: tuple, dtype: str = "float64", grad: tuple = (True, True, True), **kw) -> None:
    """SDPA of leaves q, k, v of `shapes`; `mask` in kw is built by a function of t."""
    def fn(t, p):
        q, k, v = (p.leaf(n, data(*s, seed=i), requires_grad=g, dtype=dtype)
                   for i, (n, s, g) in enumerate(zip("qkv", shapes, grad, strict=True)))
        args = {a: (b(t) if callable(b) else b) for a, b in kw.items()}
        live = [x for x in (q, k, v) if x.requires_grad]
        if dtype == "float64":
            _forward_and_grads(t, p, lambda *xs: F(t).scaled_dot_product_attention(q, k, v, **args), *live,
                               create_graph=False)
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


def _sdpa_errors(t, p):
    q = p.leaf("q", data(1, 2, 3, 4))
    return {
        "dtypes": lambda: F(t).scaled_dot_product_attention(q, q.detach().float(), q),
        "long mask": lambda: F(t).scaled_dot_product_attention(q, q, q, attn_mask=t.zeros(3, 3, dtype=t.int64)),
    }


_errors("sdpa", _sdpa_errors)
