"""engine.nn programs run on both engine and torch by test_nn_parity.py. Each is `fn(t, p)`; see parity.py.

Functional ops get the forward graph, the create_graph formula graph and second-order values
(`_forward_and_grads`); modules get their graphs with weights copied in from written-out data; errors compare
type and message. Dropout's mask comes from each module's own generator, so its programs compare graphs and
the mask's shape of values (every output is 0 or 2x), not the values themselves.
"""
from __future__ import annotations

from typing import Callable

from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}

A23 = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]
B23 = [[1.1, 0.4, -0.9], [0.2, -1.3, 0.8]]
P23 = [[0.2, 0.9, 0.5], [1.0, 0.0, 0.3]]
A34 = [[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, -2.2], [0.0, 0.9, -0.4, 1.3]]
V3 = [0.3, -0.8, 1.4]
W3 = [1.2, -0.5, 0.8]
E43 = [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9], [1.0, -1.1, 0.2]]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _op(name: str, build: Callable, *data, grad: tuple | None = None) -> None:
    """A program: leaves from `data` (those flagged in `grad` require grad), the output of `build(t, *leaves)`."""
    def fn(t, p):
        flags = grad or (True,) * len(data)
        leaves = [p.leaf(f"x{i}", d, requires_grad=f) for i, (d, f) in enumerate(zip(data, flags, strict=True))]
        live = [x for x in leaves if x.requires_grad]
        _forward_and_grads(t, p, lambda *xs: build(t, *leaves), *live)
    PROGRAMS[f"nn_{name}"] = fn


def F(t):  # noqa: N802 - torch.nn.functional's usual alias
    return t.nn.functional


# -- functional ops: forward graph, formula graph (create_graph) and second order --------------------------
_op("gelu", lambda t, a: F(t).gelu(a), A23)
_op("gelu_tanh", lambda t, a: F(t).gelu(a, approximate="tanh"), A23)
_op("gelu_3d", lambda t, a: F(t).gelu(a) * 2, [A23, B23])
_op("relu_F", lambda t, a: F(t).relu(a), A23)
_op("tanh_sigmoid_F", lambda t, a: F(t).tanh(a) + F(t).sigmoid(a), A23)
_op("log_softmax_F", lambda t, a: F(t).log_softmax(a, dim=1), A23)
_op("layer_norm", lambda t, a, w, b: F(t).layer_norm(a, (3,), w, b), A23, W3, V3)
_op("layer_norm_noaffine", lambda t, a: F(t).layer_norm(a, [3]), A23)
_op("layer_norm_weight_only", lambda t, a, w: F(t).layer_norm(a, (3,), w), A23, W3)
_op("layer_norm_2dims", lambda t, a: F(t).layer_norm(a, (2, 3), eps=1e-3), [A23, B23])
_op("layer_norm_3d_affine", lambda t, a, w, b: F(t).layer_norm(a, (3,), w, b), [A23, B23], W3, V3)
_op("layer_norm_input_only", lambda t, a, w, b: F(t).layer_norm(a, (3,), w, b), A23, W3, V3,
    grad=(True, False, False))
_op("layer_norm_weight_no_input", lambda t, a, w, b: F(t).layer_norm(a, (3,), w, b), A23, W3, V3,
    grad=(False, True, True))
_op("embedding", lambda t, e: F(t).embedding(t.tensor([[0, 2], [1, 2]]), e), E43)
_op("embedding_1d_idx", lambda t, e: F(t).embedding(t.tensor([3, 3, 0]), e), E43)
_op("embedding_padding", lambda t, e: F(t).embedding(t.tensor([[0, 2], [1, 2]]), e, padding_idx=2), E43)
_op("embedding_padding_neg", lambda t, e: F(t).embedding(t.tensor([0, 3, 1]), e, padding_idx=-1), E43)
_op("nll_loss", lambda t, a: F(t).nll_loss(a, t.tensor([0, 2])), A23)
_op("nll_loss_sum", lambda t, a: F(t).nll_loss(a, t.tensor([1, 2]), reduction="sum"), A23)
_op("nll_loss_none", lambda t, a: F(t).nll_loss(a, t.tensor([1, 0]), reduction="none"), A23)
_op("nll_loss_1d", lambda t, a: F(t).nll_loss(a, t.tensor(1)), V3)
_op("nll_loss_ignore", lambda t, a: F(t).nll_loss(a, t.tensor([1, -100])), A23)
_op("nll_loss_ignore_index", lambda t, a: F(t).nll_loss(a, t.tensor([1, 0]), ignore_index=0), A23)
_op("nll_loss_ignore_none", lambda t, a: F(t).nll_loss(a, t.tensor([1, 0]), ignore_index=0, reduction="none"),
    A23)
