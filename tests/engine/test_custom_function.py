"""Custom autograd.Function, written by hand from engine-semantics §1.4, §5.2, §5.3, §10 and the outputs
recorded from real torch 2.13 in experiments/e4_custom.out and e12_misc.out.
"""
from __future__ import annotations

import warnings

import pytest

from agdb import engine as torch
from agdb.engine._state import UINT64_MAX
from agdb.engine.autograd.function import BackwardCFunction
from agdb.engine.autograd.graph import Node
from tests.engine.helpers import ERR_BACKWARD_TWICE, OD


class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, None


# -- node name and type (engine-semantics §10.1) ----------------------------------------------------------------
def test_node_name_is_class_plus_backward():
    """engine-semantics §10.1 / e4_custom: grad_fn.name() and type name are 'FBackward' (no numeric suffix)."""
    a = torch.ones(2, requires_grad=True)
    out = F.apply(a, torch.ones(2))
    assert out.grad_fn.name() == "FBackward"
    assert type(out.grad_fn).__name__ == "FBackward"


def test_node_type_derives_from_backward_cfunction():
    """engine-semantics §10.1 / §14.1 / e4_custom: the node type's MRO is (FBackward, BackwardCFunction, ...) and it is a graph Node."""
    a = torch.ones(2, requires_grad=True)
    out = F.apply(a, torch.ones(2))
    mro = type(out.grad_fn).__mro__
    assert mro[0] is type(out.grad_fn)
    assert mro[1] is BackwardCFunction
    assert isinstance(out.grad_fn, Node)


def test_node_type_lives_in_autograd_function_module():
    """engine-semantics §10.1 / e4_custom: the type is torch.autograd.function.FBackward, i.e. engine.autograd.function.FBackward here."""
    a = torch.ones(2, requires_grad=True)
    out = F.apply(a, torch.ones(2))
    cls = type(out.grad_fn)
    assert f"{cls.__module__}.{cls.__qualname__}" == "agdb.engine.autograd.function.FBackward"


def test_custom_node_supports_node_hooks_and_seq():
    """engine-semantics §10.8: a custom node has register_prehook/register_hook/_sequence_nr like generated nodes."""
    seen = []
    a = torch.ones(2, requires_grad=True)
    out = F.apply(a, torch.ones(2))
    assert isinstance(out.grad_fn._sequence_nr(), int)
    out.grad_fn.register_prehook(lambda go: seen.append(("pre", [t.tolist() for t in go])))
    out.grad_fn.register_hook(lambda gi, go: seen.append(("post", [None if t is None else t.tolist() for t in gi])))
    out.sum().backward()
    assert seen == [("pre", [[1.0, 1.0]]), ("post", [[1.0, 1.0], None])]


# -- None grads downstream (engine-semantics §5.3, e4_custom block 1) --------------------------------------------------
def test_none_grad_still_schedules_downstream_node():
    """engine-semantics §5.3 / e4_custom: returning None for e=x.exp() still runs ExpBackward0 with (None,) in pre- and post-hook; x.grad None."""
    log = []
    a = torch.ones(2, requires_grad=True)
    x = torch.ones(2, requires_grad=True)
    e = x.exp()
    out = F.apply(a, e)
    e.grad_fn.register_prehook(lambda go: log.append(("pre", go)))
    e.grad_fn.register_hook(lambda gi, go: log.append(("post", gi)))
    out.sum().backward()
    assert log == [("pre", (None,)), ("post", (None,))]
    assert x.grad is None
    assert a.grad.tolist() == [1.0, 1.0]


# -- G: needs_input_grad, non-tensor args, mark_non_differentiable, materialisation --------------------------------------
class G(torch.autograd.Function):
    log: list = []

    @staticmethod
    def forward(ctx, a, k, b):
        ctx.save_for_backward(a, b)
        ctx.k = k
        G.log.append(("forward", torch.is_grad_enabled(), ctx.needs_input_grad))
        idx = torch.argmax(a)
        ctx.mark_non_differentiable(idx)
        return a * k, b * k, idx

    @staticmethod
    def backward(ctx, g1, g2, gidx):
        a, b = ctx.saved_tensors
        G.log.append(("backward", g1, g2, gidx, ctx.needs_input_grad, torch.is_grad_enabled(), a, b))
        return g1 * ctx.k, None, g2 * ctx.k


