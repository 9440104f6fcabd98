"""The recurrent and attention layers as fuzzer statement kinds: GRUCell, LSTM, GRU, MultiheadAttention,
TransformerEncoderLayer, TransformerDecoderLayer and Transformer with written-out float64 weights,
F.scaled_dot_product_attention (its fused CPU node and its math path), channel dropout in its deterministic
settings, a round trip through float16, and transposed convolutions.

A layer is a "module" variable like the module kind's (an optimizer or the train kind may take it); calling one goes
through call_layer.
"""
from __future__ import annotations

from tests.fuzz.autograd_kinds import _attr, _weights
from tests.fuzz.generator import Generator, Var, kind

LAYERS = ("GRUCell", "LSTM", "GRU", "MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
          "Transformer")
_TRANSFORMERS = ("TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer")


@kind("layer", 1.5)
def layer(g: Generator) -> None:
    """Make a recurrent or attention layer and call it, call one made before, or attend with SDPA."""
    mods = [v for v in g.s.vars.values() if v.dtype == "module" and v.info.get("kind") in LAYERS]
    if g.chance(0.2):
        _sdpa(g)
    elif g.chance(0.1):
        _channel_dropout(g)
    elif g.chance(0.1):
        _half(g)
    elif g.chance(0.25):
        _conv_transpose(g)
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
    if op in _TRANSFORMERS and k == 1:
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
        if op in _TRANSFORMERS:
            attn = {name: shape for name, shape in params.items()}
            params = _block_params("", "self_attn", attn, k, op != "TransformerEncoderLayer")
            act = g.pick_item(['"relu"', '"gelu"'])
            make = (f"t.nn.{op}({k}, 1, dim_feedforward=3, dropout=0.0, activation={act}, batch_first={bf}, "
                    f"norm_first={g.chance(0.5)}, bias=False, dtype=t.float64)")
            if op == "Transformer":
                params = _block_params("encoder.layers.0.", "self_attn", attn, k, False)
                params.update(_block_params("decoder.layers.0.", "self_attn", attn, k, True))
                params.update({"encoder.norm.weight": (k,), "decoder.norm.weight": (k,)})
                make = (f"t.nn.Transformer({k}, 1, 1, 1, dim_feedforward=3, dropout=0.0, activation={act}, "
                        f"batch_first={bf}, norm_first={g.chance(0.5)}, bias=False, dtype=t.float64)")
        out = k
    m.info = {"kind": op, "in": k, "out": out, "params": list(params), "need_weights": g.chance(0.5), "bf": bf}
    text = f"{{out0}} = {make}\n{{out0}}.load_state_dict({_weights(g, params)})"
    g.emit("layer", op, text, [], [m], grad_of=tuple("{out0}" + _attr(name) for name in params), mode=None)
    return m


def _block_params(prefix: str, attn_name: str, attn: dict, k: int, decoder: bool) -> dict:
    """The parameters of an encoder (or, with `decoder`, a decoder) layer without biases, under `prefix`."""
    params = {f"{prefix}{attn_name}.{name}": shape for name, shape in attn.items()}
    if decoder:
        params.update({f"{prefix}multihead_attn.{name}": shape for name, shape in attn.items()})
        params[f"{prefix}norm3.weight"] = (k,)
    params.update({f"{prefix}linear1.weight": (3, k), f"{prefix}linear2.weight": (k, 3), f"{prefix}norm1.weight": (k,),
                   f"{prefix}norm2.weight": (k,)})
    return params


def call_layer(g: Generator, m: Var) -> Var:
    """m(x) on an input of the right rank and width; the output tensor (an LSTM's or GRU's first)."""
    op = m.info["kind"]
    x = _input(g, 2 if op == "GRUCell" else 3, m.info["in"])
    attention = op == "MultiheadAttention" or op in _TRANSFORMERS
    seq, batch = (1, 0) if m.info["bf"] else (0, 1)
    if attention and x.shape[seq] == 1:
        # one key: softmax is exactly 1 and the query and key weights' grads are 0 but for rounding, which an
        # adaptive optimizer's step scales up into a difference
        x = g.leaf((2, 3, m.info["in"]) if m.info["bf"] else (3, 2, m.info["in"]), rg=g.chance(0.5))
    ins = [m, x]
    if op in ("TransformerDecoderLayer", "Transformer"):
        ins.append(_input(g, 3, m.info["in"]))  # the memory (or the encoder's source): same batch, two keys or more
        if ins[2].shape[batch] != x.shape[batch] or ins[2].shape[seq] == 1:
            ins[2] = x
    out = g.derived(x.shape[:-1] + (m.info["out"],), "f64", *ins)
    out.rg, out.leaf, out.anc = True, False, out.anc | {m.name}
    out.noisy = out.noisy or op in _TRANSFORMERS
    if op == "GRU":
        out.contiguous = False  # batch_first: transposed in place
    call = {"GRUCell": "{0}({1})", "LSTM": "{0}({1})[0]", "GRU": "{0}({1})[0]",
            "MultiheadAttention": f"{{0}}({{1}}, {{1}}, {{1}}, need_weights={m.info['need_weights']})[0]",
            "TransformerEncoderLayer": "{0}({1})", "TransformerDecoderLayer": "{0}({1}, {2})",
            "Transformer": "{0}({2}, {1})"}[op]
    g.emit("layer", "call", "{out0} = " + call, ins, [out])
    return out