_op("cross_entropy", lambda t, a: F(t).cross_entropy(a, t.tensor([0, 2])), A23)
_op("cross_entropy_sum", lambda t, a: F(t).cross_entropy(a, t.tensor([2, 2]), reduction="sum"), A23)
_op("cross_entropy_none", lambda t, a: F(t).cross_entropy(a, t.tensor([1, 0]), reduction="none"), A23)
_op("cross_entropy_1d", lambda t, a: F(t).cross_entropy(a, t.tensor(2)), V3)
_op("cross_entropy_3x4", lambda t, a: F(t).cross_entropy(a, t.tensor([3, 0, 1])), A34)
_op("bce_logits", lambda t, a, b: F(t).binary_cross_entropy_with_logits(a, b), A23, P23)
_op("bce_logits_sum", lambda t, a, b: F(t).binary_cross_entropy_with_logits(a, b, reduction="sum"), A23, P23)
_op("bce_logits_none", lambda t, a, b: F(t).binary_cross_entropy_with_logits(a, b, reduction="none"), A23, P23)
_op("bce_logits_const_target", lambda t, a, b: F(t).binary_cross_entropy_with_logits(a, b), A23, P23,
    grad=(True, False))
_op("bce_logits_target_only", lambda t, a, b: F(t).binary_cross_entropy_with_logits(a, b), A23, P23,
    grad=(False, True))
# class weights, label smoothing and pos_weight, with every reduction (the weights are constants: torch refuses
# weights that require grad).
CW3 = [0.2, 1.0, 3.0]
PW3 = [2.0, 0.5, 1.5]
for _red in ("mean", "sum", "none"):
    _op(f"nll_loss_weight_{_red}", lambda t, a, _r=_red: F(t).nll_loss(a, t.tensor([0, 2]), weight=t.tensor(
        CW3, dtype=t.float64), reduction=_r), A23)
    _op(f"nll_loss_weight_ignore_{_red}", lambda t, a, _r=_red: F(t).nll_loss(a, t.tensor([1, 2]), weight=t.tensor(
        CW3, dtype=t.float64), ignore_index=2, reduction=_r), A23)
    _op(f"nll_loss_weight_1d_{_red}", lambda t, a, _r=_red: F(t).nll_loss(a, t.tensor(2), weight=t.tensor(
        CW3, dtype=t.float64), reduction=_r), V3)
    _op(f"cross_entropy_weight_{_red}", lambda t, a, _r=_red: F(t).cross_entropy(
        a, t.tensor([3, 0, 1]), weight=t.tensor([0.5, 1.0, 2.0, 4.0], dtype=t.float64), reduction=_r), A34)
    _op(f"cross_entropy_smoothing_{_red}", lambda t, a, _r=_red: F(t).cross_entropy(
        a, t.tensor([0, 2]), label_smoothing=0.1, reduction=_r), A23)
    _op(f"cross_entropy_smoothing_weight_{_red}", lambda t, a, _r=_red: F(t).cross_entropy(
        a, t.tensor([3, 0, 1]), weight=t.tensor([0.5, 1.0, 2.0, 4.0], dtype=t.float64), label_smoothing=0.25,
        reduction=_r), A34)
    _op(f"cross_entropy_smoothing_ignore_{_red}", lambda t, a, _r=_red: F(t).cross_entropy(
        a, t.tensor([3, 0, 1]), weight=t.tensor([0.5, 1.0, 2.0, 4.0], dtype=t.float64), label_smoothing=0.2,
        ignore_index=0, reduction=_r), A34)
    _op(f"cross_entropy_smoothing_1d_{_red}", lambda t, a, _r=_red: F(t).cross_entropy(
        a, t.tensor(1), label_smoothing=0.3, reduction=_r), V3)
    _op(f"bce_logits_weight_{_red}", lambda t, a, b, _r=_red: F(t).binary_cross_entropy_with_logits(
        a, b, weight=t.tensor(CW3, dtype=t.float64), reduction=_r), A23, P23)
    _op(f"bce_logits_pos_weight_{_red}", lambda t, a, b, _r=_red: F(t).binary_cross_entropy_with_logits(
        a, b, pos_weight=t.tensor(PW3, dtype=t.float64), reduction=_r), A23, P23)
    _op(f"bce_logits_both_weights_{_red}", lambda t, a, b, _r=_red: F(t).binary_cross_entropy_with_logits(
        a, b, weight=t.tensor([[2.0], [0.5]], dtype=t.float64), pos_weight=t.tensor(PW3, dtype=t.float64),
        reduction=_r), A23, P23)
