"""AccumulateGrad, retain_grad, InputBuffer summation and freed saved tensors, written by hand from
engine-semantics §5.1, §5.4, §8 and the outputs recorded from real torch 2.13 in experiments/e3_hooks.out,
e7_api.out, e9_acc.out, e10_quirks.out and e12_misc.out.
"""
from __future__ import annotations

import warnings

import pytest

from agdb import engine as torch
from tests.engine.helpers import ERR_BACKWARD_TWICE, PassFirst


# -- accumulation into .grad -------------------------------------------------------------------------------------
def test_backward_twice_accumulates():
    """engine-semantics §9.2 / e7_api: two backward(retain_graph=True) of (x*2).sum() leave x.grad = 4."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.backward(retain_graph=True)
    assert x.grad.tolist() == [2.0, 2.0]
    y.backward(retain_graph=True)
    assert x.grad.tolist() == [4.0, 4.0]


def test_zero_dim_leaf_adopts_an_array_grad_of_version_0():
    """A 0-dim leaf's grad from tanh (numpy computes 0-dim operands into a scalar) is adopted at version 0 and views
    as any tensor, as in torch 2.13 (`x.grad._version == 0`, `x.grad.view(1)` works; fuzzer seed 7070022105)."""
    import torch as real

    for lib in (torch, real):
        x = lib.tensor(-1.0, dtype=lib.float64, requires_grad=True)
        x.tanh().backward()
        assert x.grad._version == 0
        assert x.grad.view(1).tolist() == [pytest.approx(0.41997434161402614)]


def test_user_supplied_grad_is_not_stored_as_is():
    """engine-semantics §8.2 / e9_acc: x.backward(g) on a leaf does not store the user's g object as x.grad."""
    x = torch.ones(3, requires_grad=True)
    g = torch.full((3,), 2.0)
    x.backward(g)
    assert x.grad is not g
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_second_accumulation_is_in_place():
    """engine-semantics §8.2 / e9_acc: a later accumulation without grad mode keeps the same .grad object (2 + 3 = 5)."""
    x = torch.ones(3, requires_grad=True)
    x.backward(torch.full((3,), 2.0))
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first
    assert x.grad.tolist() == [5.0, 5.0, 5.0]


def test_create_graph_accumulation_is_out_of_place_e9():
    """engine-semantics §8.2 / e9_acc: with create_graph, .grad + grad makes a new tensor; here it needs no grad (grad_fn None)."""
    x = torch.ones(3, requires_grad=True)
    x.backward(torch.full((3,), 2.0))
    first = x.grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (x * 3).sum().backward(create_graph=True)
    assert x.grad is not first
    assert x.grad.tolist() == [5.0, 5.0, 5.0]
    assert x.grad.requires_grad is False
    assert x.grad.grad_fn is None


def test_create_graph_accumulation_gives_grad_with_grad_fn():
    """engine-semantics §8.2: with create_graph and a grad that requires grad, .grad = .grad + grad has grad_fn AddBackward0."""
    x = torch.ones(2, requires_grad=True)
    x.grad = torch.zeros(2)
    before = x.grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (x * x).sum().backward(create_graph=True)
    assert x.grad is not before
    assert x.grad.tolist() == [2.0, 2.0]
    assert x.grad.requires_grad is True
    assert x.grad.grad_fn is not None
    assert x.grad.grad_fn.name() == "AddBackward0"
    gg, = torch.autograd.grad(x.grad.sum(), x)
    assert gg.tolist() == [2.0, 2.0]


def test_existing_grad_plus_new_grad():
    """e9_acc: a preset .grad of zeros plus 2 gives 2."""
    c = torch.ones(2, requires_grad=True)
    c.grad = torch.zeros(2)
    (c * 2).sum().backward()
    assert c.grad.tolist() == [2.0, 2.0]


def test_internally_produced_grad_is_contiguous():
    """e9_acc: w.grad from (w*5).sum() is [5, 5, 5] and contiguous."""
    w = torch.ones(3, requires_grad=True)
    (w * 5).sum().backward()
    assert w.grad.tolist() == [5.0, 5.0, 5.0]
    assert w.grad.is_contiguous()