def _sdpa(g: Generator) -> None:
    """Self-attention of a (B, L, E) tensor as (B, 1, L, E) heads, causal or not: torch's fused CPU node."""
    x = _input(g, 3)
    if g.chance(0.4):
        _sdpa_math(g, x)
        return
    out = g.derived((x.shape[0], 1) + x.shape[1:], "f64", x)
    causal = g.chance(0.5)
    q = "{0}.unsqueeze(1)"
    g.emit("layer", "sdpa", f"{{out0}} = t.nn.functional.scaled_dot_product_attention({q}, {q} * 0.5, {q}, "
           f"is_causal={causal})", [x], [out])


def _sdpa_math(g: Generator, x: Var) -> None:
    """SDPA where torch takes its math path: (B, L, E) inputs as they are, or a float mask that requires grad."""
    if g.chance(0.5):
        out = g.derived(x.shape, "f64", x)
        out.noisy = True
        g.emit("layer", "sdpa_math", "{out0} = t.nn.functional.scaled_dot_product_attention({0}, {0} * 0.5, {0}, "
               f"is_causal={g.chance(0.5)})", [x], [out])
        return
    mask = g.leaf((x.shape[1], x.shape[1]), rg=True)
    out = g.derived((x.shape[0], 1) + x.shape[1:], "f64", x, mask)
    out.noisy = True
    q = "{0}.unsqueeze(1)"
    g.emit("layer", "sdpa_math", f"{{out0}} = t.nn.functional.scaled_dot_product_attention({q}, {q}, {q}, "
           "attn_mask={1})", [x, mask], [out])


def _channel_dropout(g: Generator) -> None:
    """dropout1d/2d/3d and their modules where they draw nothing (p=0, or eval): the input itself for the ranks
    torch's feature_dropout takes as batched, else an unsqueeze/squeeze pair around it."""
    x = g.pick(lambda v: v.dtype == "f64" and v.shape is not None and 2 <= len(v.shape) <= 4) or g.leaf((2, 3, 2))
    n = len(x.shape)
    op = g.pick_item(["dropout2d"] + (["dropout1d"] if n in (2, 3) else []) + (["dropout3d"] if n == 4 else []))
    text = g.pick_item([f"t.nn.functional.{op}({{0}}, 0.0)", f"t.nn.functional.{op}({{0}}, 0.5, training=False)",
                        f"t.nn.{op[0].upper()}{op[1:]}(0.0)({{0}})"])
    itself = op == "dropout2d" or (op == "dropout1d" and n == 3)
    out = g.derived(x.shape, x.dtype, x, positive=x.positive)
    if itself:  # as the functional kind's dropout: the result is `x` itself
        out.inference, out.kernel_version = x.inference, x.kernel_version
    else:
        out = g.derived(x.shape, x.dtype, x, positive=x.positive, view_of=x)
    g.emit("layer", op, "{out0} = " + text, [x], [out])


def _half(g: Generator) -> None:
    """A round trip through float16: cast (ToCopyBackward0), an op rounded to half, cast back (softmax and
    log_softmax left out: torch's half kernels round some steps in half, the engine's reductions in float)."""
    x = g.pick(lambda v: v.dtype == "f64" and v.shape not in (None, ())) or g.leaf((2, 3))
    op = g.pick_item(["{0}.half() * 0.5", "({0}.half() + 1.25).abs()", "{0}.to(t.float16).exp()",
                      "t.tanh({0}.half())", "{0}.half().sigmoid()"])
    out = g.derived(x.shape, "f64", x)
    g.emit("layer", "half", f"{{out0}} = ({op}).double()", [x], [out])


def _conv_transpose(g: Generator) -> None:
    """conv_transpose1d of a (N, C, L) tensor, conv_transpose2d of a (N, C, H, W) or unbatched (C, H, W) one:
    one ConvolutionBackward0 with transposed=True (unbatched: Unsqueeze/Squeeze around it)."""
    x = g.pick(lambda v: v.dtype == "f64" and v.shape is not None and len(v.shape) in (3, 4)
               and all(0 < d <= 4 for d in v.shape)) or g.leaf((2, 3, 2))
    n = len(x.shape)
    nd = 2 if n == 4 or g.chance(0.5) else 1
    batched = n == nd + 2
    c = x.shape[1] if batched else x.shape[0]
    stride = g.pick_item([1, 2])
    out_pad = g.pick_item([0, stride - 1])
    spatial = tuple((d - 1) * stride + 2 + out_pad for d in x.shape[n - nd:])
    w = g.leaf((c, 2) + (2,) * nd, rg=g.chance(0.7))
    ins = [x, w]
    bias = "None"
    if g.chance(0.5):
        ins.append(g.leaf((2,), rg=g.chance(0.7)))
        bias = "{2}"
    out = g.derived(((x.shape[0],) if batched else ()) + (2,) + spatial, "f64", *ins)
    g.emit("layer", f"conv_transpose{nd}d", f"{{out0}} = t.nn.functional.conv_transpose{nd}d({{0}}, {{1}}, {bias}, "
           f"{stride}, 0, {out_pad})", ins, [out])