_op("cross_entropy_smoothing_one", lambda t, a: F(t).cross_entropy(a, t.tensor([0, 2]), label_smoothing=1.0), A23)
_op("cross_entropy_smoothing_negative", lambda t, a: F(t).cross_entropy(a, t.tensor([0, 2]), label_smoothing=-0.1),
    A23)
_op("cross_entropy_smoothing_all_ignored", lambda t, a: F(t).cross_entropy(a, t.tensor([1, 1]), ignore_index=1,
                                                                           label_smoothing=0.1), A23)
_op("bce_logits_pos_weight_input_only", lambda t, a, b: F(t).binary_cross_entropy_with_logits(
    a, b, pos_weight=t.tensor(PW3, dtype=t.float64)), A23, P23, grad=(True, False))
_op("bce_logits_pos_weight_target_only", lambda t, a, b: F(t).binary_cross_entropy_with_logits(
    a, b, pos_weight=t.tensor(PW3, dtype=t.float64), weight=t.tensor(CW3, dtype=t.float64)), A23, P23,
    grad=(False, True))
_op("bce_logits_pos_weight_2d", lambda t, a, b: F(t).binary_cross_entropy_with_logits(
    a, b, pos_weight=t.tensor([[2.0, 1.0, 0.5], [1.0, 3.0, 1.0]], dtype=t.float64)), A23, P23)
_op("logsigmoid", lambda t, a: F(t).logsigmoid(a) * 2, A23)
_op("l1_loss", lambda t, a, b: F(t).l1_loss(a, b), A23, B23)
_op("l1_loss_sum", lambda t, a, b: F(t).l1_loss(a, b, reduction="sum"), A23, B23)
_op("l1_loss_none", lambda t, a, b: F(t).l1_loss(a, b, reduction="none"), A23, B23)
_op("l1_loss_broadcast", lambda t, a, b: F(t).l1_loss(a, b), A23, V3)


# -- dropout ------------------------------------------------------------------------------------------------
def _dropout(t, p, prob, training, data=A23):
    x = p.leaf("x", data)
    y = F(t).dropout(x, prob, training)
    p.value("same object", y is x)
    p.watch(y)
    p.counter("forward")
    two = x * 2
    p.value("each 0 or 2x", bool(((y - two) * y).abs().sum().item() == 0) if prob == 0.5 else None)
    p.run("backward", lambda: y.sum().backward())
    if prob != 0.5:
        p.value("x.grad", x.grad)


for _p in (0.0, 0.5, 1.0):
    for _train in (True, False):
        PROGRAMS[f"nn_dropout_{_p}_{_train}"] = lambda t, p, _p=_p, _train=_train: _dropout(t, p, _p, _train)
@program("nn_dropout_module")
def _dropout_module(t, p):
    drop = t.nn.Dropout(0.5)
    x = p.leaf("x", A23)
    y = drop(x)
    p.watch(y)
    p.value("train", drop.training)
    drop.eval()
    p.value("eval is identity", drop(x) is x)
    p.value("repr", repr(drop))
    p.value("repr2", repr(t.nn.Dropout(p=0.25, inplace=False)))