def test_none_grad_still_runs_accumulate_grad_hooks():
    """engine-semantics §5.3 / e12_misc: a None grad into a leaf still runs its tensor hook (None), Acc prehook ((None,)) and post-acc hook."""
    log = []
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    b.register_post_accumulate_grad_hook(lambda p: log.append(("post-acc", p.grad)))
    b.register_hook(lambda g: log.append(("tensor hook", g)))
    out = PassFirst.apply(a, b)
    out.grad_fn.next_functions[1][0].register_prehook(lambda go: log.append(("acc prehook", go)))
    out.sum().backward()
    assert log == [("tensor hook", None), ("acc prehook", (None,)), ("post-acc", None)]
    assert b.grad is None
    assert a.grad.tolist() == [1.0, 1.0]


# -- retain_grad ------------------------------------------------------------------------------------------------------
def test_retain_grad_accumulates_with_new_object_each_call():
    """engine-semantics §7.4 / e9_acc: h.grad is 3 then 6 across two backward calls, a new tensor object each time."""
    a = torch.ones(2, requires_grad=True)
    h = a * 2
    h.retain_grad()
    s = (h * 3).sum()
    s.backward(retain_graph=True)
    first = h.grad
    assert first.tolist() == [3.0, 3.0]
    s.backward(retain_graph=True)
    assert h.grad is not first
    assert h.grad.tolist() == [6.0, 6.0]
    assert first.tolist() == [3.0, 3.0]


def test_retain_grad_sets_retains_grad_on_non_leaf():
    """engine-semantics §7.4: retain_grad() on a non-leaf makes retains_grad True."""
    a = torch.ones(2, requires_grad=True)
    h = a * 2
    assert h.retains_grad is False
    h.retain_grad()
    assert h.retains_grad is True


def test_retain_grad_on_leaf_is_noop():
    """engine-semantics §7.4 / e7_api: retain_grad() on a leaf leaves retains_grad False; the leaf still gets .grad normally."""
    a = torch.ones(2, requires_grad=True)
    assert a.retains_grad is False
    a.retain_grad()
    assert a.retains_grad is False
    (a * 3).sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]


def test_non_leaf_without_retain_grad_has_no_grad():
    """engine-semantics §7.1: without retain_grad a non-leaf's .grad stays None after backward."""
    a = torch.ones(2, requires_grad=True)
    h = a * 2
    (h * 3).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert h.grad is None


# -- InputBuffer (engine-semantics §5.1) ------------------------------------------------------------------------------
def test_input_buffer_sums_before_node_runs():
    """engine-semantics §5.1 / e9_acc: MulBackward0 receives 3+4=7 in a single call."""
    calls = []
    b = torch.ones(2, requires_grad=True)
    m = b * 2
    m.grad_fn.register_prehook(lambda go: calls.append([t.tolist() for t in go]))
    (m * 3 + m * 4).sum().backward()
    assert calls == [[[7.0, 7.0]]]
    assert b.grad.tolist() == [14.0, 14.0]


def test_x_times_x_runs_accumulate_grad_once_with_sum():
    """engine-semantics §5.1 / e12_misc: x*x has two edges to one AccumulateGrad, which runs once with 6 for x=3."""
    calls = []
    x = torch.tensor([3.], requires_grad=True)
    y = x * x
    acc = y.grad_fn.next_functions[0][0]
    assert acc is y.grad_fn.next_functions[1][0]
    acc.register_prehook(lambda go: calls.append([t.tolist() for t in go]))
    y.backward()
    assert calls == [[[6.0]]]
    assert x.grad.tolist() == [6.0]


# -- freed saved tensors (engine-semantics §5.4) -----------------------------------------------------------------------
def test_second_backward_through_freed_saved_tensors_raises():
    """engine-semantics §5.4 / e3_hooks: a second backward of (x*x).sum() raises the exact backward-twice RuntimeError."""
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as ei:
        y.backward()
    assert str(ei.value) == ERR_BACKWARD_TWICE
    assert x.grad.tolist() == [2.0, 4.0]


def test_saved_self_access_after_free_raises():
    """engine-semantics §5.4 / e3_hooks: reading grad_fn._saved_self after the node ran raises the same message."""
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x * x).sum()
    mul = y.grad_fn.next_functions[0][0]
    assert mul.name() == "MulBackward0"
    assert mul._saved_self.tolist() == [1.0, 2.0]
    y.backward()
    with pytest.raises(RuntimeError) as ei:
        mul._saved_self
    assert str(ei.value) == ERR_BACKWARD_TWICE


