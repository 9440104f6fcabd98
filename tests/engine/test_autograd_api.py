"""autograd.grad / backward argument checks and semantics, written by hand from engine-semantics §3.1, §3.2,
§3.3, §9 and the outputs recorded from real torch 2.13 in experiments/e7_api.out.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest

from agdb import engine as torch
from agdb.engine.autograd.graph import GradientEdge, get_gradient_edge
from tests.engine.helpers import ERR_BACKWARD_TWICE

CREATE_GRAPH_WARNING_PREFIX = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and its "
    "gradient which can cause a memory leak. We recomme"
)


def _xzy():
    x = torch.ones(2, requires_grad=True)
    z = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    return x, z, y


# -- argument checks (e7_api) ------------------------------------------------------------------------------------
def test_grad_unused_input_raises():
    """engine-semantics §9.3 / e7_api: an unused input without allow_unused raises the indexed RuntimeError."""
    x, z, y = _xzy()
    with pytest.raises(RuntimeError) as ei:
        torch.autograd.grad(y, [x, z], retain_graph=True)
    assert str(ei.value) == ("The differentiated Tensor at index 1 appears to not have been used in the graph. Set "
                             "allow_unused=True if this is the desired behavior.")


def test_grad_allow_unused_returns_none():
    """engine-semantics §9.3 / e7_api: allow_unused=True gives (tensor([2., 2.]), None)."""
    x, z, y = _xzy()
    gx, gz = torch.autograd.grad(y, [x, z], retain_graph=True, allow_unused=True)
    assert gx.tolist() == [2.0, 2.0]
    assert gz is None


def test_grad_materialize_grads_gives_zeros():
    """engine-semantics §9.3 / e7_api: materialize_grads=True gives zeros instead of None and implies allow_unused."""
    x, z, y = _xzy()
    gx, gz = torch.autograd.grad(y, [x, z], retain_graph=True, materialize_grads=True)
    assert gx.tolist() == [2.0, 2.0]
    assert gz.tolist() == [0.0, 0.0]


def test_materialized_zeros_do_not_require_grad():
    """e7_api: the recorded repr is `tensor([0., 0.])` (no requires_grad=True), so materialised zeros do not require grad."""
    x, z, y = _xzy()
    gx, gz = torch.autograd.grad(y, [x, z], retain_graph=True, materialize_grads=True)
    assert gz.requires_grad is False
    assert gx.requires_grad is False


def test_materialize_grads_with_allow_unused_false_raises_value_error():
    """engine-semantics §9.3 / e7_api: materialize_grads=True with allow_unused=False raises the exact ValueError."""
    x, z, y = _xzy()
    with pytest.raises(ValueError) as ei:
        torch.autograd.grad(y, [x, z], retain_graph=True, materialize_grads=True, allow_unused=False)
    assert str(ei.value) == ("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                             "allow_unused=False.")


def test_grad_empty_inputs_raises():
    """engine-semantics §9.3 / e7_api: grad(y, []) raises "`inputs` argument to `grad()` cannot be empty."."""
    x, z, y = _xzy()
    with pytest.raises(RuntimeError) as ei:
        torch.autograd.grad(y, [], retain_graph=True)
    assert str(ei.value) == "`inputs` argument to `grad()` cannot be empty."


def test_backward_empty_inputs_raises():
    """engine-semantics §9.3 / e7_api: backward(inputs=[]) raises "`inputs` argument to `backward()` cannot be empty."."""
    x, z, y = _xzy()
    with pytest.raises(RuntimeError) as ei:
        y.backward(inputs=[], retain_graph=True)
    assert str(ei.value) == "`inputs` argument to `backward()` cannot be empty."


def test_grad_input_not_requiring_grad_raises():
    """engine-semantics §9.3 / e7_api: grad() w.r.t. a tensor not requiring grad raises 'One of the differentiated Tensors does not require grad'."""
    x, z, y = _xzy()
    with pytest.raises(RuntimeError) as ei:
        torch.autograd.grad(y, [torch.ones(2)], retain_graph=True)
    assert str(ei.value) == "One of the differentiated Tensors does not require grad"


def test_backward_on_tensor_not_requiring_grad_raises():
    """engine-semantics §3.2 / e7_api: backward on a tensor without grad_fn raises 'element 0 of tensors does not require grad...'."""
    with pytest.raises(RuntimeError) as ei:
        torch.ones(2).sum().backward()
    assert str(ei.value) == "element 0 of tensors does not require grad and does not have a grad_fn"


def test_backward_non_scalar_without_grad_raises():
    """engine-semantics §9.3 / e7_api: a non-scalar output without grad raises 'grad can be implicitly created only for scalar outputs'."""
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        (x * 2).backward()
    assert str(ei.value) == "grad can be implicitly created only for scalar outputs"
    assert x.grad is None


def test_backward_grad_shape_mismatch_raises():
    """engine-semantics §9.3 / e7_api: a [3] grad for a [2] output raises the exact 'Mismatch in shape' text."""
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as ei:
        (x * 2).backward(torch.ones(3))
    assert str(ei.value) == ("Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] has a "
                             "shape of torch.Size([2]).")


def test_backward_inputs_non_requires_grad_leaf_raises():
    """engine-semantics §3.3 / e7_api: backward(inputs=[leaf without requires_grad]) raises "can't retain_grad on Tensor that has requires_grad=False"."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError) as ei:
        y.backward(inputs=[torch.ones(2)], retain_graph=True)
    assert str(ei.value) == "can't retain_grad on Tensor that has requires_grad=False"
    assert x.grad is None