def _channel_dropout(t, p, fn, shape, prob=0.5, training=True):
    """dropout1d/2d/3d: warnings, the graph (an Unsqueeze/Squeeze pair for unbatched inputs), and that each (sample,
    channel) slice is all zero or all 2x (at p=0.5) when batched."""
    import warnings
    n = 1
    for s in shape:
        n *= s
    x = p.leaf("x", [[0.25 + 0.5 * (i % 7) for i in range(n)]]).view(*shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = p.run("call", lambda: getattr(F(t), fn)(x, prob, training))
    p.value("warnings", tuple(str(w.message) for w in caught))
    if y is None:
        return
    p.value("same object", y is x)
    p.watch(y)
    p.counter("forward")
    if prob == 0.5 and training and y is not x and len(shape) >= 2:
        rows = (y / x).reshape(shape[0], shape[1], -1) if len(shape) > 2 else (y / x)
        flat = rows.reshape(-1, rows.shape[-1]) if rows.dim() > 1 else rows.reshape(-1, 1)
        p.value("each channel 0 or 2x", bool(((flat == 0).all(-1) | (flat == 2).all(-1)).all().item()))
    else:
        p.value("y", y)
    p.run("backward", lambda: y.sum().backward())
    if prob != 0.5 or not training:
        p.value("x.grad", x.grad)


# dropout2d of a 2-D input drops single elements (feature_dropout's noise is the input's own shape), so "each
# channel 0 or 2x" holds there only by chance: its rows are 40 long, so that chance (2**-78) never decides a run.
for _fn, _shapes in (("dropout1d", ((2, 3, 4), (3, 4), (5,))), ("dropout2d", ((2, 3, 2, 2), (2, 3, 4), (2, 40), (5,))),
                     ("dropout3d", ((2, 3, 1, 2, 2), (3, 2, 2, 2), (2, 3, 4)))):
    for _shape in _shapes:
        _tag = "x".join(map(str, _shape))
        PROGRAMS[f"nn_{_fn}_{_tag}"] = lambda t, p, _f=_fn, _s=_shape: _channel_dropout(t, p, _f, _s)
    for _pr, _tr in ((0.0, True), (1.0, True), (0.5, False)):
        PROGRAMS[f"nn_{_fn}_{_pr}_{_tr}"] = lambda t, p, _f=_fn, _s=_shapes[0], _pr=_pr, _tr=_tr: _channel_dropout(
            t, p, _f, _s, _pr, _tr)


@program("nn_dropout_nd_modules")
def _dropout_nd_modules(t, p):
    import warnings
    x = p.leaf("x", [[0.5, 1.5, 2.5, 3.5], [1.0, 2.0, 3.0, 4.0]])
    for name in ("Dropout1d", "Dropout2d", "Dropout3d"):
        drop = getattr(t.nn, name)(0.25)
        p.value(f"{name} repr", repr(drop))
        p.value(f"{name} repr inplace", repr(getattr(t.nn, name)(p=0.5, inplace=True)))
        p.run(f"{name} bad p", lambda name=name: getattr(t.nn, name)(1.5))
        drop.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = x.view(1, 2, 4)
            out = drop(v)
            p.value(f"{name} eval", (out is v, out))
    drop = t.nn.Dropout2d(1.0)
    y = drop(x.view(1, 2, 2, 2))
    p.watch(y)
    p.value("p=1", y)
    p.run("F.dropout2d p", lambda: F(t).dropout2d(x, 1.5))
    p.run("torch.feature_dropout p", lambda: t.feature_dropout(x, 1.5, True))
    p.run("torch.feature_dropout 1-D", lambda: t.feature_dropout(x.view(8), 0.5, True))
    p.run("torch.feature_dropout 1-D p=1", lambda: p.value("zeros", t.feature_dropout(x.view(8), 1.0, True)))

# -- modules: weights copied in from written-out data ---------------------------------------------------------
W43 = [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9], [1.0, -1.1, 0.2]]
B4 = [0.05, -0.15, 0.25, 0.35]
W24 = [[0.3, -0.1, 0.2, 0.5], [-0.4, 0.6, 0.1, -0.2]]
B2 = [0.1, -0.3]


def _load(t, p, module, tag, **weights):
    """Copy written-out weights into `module` (float64) and label its parameters for watch()."""
    module.load_state_dict({k: p.const(v) for k, v in weights.items()}, strict=False)
    for name, param in module.named_parameters():
        p.labels[id(param)] = f"{tag}.{name}"
    return module


def _mlp(t, p):
    nn = t.nn
    model = nn.Sequential(nn.Linear(3, 4, dtype=t.float64), nn.ReLU(), nn.Linear(4, 2, dtype=t.float64))
    _load(t, p, model, "mlp", **{"0.weight": W43, "0.bias": B4, "2.weight": W24, "2.bias": B2})
    return model


@program("nn_module_mlp_cross_entropy")
def _mlp_ce(t, p):
    model = _mlp(t, p)
    x = p.leaf("x", A23)
    loss = t.nn.CrossEntropyLoss()(model(x), t.tensor([1, 0]))
    p.watch(loss)
    p.counter("forward")
    p.run("backward", lambda: loss.backward())
    p.value("grads", tuple(q.grad for q in model.parameters()) + (x.grad,))
    p.value("names", tuple(n for n, _ in model.named_parameters()))