def test_retain_graph_keeps_saved_tensors():
    """engine-semantics §5.4: with retain_graph=True the saved tensors survive and a second backward works (accumulating)."""
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_nodes_saving_nothing_can_rerun():
    """engine-semantics §5.4 / e3_hooks: (x+1).sum() can be backpropagated twice without retain_graph; x.grad = 2."""
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x + 1).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_pruned_nodes_keep_saved_tensors():
    """engine-semantics §5.4 / e12_misc: un-executed nodes keep saved tensors; the executed MulBackward0 does not."""
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    c = torch.ones(2, requires_grad=True)
    y = (a * b).sum() + c.exp().sum()
    y.backward(inputs=[a])
    y.backward(inputs=[c])
    assert c.grad.tolist() == pytest.approx([2.718281828, 2.718281828], rel=1e-6)
    assert a.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError) as ei:
        y.backward(inputs=[b])
    assert str(ei.value).startswith("Trying to backward through the graph a second time (or dir")
    assert str(ei.value) == ERR_BACKWARD_TWICE


# -- autograd.grad and AccumulateGrad (engine-semantics §8.3) -----------------------------------------------------------
def test_autograd_grad_never_touches_dot_grad():
    """engine-semantics §9.2 / e7_api: grad() returns 2 and leaves x.grad None."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    g, = torch.autograd.grad(y, x)
    assert g.tolist() == [2.0, 2.0]
    assert x.grad is None


def test_autograd_grad_leaves_existing_grad_unchanged():
    """engine-semantics §8.3: grad() does not add into an existing .grad."""
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    before = x.grad
    torch.autograd.grad((x * 5).sum(), x)
    assert x.grad is before
    assert x.grad.tolist() == [2.0, 2.0]


def test_autograd_grad_runs_leaf_tensor_hook():
    """engine-semantics §8.3 / e10_quirks (4): grad w.r.t. a leaf with hook g*7 returns 14."""
    x = torch.ones(2, requires_grad=True)
    x.register_hook(lambda g: g * 7)
    r = torch.autograd.grad((x * 2).sum(), x)
    assert isinstance(r, tuple) and len(r) == 1
    assert r[0].tolist() == [14.0, 14.0]
    assert x.grad is None


def test_autograd_grad_skips_post_accumulate_hook():
    """engine-semantics §8.3 / e10_quirks (4b): grad() does not run the post-accumulate-grad hook; x.grad stays None."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: ran.append(1))
    torch.autograd.grad((x * 2).sum(), x)
    assert ran == []
    assert x.grad is None


def test_autograd_grad_skips_accumulate_grad_prehook():
    """engine-semantics §8.3 / e10_quirks (5): grad() does not execute AccumulateGrad, so its Node prehook never runs."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    acc.register_prehook(lambda go: ran.append(1))
    g, = torch.autograd.grad(y, x)
    assert ran == []
    assert g.tolist() == [2.0, 2.0]


def test_retain_grad_populated_by_autograd_grad_capture():
    """engine-semantics §4.5 / e10_quirks (2): grad(y, [h]) with h.retain_grad() sets h.grad = 3."""
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    h.retain_grad()
    y = (h * 3).sum()
    torch.autograd.grad(y, [h])
    assert h.grad.tolist() == [3.0, 3.0]


def test_retain_grad_below_captured_node_not_populated():
    """e10_quirks (2b): grad(y, [k]) with h below k leaves h.grad None (h's node never gets a task)."""
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    h.retain_grad()
    k = h * 5
    y = (k * 3).sum()
    torch.autograd.grad(y, [k])
    assert h.grad is None


def test_leaf_no_longer_requiring_grad_is_not_accumulated_but_post_hook_runs():
    """engine-semantics §8.2: if the leaf no longer requires grad, .grad is unchanged, yet the post-accumulate-grad hook still runs."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: ran.append(p.grad))
    y = (x * 2).sum()
    x.requires_grad_(False)
    y.backward()
    assert x.grad is None
    assert ran == [None]
