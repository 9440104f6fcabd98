"""The recurrent and attention layers as fuzzer statement kinds: GRUCell, LSTM, GRU, MultiheadAttention and
TransformerEncoderLayer with written-out float64 weights, and F.scaled_dot_product_attention.

A layer is a "module" variable like the module kind's (an optimizer or the train kind may take it); calling one goes
through call_layer.
"""
from __future__ import annotations

from tests.fuzz.autograd_kinds import _attr, _weights
from tests.fuzz.generator import Generator, Var, kind

LAYERS = ("GRUCell", "LSTM", "GRU", "MultiheadAttention", "TransformerEncoderLayer")


@kind("layer", 1.5)
def layer(g: Generator) -> None:
    """Make a recurrent or attention layer and call it, call one made before, or attend with SDPA."""
    mods = [v for v in g.s.vars.values() if v.dtype == "module" and v.info.get("kind") in LAYERS]
    if g.chance(0.2):
        _sdpa(g)
    elif mods and g.chance(0.5):
        call_layer(g, g.pick_item(mods))
    else:
        call_layer(g, make_layer(g))


def _input(g: Generator, ndim: int, k: int | None = None) -> Var:
    """A contiguous float64 tensor of `ndim` dims (last dim `k` if given, else at most 4), or a new leaf."""
    x = g.pick(lambda v: v.dtype == "f64" and v.shape is not None and len(v.shape) == ndim and v.contiguous
               and 0 < v.shape[-1] <= 4 and all(s > 0 for s in v.shape) and (k is None or v.shape[-1] == k))
    if x is None:
        x = g.leaf((2, 3, k or 3)[-ndim:] if ndim == 2 else (3, 2, k or 3), rg=g.chance(0.5))
    return x


def make_layer(g: Generator) -> Var:
    op = g.pick_item(list(LAYERS))
    x = _input(g, 2 if op == "GRUCell" else 3)
    k = x.shape[-1]
    if op == "TransformerEncoderLayer" and k == 1:
        op = "MultiheadAttention"  # LayerNorm over one element: rounding noise
    bf = g.chance(0.5)
    m = Var(g.fresh("m"), None, "module")
    if op in ("GRUCell", "LSTM", "GRU"):
        rows = 8 if op == "LSTM" else 6
        suffix = "" if op == "GRUCell" else "_l0"
        params = {f"weight_ih{suffix}": (rows, k), f"weight_hh{suffix}": (rows, 2), f"bias_ih{suffix}": (rows,),
                  f"bias_hh{suffix}": (rows,)}
        extra = "" if op == "GRUCell" else f", batch_first={bf}"
        make = f"t.nn.{op}({k}, 2{extra}, dtype=t.float64)"
        out = 2
    else:
        # bias=False: the key bias's grad is zero but for rounding (softmax ignores a shift), which an adaptive
        # optimizer would scale up into a difference
        params = {"in_proj_weight": (3 * k, k), "out_proj.weight": (k, k)}
        make = f"t.nn.MultiheadAttention({k}, 1, bias=False, batch_first={bf}, dtype=t.float64)"
        if op == "TransformerEncoderLayer":
            params = {f"self_attn.{name}": shape for name, shape in params.items()}
            params.update({"linear1.weight": (3, k), "linear2.weight": (k, 3), "norm1.weight": (k,),
                           "norm2.weight": (k,)})
            act = g.pick_item(['"relu"', '"gelu"'])
            make = (f"t.nn.TransformerEncoderLayer({k}, 1, dim_feedforward=3, dropout=0.0, activation={act}, "
                    f"batch_first={bf}, norm_first={g.chance(0.5)}, bias=False, dtype=t.float64)")
        out = k
    m.info = {"kind": op, "in": k, "out": out, "params": list(params), "need_weights": g.chance(0.5)}
    text = f"{{out0}} = {make}\n{{out0}}.load_state_dict({_weights(g, params)})"
    g.emit("layer", op, text, [], [m], grad_of=tuple("{out0}" + _attr(name) for name in params), mode=None)
    return m


def call_layer(g: Generator, m: Var) -> Var:
    """m(x) on an input of the right rank and width; the output tensor (an LSTM's or GRU's first)."""
    op = m.info["kind"]
    x = _input(g, 2 if op == "GRUCell" else 3, m.info["in"])
    out = g.derived(x.shape[:-1] + (m.info["out"],), "f64", x, m)
    out.rg, out.leaf, out.anc = True, False, out.anc | {m.name}
    out.noisy = out.noisy or op == "TransformerEncoderLayer"
    if op == "GRU":
        out.contiguous = False  # batch_first: transposed in place
    call = {"GRUCell": "{0}({1})", "LSTM": "{0}({1})[0]", "GRU": "{0}({1})[0]",
            "MultiheadAttention": f"{{0}}({{1}}, {{1}}, {{1}}, need_weights={m.info['need_weights']})[0]",
            "TransformerEncoderLayer": "{0}({1})"}[op]
    g.emit("layer", "call", "{out0} = " + call, [m, x], [out])
    return out


def _sdpa(g: Generator) -> None:
    """Self-attention of a (B, L, E) tensor as (B, 1, L, E) heads, causal or not: torch's fused CPU node."""
    x = _input(g, 3)
    out = g.derived((x.shape[0], 1) + x.shape[1:], "f64", x)
    causal = g.chance(0.5)
    q = "{0}.unsqueeze(1)"
    g.emit("layer", "sdpa", f"{{out0}} = t.nn.functional.scaled_dot_product_attention({q}, {q} * 0.5, {q}, "
           f"is_causal={causal})", [x], [out])