@program("nn_module_chain")
def _chain(t, p):
    nn = t.nn
    model = nn.Sequential(nn.LayerNorm(3, dtype=t.float64), nn.GELU(), nn.Tanh(), nn.Identity(), nn.Sigmoid(),
                          nn.Flatten(), nn.Softmax(dim=1), nn.LogSoftmax(dim=-1), nn.GELU(approximate="tanh"))
    _load(t, p, model, "chain", **{"0.weight": W3, "0.bias": V3})
    x = p.leaf("x", [A23, B23])
    y = model(x)
    p.watch(y)
    p.counter("forward")
    grads = p.run("grad", lambda: t.autograd.grad(y.sum(), [x, model[0].weight, model[0].bias]))
    p.value("grads", grads)


for _loss, _target, _kw in (("MSELoss", B23, {}), ("L1Loss", B23, {"reduction": "sum"}),
                            ("BCEWithLogitsLoss", P23, {}), ("BCEWithLogitsLoss", P23, {"reduction": "none"}),
                            ("NLLLoss", None, {}), ("CrossEntropyLoss", None, {"reduction": "sum"}),
                            ("CrossEntropyLoss", None, {"ignore_index": 2})):
    def _loss_program(t, p, _loss=_loss, _target=_target, _kw=_kw):
        x = p.leaf("x", A23)
        target = t.tensor([2, 1]) if _target is None else p.leaf("target", _target)
        crit = getattr(t.nn, _loss)(**_kw)
        out = crit(x.log_softmax(1) if _loss == "NLLLoss" else x, target)
        p.watch(out)
        p.value("out", out)
        p.value("repr", repr(crit))
        p.run("backward", lambda: out.sum().backward())
        p.value("x.grad", x.grad)
    PROGRAMS[f"nn_module_{_loss}_{'_'.join(_kw) or 'default'}_{len(PROGRAMS)}"] = _loss_program


@program("nn_module_weighted_losses")
def _weighted_modules(t, p):
    """The loss modules with class weights, label smoothing and pos_weight: graphs, values, buffers, repr."""
    w = p.const(CW3)
    x = p.leaf("x", A23)
    target = p.leaf("target", P23)
    mods = {"CrossEntropyLoss": t.nn.CrossEntropyLoss(weight=w, label_smoothing=0.15, reduction="sum"),
            "NLLLoss": t.nn.NLLLoss(weight=w, ignore_index=0),
            "BCEWithLogitsLoss": t.nn.BCEWithLogitsLoss(weight=w, pos_weight=p.const(PW3))}
    outs = [mods["CrossEntropyLoss"](x, t.tensor([2, 1])), mods["NLLLoss"](x.log_softmax(1), t.tensor([0, 2])),
            mods["BCEWithLogitsLoss"](x, target)]
    p.watch(*outs)
    p.value("outs", tuple(outs))
    for name, m in mods.items():
        p.value(name, (repr(m), tuple(n for n, _ in m.named_buffers()), m.weight, getattr(m, "label_smoothing", None)))
    p.run("backward", lambda: (outs[0] + outs[1] + outs[2]).backward())
    p.value("grads", (x.grad, target.grad))


@program("nn_module_embedding")
def _embedding_module(t, p):
    emb = t.nn.Embedding(4, 3, padding_idx=1, dtype=t.float64)
    _load(t, p, emb, "emb", weight=E43)
    out = emb(t.tensor([[0, 1], [3, 1]]))
    p.watch(out)
    p.run("backward", lambda: (out * out).sum().backward())
    p.value("grad", emb.weight.grad)
    p.value("repr", repr(emb))
    p.value("padding row zeroed by init", t.nn.Embedding(3, 2, padding_idx=-1).weight[2].abs().sum().item())


@program("nn_module_hooks")
def _hooks(t, p):
    lin = t.nn.Linear(3, 4, dtype=t.float64)
    _load(t, p, lin, "lin", weight=W43, bias=B4)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(("fwd", tuple(args[0].shape))))
    h3 = lin.register_forward_hook(lambda m, args, out: out.tanh())
    lin.register_forward_pre_hook(lambda m, args: calls.append("first"), prepend=True)
    x = p.leaf("x", A23)
    y = lin(x)
    p.watch(y)
    p.value("y", y)
    h1.remove()
    h3.remove()
    h3.remove()
    p.value("y2", lin(x))
    h2.remove()
    lin(x)
    p.value("calls", tuple(map(str, calls)))