def test_backward_inputs_non_requires_grad_non_leaf_raises():
    """engine-semantics §3.3 / e7_api: the same message for a computed tensor that does not require grad."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError) as ei:
        y.backward(inputs=[torch.ones(2) * 3], retain_graph=True)
    assert str(ei.value) == "can't retain_grad on Tensor that has requires_grad=False"


def test_backward_inputs_unreachable_leaf_is_silent_noop():
    """engine-semantics §9.3 / e7_api: backward(inputs=[z]) with z unreachable returns None and leaves z.grad and x.grad None."""
    x, z, y = _xzy()
    assert y.backward(inputs=[z], retain_graph=True) is None
    assert z.grad is None
    assert x.grad is None


def test_backward_inputs_only_fills_given_leaves():
    """engine-semantics §9.2: backward(inputs=[a]) fills a.grad only."""
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    (a * b * 3).sum().backward(inputs=[a])
    assert a.grad.tolist() == [3.0, 3.0]
    assert b.grad is None


def test_backward_inputs_non_leaf_gets_grad():
    """engine-semantics §3.3 / §15 D2: backward(inputs=[k]) for a non-leaf k calls retain_grad, so k.grad is set and x.grad is not."""
    x = torch.ones(2, requires_grad=True)
    h = x.exp()
    k = h * 3
    y = (k * 2).sum()
    y.backward(inputs=[k])
    assert k.retains_grad is True
    assert k.grad.tolist() == [2.0, 2.0]
    assert x.grad is None


def test_backward_returns_none_and_grad_returns_tuple():
    """engine-semantics §9.2: backward returns None; grad returns a tuple."""
    x = torch.ones(2, requires_grad=True)
    assert (x * 2).sum().backward() is None
    r = torch.autograd.grad((x * 2).sum(), x)
    assert isinstance(r, tuple) and len(r) == 1 and r[0].tolist() == [2.0, 2.0]


# -- create_graph / retain_graph (engine-semantics §9.4) --------------------------------------------------------
def test_create_graph_grad_has_grad_fn_add_backward():
    """engine-semantics §9.4 / e7_api: grad((x*x).sum(), x, create_graph=True) requires grad with grad_fn AddBackward0."""
    x = torch.ones(2, requires_grad=True)
    g, = torch.autograd.grad((x * x).sum(), x, create_graph=True)
    assert g.requires_grad is True
    assert g.grad_fn.name() == "AddBackward0"
    assert g.tolist() == [2.0, 2.0]


def test_double_backward_gives_two():
    """engine-semantics §9.4 / e7_api: grad(g.sum(), x) after the create_graph grad is 2."""
    x = torch.ones(2, requires_grad=True)
    g, = torch.autograd.grad((x * x).sum(), x, create_graph=True)
    g2, = torch.autograd.grad(g.sum(), x)
    assert g2.tolist() == [2.0, 2.0]


def test_grad_without_create_graph_does_not_require_grad():
    """engine-semantics §9.4 / e7_api: without create_graph the returned grad does not require grad."""
    x = torch.ones(2, requires_grad=True)
    g, = torch.autograd.grad((x * x).sum(), x)
    assert g.requires_grad is False
    assert g.grad_fn is None


def test_retain_graph_defaults_to_create_graph():
    """engine-semantics §5.4 / §9.4 / e7_api: after grad(..., create_graph=True) a second grad on the same graph works (2)."""
    x = torch.ones(2, requires_grad=True)
    y4 = (x * x).sum()
    torch.autograd.grad(y4, x, create_graph=True)
    g, = torch.autograd.grad(y4, x)
    assert g.tolist() == [2.0, 2.0]


def test_retain_graph_defaults_false_without_create_graph():
    """engine-semantics §5.4: without create_graph, retain_graph defaults False, so a second grad raises the backward-twice error."""
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    torch.autograd.grad(y, x)
    with pytest.raises(RuntimeError) as ei:
        torch.autograd.grad(y, x)
    assert str(ei.value) == ERR_BACKWARD_TWICE


def test_backward_create_graph_warns_once_in_fresh_process():
    """engine-semantics §3.1 step 2 / e7_api: backward(create_graph=True) warns 'Using backward() with create_graph=True ...' once."""
    code = textwrap.dedent("""
        import warnings
        from agdb import engine as torch
        x = torch.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            (x * x).sum().backward(create_graph=True)
            first = [str(r.message) for r in w]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            (x * x).sum().backward(create_graph=True)
            second = [str(r.message) for r in w]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.autograd.grad((x * x).sum(), x, create_graph=True)
            third = [str(r.message) for r in w]
        print(repr((first, second, third)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, second, third = eval(out.strip().splitlines()[-1])  # noqa: S307 - our own repr output
    assert len([m for m in first if m.startswith(CREATE_GRAPH_WARNING_PREFIX)]) == 1
    assert not [m for m in second if m.startswith("Using backward() with create_graph=True")]
    assert not [m for m in third if m.startswith("Using backward() with create_graph=True")]


def test_grad_create_graph_does_not_warn_in_fresh_process():
    """engine-semantics §3.1 step 2: the reference-cycle warning is only for backward (accumulate_grad), not autograd.grad."""
    code = textwrap.dedent("""
        import warnings
        from agdb import engine as torch
        x = torch.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            torch.autograd.grad((x * x).sum(), x, create_graph=True)
        print(repr([str(r.message) for r in w]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    msgs = eval(out.strip().splitlines()[-1])  # noqa: S307 - our own repr output
    assert not [m for m in msgs if m.startswith("Using backward() with create_graph=True")]


# -- GradientEdge (engine-semantics §9.5) ---------------------------------------------------------------------
def test_get_gradient_edge_of_non_leaf():
    """engine-semantics §14.3 / e7_api: get_gradient_edge(h) for h = a*3 is (MulBackward0, 0)."""
    a = torch.ones(2, requires_grad=True)
    h = a * 3
    ge = get_gradient_edge(h)
    assert isinstance(ge, GradientEdge)
    assert ge.node is h.grad_fn
    assert ge.node.name() == "MulBackward0"
    assert ge.output_nr == 0


def test_get_gradient_edge_of_leaf_is_accumulate_grad():
    """engine-semantics §3.2: the gradient edge of a requires-grad leaf is (AccumulateGrad, 0)."""
    a = torch.ones(2, requires_grad=True)
    ge = get_gradient_edge(a)
    assert ge.node.name() == "torch::autograd::AccumulateGrad"
    assert ge.node.variable is a
    assert ge.output_nr == 0


def test_grad_wrt_gradient_edge():
    """engine-semantics §9.5 / e7_api: grad((h*h).sum(), get_gradient_edge(h)) with h = a*3 gives (tensor([6., 6.]),)."""
    a = torch.ones(2, requires_grad=True)
    h = a * 3
    out = (h * h).sum()
    ge = get_gradient_edge(h)
    r = torch.autograd.grad(out, ge)
    assert isinstance(r, tuple) and len(r) == 1
    assert r[0].tolist() == [6.0, 6.0]
    assert a.grad is None


def test_gradient_edge_as_output():
    """engine-semantics §3.2 / §9.5: a GradientEdge is accepted as an output of grad()."""
    x = torch.ones(2, requires_grad=True)
    s = (x * 3).sum()
    g, = torch.autograd.grad(get_gradient_edge(s), [x], grad_outputs=[torch.tensor(1.)])
    assert g.tolist() == [3.0, 3.0]


# -- dtypes --------------------------------------------------------------------------------------------------------
def test_grad_dtype_follows_input_float64():
    """engine-semantics §5.2: the grad of a float64 leaf is float64."""
    x = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad.dtype == torch.float64
    assert x.grad.tolist() == [3.0, 3.0]


def test_root_grad_cast_to_output_dtype():
    """engine-semantics §3.1 step 1 / §5.2: a float64 root grad for a float32 output is cast, so the float32 leaf's grad is float32."""
    x = torch.ones(2, requires_grad=True)
    assert x.dtype == torch.float32
    (x * 2).backward(torch.ones(2, dtype=torch.float64))
    assert x.grad.dtype == torch.float32
    assert x.grad.tolist() == [2.0, 2.0]


def test_grad_through_int_tensor_product_is_float():
    """engine-semantics §5.2: x (float32) * k (int64): x's grad is float32 and equals k."""
    x = torch.tensor([1., 2.], requires_grad=True)
    k = torch.tensor([3, 4])
    assert k.dtype == torch.int64
    (x * k).sum().backward()
    assert x.grad.dtype == torch.float32
    assert x.grad.tolist() == [3.0, 4.0]


def test_autograd_grad_dtype_float32():
    """engine-semantics §5.2: autograd.grad of a float32 leaf returns a float32 grad."""
    x = torch.ones(2, requires_grad=True)
    g, = torch.autograd.grad((x * x).sum(), x)
    assert g.dtype == torch.float32


# -- grad mode ------------------------------------------------------------------------------------------------------
def test_grad_enabled_by_default():
    """Grad mode is on by default."""
    assert torch.is_grad_enabled() is True


def test_no_grad_disables_recording_and_counter():
    """engine-semantics §1.5: under no_grad an op records no node and does not bump the sequence counter."""
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert torch.is_grad_enabled() is False
        s = torch.autograd._get_sequence_nr()
        y = x * 2
        assert torch.autograd._get_sequence_nr() == s
    assert torch.is_grad_enabled() is True
    assert y.requires_grad is False
    assert y.grad_fn is None


def test_enable_grad_inside_no_grad():
    """enable_grad() inside no_grad() turns recording back on for its block."""
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        with torch.enable_grad():
            assert torch.is_grad_enabled() is True
            y = x * 2
        assert torch.is_grad_enabled() is False
    assert y.requires_grad is True
    assert y.grad_fn.name() == "MulBackward0"


def test_set_grad_enabled_as_context():
    """set_grad_enabled(False) as a context disables grad mode and restores it on exit."""
    x = torch.ones(2, requires_grad=True)
    with torch.set_grad_enabled(False):
        assert torch.is_grad_enabled() is False
        y = x * 2
    assert torch.is_grad_enabled() is True
    assert y.grad_fn is None
    with torch.no_grad():
        with torch.set_grad_enabled(True):
            z = x * 2
        assert torch.is_grad_enabled() is False
    assert z.grad_fn is not None


def test_set_grad_enabled_as_function():
    """set_grad_enabled(False) called as a function takes effect at once and stays until changed."""
    try:
        torch.set_grad_enabled(False)
        assert torch.is_grad_enabled() is False
        y = torch.ones(2, requires_grad=True) * 2
        assert y.grad_fn is None
    finally:
        torch.set_grad_enabled(True)
    assert torch.is_grad_enabled() is True


def test_no_grad_as_decorator():
    """no_grad works as a decorator and restores grad mode afterwards."""
    @torch.no_grad()
    def f(t):
        assert torch.is_grad_enabled() is False
        return t * 2

    y = f(torch.ones(2, requires_grad=True))
    assert y.grad_fn is None
    assert torch.is_grad_enabled() is True


def test_backward_works_under_no_grad():
    """engine-semantics §12.3: backward of a graph built earlier works inside no_grad (the task's grad mode is create_graph)."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 3).sum()
    with torch.no_grad():
        y.backward()
        assert torch.is_grad_enabled() is False
    assert x.grad.tolist() == [3.0, 3.0]


def test_backward_retain_graph_defaults_to_create_graph():
    """engine-semantics §5.4 / §9.4: after backward(create_graph=True) a second backward on the same graph works."""
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y.backward(create_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_unused_never_used_leaf_input_bumps_counter_once():
    """engine-semantics §1.4 / §3.3: grad(y, [unused_leaf], allow_unused=True) bumps the counter by 1 (Identity) if that leaf never fed an op."""
    x = torch.ones(2, requires_grad=True)
    z = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    s = torch.autograd._get_sequence_nr()
    gx, gz = torch.autograd.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gz is None
    assert torch.autograd._get_sequence_nr() == s + 1


def test_unused_leaf_with_accumulate_grad_bumps_nothing():
    """engine-semantics §1.4: an unused input leaf that already owns an AccumulateGrad bumps the counter by 0."""
    x = torch.ones(2, requires_grad=True)
    z = torch.ones(2, requires_grad=True)
    other = z * 3  # gives z an AccumulateGrad (kept alive through `other`)
    y = (x * 2).sum()
    s = torch.autograd._get_sequence_nr()
    gx, gz = torch.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None
    assert other.grad_fn is not None
    assert torch.autograd._get_sequence_nr() == s


def test_two_roots_backward_bumps_counter_once():
    """engine-semantics §1.4 / §3.1 step 7: backward([y1, y2]) makes a GraphRoot (+1); a single-root backward bumps nothing."""
    x = torch.ones(2, requires_grad=True)
    y1 = (x * 2).sum()
    y2 = x.exp().sum()
    s = torch.autograd._get_sequence_nr()
    torch.autograd.backward([y1, y2])
    assert torch.autograd._get_sequence_nr() == s + 1
    y3 = (x * 3).sum()
    s = torch.autograd._get_sequence_nr()
    y3.backward()
    assert torch.autograd._get_sequence_nr() == s
    assert x.grad.tolist() == pytest.approx([2 + 2.718281828 + 3] * 2, rel=1e-6)


def test_set_grad_enabled_as_decorator_restores_mode():
    """torch grad_mode.py (set_grad_enabled.__call__ restores prev): decorating does not change grad mode; the call runs with it off."""
    try:
        @torch.set_grad_enabled(False)
        def f():
            return torch.is_grad_enabled()

        after_decoration = torch.is_grad_enabled()
        inside = f()
        after_call = torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)
    assert after_decoration is True
    assert inside is False
    assert after_call is True