def _run_g():
    G.log = []
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2)
    o1, o2, idx = G.apply(a, 3.0, b)
    return a, b, o1, o2, idx


def test_forward_runs_with_grad_mode_off():
    """engine-semantics §10.2 step 5 / e4_custom: torch.is_grad_enabled() is False inside forward."""
    _run_g()
    assert G.log[0][0] == "forward"
    assert G.log[0][1] is False


def test_needs_input_grad_with_non_tensor_arg():
    """engine-semantics §10.2 step 3 / e4_custom: needs_input_grad is (True, False, False) for (a requiring grad, 3.0, b)."""
    _run_g()
    assert G.log[0][2] == (True, False, False)


def test_outputs_requires_grad_and_non_differentiable():
    """engine-semantics §10.4 / e4_custom: o1, o2 require grad (sharing GBackward); the marked idx does not."""
    a, b, o1, o2, idx = _run_g()
    assert o1.requires_grad is True
    assert o2.requires_grad is True
    assert idx.requires_grad is False
    assert o2.grad_fn is o1.grad_fn
    assert o2.grad_fn.name() == "GBackward"
    assert idx.grad_fn is None


def test_several_outputs_have_output_nr_in_order():
    """engine-semantics §10.2 step 6: outputs are wrapped with output_nr 0 and 1 on the same node."""
    a, b, o1, o2, idx = _run_g()
    assert o1.output_nr == 0
    assert o2.output_nr == 1


def test_unused_grads_materialised_as_zeros():
    """engine-semantics §10.4-§10.5 / e4_custom: g1 = [1, 1]; unused o2 arrives as zeros [0, 0]; the non-differentiable idx as tensor(0)."""
    a, b, o1, o2, idx = _run_g()
    o1.sum().backward()
    rec = [r for r in G.log if r[0] == "backward"]
    assert len(rec) == 1
    _, g1, g2, gidx, nig, enabled, sa, sb = rec[0]
    assert g1.tolist() == [1.0, 1.0]
    assert g2.tolist() == [0.0, 0.0]
    assert gidx is not None
    assert tuple(gidx.shape) == ()
    assert gidx.item() == 0
    assert gidx.dtype == torch.int64


def test_needs_input_grad_and_grad_mode_inside_backward():
    """engine-semantics §10.5 / e4_custom: inside backward needs_input_grad is (True, False, False) and grad mode is off."""
    a, b, o1, o2, idx = _run_g()
    o1.sum().backward()
    rec = [r for r in G.log if r[0] == "backward"][0]
    assert rec[4] == (True, False, False)
    assert rec[5] is False


def test_saved_tensors_in_backward():
    """engine-semantics §10.3: ctx.saved_tensors returns the tensors given to save_for_backward."""
    a, b, o1, o2, idx = _run_g()
    o1.sum().backward()
    rec = [r for r in G.log if r[0] == "backward"][0]
    assert rec[6].tolist() == [1.0, 1.0]
    assert rec[7].tolist() == [1.0, 1.0]


def test_non_tensor_argument_used_in_backward():
    """engine-semantics §10.6 / e4_custom: a.grad = 3 using ctx.k = 3.0 (the non-tensor forward argument)."""
    a, b, o1, o2, idx = _run_g()
    o1.sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]


def test_set_materialize_grads_false_gives_none():
    """engine-semantics §10.5 / e4_custom: with set_materialize_grads(False) the unused output's grad arrives as None."""
    seen = []

    class H(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1, g2))
            return g1 * 2 if g1 is not None else None

    a = torch.ones(2, requires_grad=True)
    o1, o2 = H.apply(a)
    o1.sum().backward()
    assert len(seen) == 1
    assert seen[0][0].tolist() == [1.0, 1.0]
    assert seen[0][1] is None
    assert a.grad.tolist() == [2.0, 2.0]