@program("nn_module_plumbing")
def _plumbing(t, p):
    nn = t.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
            self.register_buffer("running", t.zeros(3))
            self.register_buffer("scratch", t.ones(1), persistent=False)
            self.scale = nn.Parameter(t.ones(1))
            self.heads = nn.ModuleDict({"a": nn.Linear(3, 1), "b": nn.Identity()})
            self.shared = self.inner

        def forward(self, x):
            return self.heads["a"](self.inner(x) * self.scale)

    block = Block()
    p.value("named_modules", tuple(n for n, _ in block.named_modules()))
    p.value("named_modules dup", tuple(n for n, _ in block.named_modules(remove_duplicate=False)))
    p.value("named_parameters", tuple(n for n, _ in block.named_parameters()))
    p.value("named_buffers", tuple(n for n, _ in block.named_buffers()))
    p.value("named_children", tuple(n for n, _ in block.named_children()))
    p.value("state_dict", tuple(block.state_dict()))
    p.value("state_dict keep_vars", tuple(type(v).__name__ for v in block.state_dict(keep_vars=True).values()))
    p.value("state_dict requires_grad", tuple(v.requires_grad for v in block.state_dict().values()))
    p.value("repr", repr(block))
    p.value("train", tuple(m.training for m in block.modules()))
    block.eval()
    p.value("eval", tuple(m.training for m in block.modules()))
    block.train()
    p.value("train again", tuple(m.training for m in block.modules()))
    p.value("is leaf", tuple(q.is_leaf and q.requires_grad for q in block.parameters()))
    block.requires_grad_(False)
    p.value("requires_grad_(False)", tuple(q.requires_grad for q in block.parameters()))
    block.requires_grad_()
    block(t.ones(4, 2)).sum().backward()
    p.value("grads set", tuple(q.grad is not None for q in block.parameters()))
    block.zero_grad(set_to_none=False)
    p.value("zero_grad(False)", tuple(q.grad.abs().sum().item() for q in block.parameters()))
    block.zero_grad()
    p.value("zero_grad()", tuple(q.grad is None for q in block.parameters()))
    seen = []
    block.apply(lambda m: seen.append(type(m).__name__))
    p.value("apply order", tuple(seen))
    p.value("modules list repr", repr(nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh(), nn.ReLU(), nn.ReLU()])))
    p.value("sequential slice", repr(nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())[1:]))
    p.value("param repr", repr(nn.Parameter(t.tensor([[1.0, 2.0]]))))
    p.value("param no grad repr", repr(nn.Parameter(t.tensor([1.0]), requires_grad=False)))
    p.value("to double", repr(nn.Linear(2, 2).to(t.float64).weight.dtype))


@program("nn_module_state_dict_round_trip")
def _round_trip(t, p):
    src = _mlp(t, p)
    dst = t.nn.Sequential(t.nn.Linear(3, 4, dtype=t.float64), t.nn.ReLU(), t.nn.Linear(4, 2, dtype=t.float64))
    p.value("result", repr(dst.load_state_dict(src.state_dict())))
    p.value("equal", tuple((a == b).float().sum().item() == a.numel() for a, b in zip(
        src.parameters(), dst.parameters(), strict=True)))
    p.value("version", dst[0].weight._version > 0)
    p.value("still leaves", tuple(q.is_leaf for q in dst.parameters()))
    sd = src.state_dict()
    sd["extra"] = p.const([1.0])
    del sd["2.bias"]
    p.value("non-strict", repr(dst.load_state_dict(sd, strict=False)))
    p.run("strict", lambda: dst.load_state_dict(sd))
    sd["0.weight"] = p.const([[1.0, 2.0]])
    p.run("size mismatch", lambda: dst.load_state_dict(sd))
    p.run("not a dict", lambda: dst.load_state_dict([1, 2]))


def _no_grad(t, f):
    with t.no_grad():
        return f()


