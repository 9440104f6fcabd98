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