def test_grad_mode_in_backward_equals_create_graph():
    """engine-semantics §10.5: backward runs with grad mode = create_graph (True under create_graph=True, False otherwise)."""
    modes = []

    class M(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            modes.append(torch.is_grad_enabled())
            return g * 2

    a = torch.ones(2, requires_grad=True)
    torch.autograd.grad(M.apply(a).sum(), a)
    torch.autograd.grad(M.apply(a).sum(), a, create_graph=True)
    assert modes == [False, True]


def test_needs_input_grad_ignores_grad_mode():
    """engine-semantics §10.2 / e12_misc: under no_grad needs_input_grad is still (True, False)."""
    seen = []

    class N(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            seen.append(ctx.needs_input_grad)
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g

    with torch.no_grad():
        out = N.apply(torch.ones(2, requires_grad=True), torch.ones(2))
    assert seen == [(True, False)]
    assert out.requires_grad is False
    assert out.grad_fn is None


# -- saved tensors --------------------------------------------------------------------------------------------------------
class S(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * 2

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * 2


def test_saved_tensors_after_backward_raises():
    """engine-semantics §10.3 / e4_custom: grad_fn.saved_tensors after a backward without retain_graph raises the backward-twice error."""
    a = torch.ones(2, requires_grad=True)
    o = S.apply(a)
    o.sum().backward()
    with pytest.raises(RuntimeError) as ei:
        o.grad_fn.saved_tensors
    assert str(ei.value) == ERR_BACKWARD_TWICE


def test_saved_tensors_survive_retain_graph():
    """engine-semantics §10.3 / e4_custom: with retain_graph=True grad_fn.saved_tensors still has 1 tensor."""
    a = torch.ones(2, requires_grad=True)
    o = S.apply(a)
    o.sum().backward(retain_graph=True)
    assert len(o.grad_fn.saved_tensors) == 1
    assert a.grad.tolist() == [2.0, 2.0]


def test_second_backward_through_custom_node_raises():
    """engine-semantics §5.4 / §10.3: a second backward through a custom node whose saved tensors were freed raises the same text."""
    a = torch.ones(2, requires_grad=True)
    y = S.apply(a).sum()
    y.backward()
    with pytest.raises(RuntimeError) as ei:
        y.backward()
    assert str(ei.value) == ERR_BACKWARD_TWICE


class SI(torch.autograd.Function):
    """Saves the int 3 with save_for_backward (not a tensor)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(3)
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g


def test_save_for_backward_int_raises_type_error():
    """engine-semantics §10.2 / e12_misc: save_for_backward(3) raises TypeError with the exact text."""
    with pytest.raises(TypeError) as ei:
        SI.apply(torch.ones(2, requires_grad=True))
    assert str(ei.value) == "save_for_backward can only save variables, but argument 0 is of type int"


def test_save_for_backward_type_check_only_when_executable():
    """engine-semantics §10.2 step 6: the save_for_backward type check runs only when the node is executable (not under no_grad)."""
    with torch.no_grad():
        out = SI.apply(torch.ones(2, requires_grad=True))
    assert out.tolist() == [2.0, 2.0]


# -- returned-gradient checks (engine-semantics §10.6, e4_custom) -----------------------------------------------------------
def test_too_few_grads_raises():
    """engine-semantics §10.6 / e4_custom: one grad for two inputs raises 'function WBackward returned an incorrect number of gradients (expected 2, got 1)'."""
    class W(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        W.apply(a, b).sum().backward()
    assert str(ei.value) == "function WBackward returned an incorrect number of gradients (expected 2, got 1)"


def test_extra_trailing_none_grads_accepted():
    """engine-semantics §10.6 / e4_custom: (g, None, None) for one input is accepted."""
    class W2(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    a = torch.ones(2, requires_grad=True)
    W2.apply(a).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]


def test_extra_non_none_grads_raise():
    """engine-semantics §10.6 / e4_custom: (g, g) for one input raises 'function W3Backward returned an incorrect number of gradients (expected 1, got 2)'."""
    class W3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    a = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        W3.apply(a).sum().backward()
    assert str(ei.value) == "function W3Backward returned an incorrect number of gradients (expected 1, got 2)"


def test_grad_for_non_tensor_input_raises():
    """engine-semantics §10.6 / e4_custom: a non-None grad for the float argument raises the 1-based 'position 2' message."""
    class W4(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            return a * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    a = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        W4.apply(a, 2.0).sum().backward()
    assert str(ei.value) == ("function W4Backward returned a gradient different than None at position 2, but the "
                             "corresponding forward input was not a Variable")


def test_grad_with_wrong_shape_raises():
    """engine-semantics §5.2 / e4_custom: a [3] grad for a [2] input raises 'Function W5Backward returned an invalid gradient at index 0 - ...'."""
    class W5(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ones(3)

    a = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        W5.apply(a).sum().backward()
    assert str(ei.value) == ("Function W5Backward returned an invalid gradient at index 0 - got [3] but expected "
                             "shape compatible with [2]")


def test_expandable_grad_is_reduced():
    """engine-semantics §5.2 / e4_custom (W6): g.expand(1, 2) for a [2] input is reduced with sum_to; a2.grad = [1, 1]."""
    class W6(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.sum() * 2

        @staticmethod
        def backward(ctx, g):
            return g.expand(1, 2)

    a2 = torch.ones(2, requires_grad=True)
    W6.apply(a2).backward()
    assert a2.grad.tolist() == [1.0, 1.0]
    assert tuple(a2.grad.shape) == (2,)


def test_non_tensor_grad_raises():
    """engine-semantics §10.6 / e4_custom (W7): returning 5 raises RuntimeError 'expected Variable or None (got int)'."""
    class W7(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return 5

    a = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        W7.apply(a).sum().backward()
    assert str(ei.value) == "expected Variable or None (got int)"


# -- sequence numbers (engine-semantics §1.4, §10.2 step 4) ------------------------------------------------------------------
def test_custom_node_seq_taken_before_forward():
    """engine-semantics §10.2 step 4 / e4_custom: node seq == counter before apply; counter is +1 already inside forward and after."""
    seen = []
    gs = torch.autograd._get_sequence_nr

    class Inner(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            seen.append(gs())
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = torch.ones(2, requires_grad=True)
    s = gs()
    o = Inner.apply(a)
    assert o.grad_fn._sequence_nr() == s
    assert seen == [s + 1]
    assert gs() == s + 1


def test_apply_bumps_counter_under_no_grad_and_without_requires_grad():
    """engine-semantics §1.4: every Function.apply bumps the counter by 1, even under no_grad or with no input requiring grad."""
    gs = torch.autograd._get_sequence_nr
    s = gs()
    F.apply(torch.ones(2), torch.ones(2))
    assert gs() == s + 1
    with torch.no_grad():
        F.apply(torch.ones(2, requires_grad=True), torch.ones(2))
    assert gs() == s + 2


def test_no_input_requires_grad_gives_plain_output():
    """engine-semantics §10.2 step 6: when nothing requires grad the output does not require grad and has no grad_fn."""
    out = F.apply(torch.ones(2), torch.ones(2))
    assert out.requires_grad is False
    assert out.grad_fn is None
    assert out.tolist() == [2.0, 2.0]


# -- new-style Function (engine-semantics §10.2 step 5) ------------------------------------------------------------------------
def test_new_style_forward_with_setup_context():
    """engine-semantics §10.2 step 5: new style calls forward(*args) then setup_context(ctx, inputs, output); backward uses what it saved."""
    calls = []

    class NS(torch.autograd.Function):
        @staticmethod
        def forward(a, k):
            calls.append(("forward", torch.is_grad_enabled()))
            return a * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            a, k = inputs
            calls.append(("setup_context", len(inputs), k, output.tolist()))
            ctx.save_for_backward(a)
            ctx.k = k

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * ctx.k * a, None

    a = torch.tensor([1., 2.], requires_grad=True)
    out = NS.apply(a, 3.0)
    assert out.grad_fn.name() == "NSBackward"
    assert calls == [("forward", False), ("setup_context", 2, 3.0, [3.0, 6.0])]
    out.sum().backward()
    assert a.grad.tolist() == [3.0, 6.0]


def test_new_style_setup_context_sees_needs_input_grad():
    """engine-semantics §10.2: needs_input_grad is available on ctx in setup_context."""
    seen = []

    class NS2(torch.autograd.Function):
        @staticmethod
        def forward(a, b):
            return a + b

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(ctx.needs_input_grad)

        @staticmethod
        def backward(ctx, g):
            return g, g

    NS2.apply(torch.ones(2), torch.ones(2, requires_grad=True))
    assert seen == [(False, True)]


def test_old_style_forward_receives_ctx_first():
    """engine-semantics §10.2 step 5: old style forward(ctx, *args) gets the node (ctx) as first argument."""
    got = []

    class OS(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            got.append(ctx)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    out = OS.apply(torch.ones(2, requires_grad=True))
    assert got[0] is out.grad_fn


# -- once_differentiable (engine-semantics §10.9, e12_misc) -----------------------------------------------------------------------
def test_once_differentiable_error_node():
    """engine-semantics §10.9 / e12_misc: the grad's grad_fn is torch::autograd::Error with seq 2**64-1; the counter moved by 2."""
    gs = torch.autograd._get_sequence_nr
    x = torch.ones(2, requires_grad=True)
    v = torch.ones(2, requires_grad=True)
    s = gs()
    g, = torch.autograd.grad(OD.apply(x), x, grad_outputs=v, create_graph=True)
    assert g.grad_fn.name() == "torch::autograd::Error"
    assert g.grad_fn._sequence_nr() == UINT64_MAX
    assert gs() - s == 2
    assert g.tolist() == [2.0, 2.0]


def test_once_differentiable_double_backward_raises():
    """engine-semantics §10.9 / e12_misc: differentiating through it raises 'trying to differentiate twice a function that was marked with @once_differentiable'."""
    x = torch.ones(2, requires_grad=True)
    v = torch.ones(2, requires_grad=True)
    g, = torch.autograd.grad(OD.apply(x), x, grad_outputs=v, create_graph=True)
    with pytest.raises(RuntimeError) as ei:
        g.sum().backward()
    assert str(ei.value) == "trying to differentiate twice a function that was marked with @once_differentiable"


def test_once_differentiable_plain_grad_outputs():
    """engine-semantics §10.9: when the grad_outputs do not require grad, the returned grad simply has no grad_fn."""
    x = torch.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g, = torch.autograd.grad(OD.apply(x).sum(), x, create_graph=True)
    assert g.grad_fn is None
    assert g.tolist() == [2.0, 2.0]


def test_new_style_default_args_are_bound():
    """engine-semantics §10.2 step 1: with setup_context, default forward args are bound, so inputs has them (k = 2.0)."""
    seen = []

    class ND(torch.autograd.Function):
        @staticmethod
        def forward(a, k=2.0):
            return a * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(inputs[1:])
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    a = torch.ones(2, requires_grad=True)
    ND.apply(a).sum().backward()
    assert seen == [(2.0,)]
    assert a.grad.tolist() == [2.0, 2.0]


def test_custom_grad_dtype_cast_to_input_dtype():
    """engine-semantics §5.2: a float64 grad returned for a float32 input is cast to float32."""
    class D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ones(2, dtype=torch.float64)

    a = torch.ones(2, requires_grad=True)
    D.apply(a).sum().backward()
    assert a.grad.dtype == torch.float32
    assert a.grad.tolist() == [1.0, 1.0]