@program("nn_errors")
def _errors(t, p):
    nn, F_ = t.nn, t.nn.functional
    x = p.leaf("x", A23)
    lin = nn.Linear(4, 2, dtype=t.float64)
    cases = {
        "linear shape": lambda: lin(x),
        "ce float target": lambda: F_.cross_entropy(x, p.const([0.0, 1.0, 0.0])),
        "ce long target shape": lambda: F_.cross_entropy(x, t.tensor([0, 1, 2])),
        "ce target out of range": lambda: F_.cross_entropy(x, t.tensor([0, 3])),
        "ce negative target": lambda: F_.cross_entropy(x, t.tensor([0, -1])),
        "ce bogus": lambda: F_.cross_entropy(x, t.tensor([0, 1]), reduction="bogus"),
        "CrossEntropyLoss bogus": lambda: nn.CrossEntropyLoss(reduction="bogus")(x, t.tensor([0, 1])),
        "nll float target": lambda: F_.nll_loss(x, p.const([0.0, 1.0])),
        "nll 2d target": lambda: F_.nll_loss(x, t.tensor([[0], [1]])),
        "nll 0d input": lambda: F_.nll_loss(x.sum(), t.tensor(0)),
        "nll bogus": lambda: nn.NLLLoss(reduction="bogus")(x, t.tensor([0, 1])),
        "nll all ignored": lambda: F_.nll_loss(x, t.tensor([-100, -100])),
        "bce shape": lambda: F_.binary_cross_entropy_with_logits(x, p.const(V3)),
        "bce long target": lambda: F_.binary_cross_entropy_with_logits(x, t.tensor([[0, 1, 0], [1, 1, 0]])),
        "bce bogus": lambda: nn.BCEWithLogitsLoss(reduction="bogus")(x, p.const(P23)),
        "l1 bogus": lambda: nn.L1Loss(reduction="bogus")(x, p.const(B23)),
        "nll weight short": lambda: F_.nll_loss(x, t.tensor([0, 2]), weight=p.const([1.0, 2.0])),
        "nll weight 2d": lambda: F_.nll_loss(x, t.tensor([0, 2]), weight=p.const([[1.0, 2.0, 3.0]])),
        "nll weight float32": lambda: F_.nll_loss(x, t.tensor([0, 2]), weight=p.const(W3, dtype="float32")),
        "nll weight requires grad": lambda: F_.nll_loss(x, t.tensor([0, 2]), weight=p.leaf("w", W3)),
        "nll weight requires grad, no_grad": lambda: _no_grad(t, lambda: F_.nll_loss(
            x, t.tensor([0, 2]), weight=p.leaf("w", W3))),
        "nll weight zero total": lambda: F_.nll_loss(x, t.tensor([0, 2]), weight=p.const([0.0, 1.0, 0.0])),
        "ce weight short": lambda: F_.cross_entropy(x, t.tensor([0, 2]), weight=p.const([1.0, 2.0])),
        "ce weight short smoothing": lambda: F_.cross_entropy(x, t.tensor([0, 2]), weight=p.const([1.0, 2.0]),
                                                              label_smoothing=0.1),
        "ce weight requires grad smoothing": lambda: F_.cross_entropy(x, t.tensor([0, 2]), weight=p.leaf("w", W3),
                                                                      label_smoothing=0.1),
        "ce smoothing too big": lambda: F_.cross_entropy(x, t.tensor([0, 2]), label_smoothing=1.5),
        "CrossEntropyLoss smoothing too big": lambda: nn.CrossEntropyLoss(label_smoothing=2.0)(x, t.tensor([0, 2])),
        "bce weight shape": lambda: F_.binary_cross_entropy_with_logits(x, p.const(P23), weight=p.const([1.0, 2.0])),
        "bce pos_weight shape": lambda: F_.binary_cross_entropy_with_logits(x, p.const(P23),
                                                                            pos_weight=p.const([1.0, 2.0])),
        "bce weight wider": lambda: F_.binary_cross_entropy_with_logits(x, p.const(P23), weight=p.const([[W3], [W3]])),
        "bce pos_weight wider": lambda: F_.binary_cross_entropy_with_logits(x, p.const(P23),
                                                                            pos_weight=p.const([[W3], [W3]])),
        "bce weight requires grad": lambda: F_.binary_cross_entropy_with_logits(x, p.const(P23),
                                                                                weight=p.leaf("w", W3)),
        "bce pos_weight requires grad": lambda: F_.binary_cross_entropy_with_logits(x, p.const(P23),
                                                                                    pos_weight=p.leaf("w", W3)),
        "l1 broadcast error": lambda: F_.l1_loss(x, p.const([1.0, 2.0])),
        "mse bogus": lambda: nn.MSELoss(reduction="bogus")(x, p.const(B23)),
        "mse shape": lambda: nn.MSELoss()(x, p.const([[1.0, 2.0]])),
        "gelu approximate": lambda: F_.gelu(x, approximate="fast"),
        "gelu long": lambda: F_.gelu(t.tensor([1, 2])),
        "layer_norm shape": lambda: F_.layer_norm(x, (4,)),
        "layer_norm int shape": lambda: F_.layer_norm(x, 3),
        "layer_norm weight shape": lambda: F_.layer_norm(x, (3,), p.const([1.0, 2.0])),
        "LayerNorm module shape": lambda: nn.LayerNorm(2, dtype=t.float64)(x),
        "layer_norm long": lambda: F_.layer_norm(t.tensor([[1, 2, 3]]), (3,)),
        "embedding float idx": lambda: F_.embedding(p.const([0.0, 1.0]), x),
        "embedding out of range": lambda: F_.embedding(t.tensor([0, 2]), x),
        "embedding negative": lambda: F_.embedding(t.tensor([-1]), x),
        "embedding 1d weight": lambda: F_.embedding(t.tensor([0]), p.const(V3)),
        "embedding padding_idx": lambda: nn.Embedding(3, 2, padding_idx=3),
        "embedding padding_idx neg": lambda: F_.embedding(t.tensor([0]), x, padding_idx=-3),
        "dropout p": lambda: F_.dropout(x, 1.5),
        "Dropout p": lambda: nn.Dropout(-0.1),
        "softmax dim": lambda: nn.Softmax(dim=2)(x),
        "train mode": lambda: nn.ReLU().train("yes"),
        "forward missing": lambda: nn.Module()(x),
        "sequential index": lambda: nn.Sequential(nn.ReLU())[3],
        "modulelist index": lambda: nn.ModuleList([nn.ReLU()])[-2],
        "moduledict key": lambda: nn.ModuleDict({"a": nn.ReLU()})["b"],
        "add_module type": lambda: nn.Module().add_module("x", 3),
        "add_module dot": lambda: nn.Module().add_module("a.b", nn.ReLU()),
        "buffer type": lambda: nn.Module().register_buffer("x", 3),
        "buffer dot": lambda: nn.Module().register_buffer("a.b", None),
        "buffer empty": lambda: nn.Module().register_buffer("", None),
        "buffer exists": lambda: lin.register_buffer("weight", None),
        "param type": lambda: lin.register_parameter("x", p.const([1.0])),
        "param non-leaf": lambda: lin.register_parameter("y", nn.Parameter(p.const([1.0])) * 2),
        "assign tensor to param": lambda: setattr(lin, "weight", p.const([[1.0]])),
        "assign to buffer": lambda: setattr(nn.BCEWithLogitsLoss(), "weight", 3),
        "missing attr": lambda: lin.foo,
        "init fan": lambda: nn.init.xavier_uniform_(p.const(V3)),
        "init gain": lambda: nn.init.kaiming_uniform_(p.const(W43), nonlinearity="swish"),
        "init mode": lambda: nn.init.kaiming_uniform_(p.const(W43), mode="fan"),
        "to long": lambda: nn.Linear(2, 2).to(t.int64),
    }
    for tag, action in cases.items():
        p.run(tag, action)
        p.counter(tag)  # the seq_nrs an op took before it refused


@program("nn_init")
def _init(t, p):
    init = t.nn.init
    w = p.leaf("w", W43)
    v0 = w._version
    results = {
        "zeros_": init.zeros_(w) is w and w.abs().sum().item(),
        "ones_": init.ones_(w) is w and w.sum().item(),
        "constant_": init.constant_(w, 0.25) is w and w.sum().item(),
    }
    p.value("results", tuple(sorted(results.items())))
    p.value("still a leaf", (w.is_leaf, w.requires_grad, w.grad_fn is None))
    p.value("versions bumped", w._version - v0)
    init.uniform_(w, -0.5, 0.5)
    p.value("uniform in range", w.abs().max().item() <= 0.5)
    init.normal_(w, 3.0, 0.01)
    p.value("normal near mean", (w - 3.0).abs().max().item() < 0.1)
    init.xavier_uniform_(w)
    p.value("xavier in range", w.abs().max().item() <= (6.0 / 7) ** 0.5)
    init.kaiming_uniform_(w, a=5 ** 0.5)
    p.value("kaiming in range", w.abs().max().item() <= 1 / 3 ** 0.5)
    p.value("gains", (init.calculate_gain("relu"), init.calculate_gain("tanh"), init.calculate_gain("leaky_relu", 0.2),
                      init.calculate_gain("linear")))
    lin = t.nn.Linear(3, 4)
    p.value("linear init bounds", (lin.weight.abs().max().item() <= 1 / 3 ** 0.5,
                                   lin.bias.abs().max().item() <= 1 / 3 ** 0.5))
    ln = t.nn.LayerNorm(3)
    p.value("layernorm init", (ln.weight, ln.bias))
    p.watch(w * 2)
