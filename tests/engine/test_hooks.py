"""Hook order, values and error texts, written by hand from engine-semantics §7.1, §4.5, §7.2, §7.3, §14
and the outputs recorded from real torch 2.13 in experiments/e3_hooks.out, e7_api.out, e10_quirks.out and
e12_misc.out. The expected values below are the recorded ones, not what the engine prints.
"""
from __future__ import annotations

import pytest

from agdb import engine as torch
from agdb.engine._state import UINT64_MAX
from tests.engine.helpers import PassFirst


def _lst(t):
    return None if t is None else t.tolist()


# -- e3_hooks: non-leaf ------------------------------------------------------------------------------------
def _nonleaf_setup():
    """The first block of e3_hooks.py, verbatim apart from the module name."""
    log = []
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    y = (h * 3).sum()
    h.retain_grad()  # registered BEFORE the tensor hooks on purpose
    h.register_hook(lambda g: (log.append(f"tensor_hook1 g={g.tolist()}"), g * 10)[1])
    h.register_hook(lambda g: (log.append(f"tensor_hook2 g={g.tolist()}"), None)[1])
    h.grad_fn.register_prehook(
        lambda go: (log.append(f"node_prehook1 go={[t.tolist() for t in go]}"), None)[1])
    h.grad_fn.register_prehook(
        lambda go: (log.append(f"node_prehook2 go={[t.tolist() for t in go]}"), (go[0] + 1,))[1])
    h.grad_fn.register_hook(
        lambda gi, go: (log.append(f"node_posthook gi={[_lst(t) for t in gi]} go={[t.tolist() for t in go]}"),
                        None)[1])
    return log, x, h, y


def test_nonleaf_hook_order_matches_e3():
    """e3_hooks: tensor hooks, then Node prehooks in registration order, then the posthook, with the recorded values."""
    log, x, h, y = _nonleaf_setup()
    y.backward()
    assert log == [
        "tensor_hook1 g=[3.0, 3.0]",
        "tensor_hook2 g=[30.0, 30.0]",
        "node_prehook1 go=[[30.0, 30.0]]",
        "node_prehook2 go=[[30.0, 30.0]]",
        "node_posthook gi=[[62.0, 62.0], None] go=[[31.0, 31.0]]",
    ]


def test_retain_grad_runs_after_all_tensor_hooks():
    """engine-semantics §7.1 step 3b: retain_grad registered first still sees the grad after every tensor hook (h.grad = 30, not 3)."""
    _, _, h, y = _nonleaf_setup()
    y.backward()
    assert h.grad.tolist() == [30.0, 30.0]


def test_prehook_changing_grad_feeds_the_node():
    """engine-semantics §7.1: a Node prehook returning (go[0]+1,) makes the node compute with 31, so x.grad = 62."""
    _, x, _, y = _nonleaf_setup()
    y.backward()
    assert x.grad.tolist() == [62.0, 62.0]


def test_tensor_hook_value_seen_by_second_tensor_hook():
    """engine-semantics §7.2: tensor hooks chain: the second tensor hook sees the first one's x10 result."""
    seen = []
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: g * 10)
    h.register_hook(lambda g: seen.append(g.tolist()))
    (h * 3).sum().backward()
    assert seen == [[30.0, 30.0]]
    assert x.grad.tolist() == [60.0, 60.0]


def test_posthook_receives_grad_inputs_and_grad_outputs():
    """engine-semantics §14.3: posthook gets (grad_inputs = node outputs incl. None for the scalar slot, grad_outputs = node inputs)."""
    got = []
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    h.grad_fn.register_hook(lambda gi, go: got.append((gi, go)))
    (h * 3).sum().backward()
    assert len(got) == 1
    gi, go = got[0]
    assert isinstance(gi, tuple) and isinstance(go, tuple)
    assert len(gi) == 2 and gi[1] is None
    assert gi[0].tolist() == [6.0, 6.0]
    assert [t.tolist() for t in go] == [[3.0, 3.0]]


def test_posthook_returning_tuple_replaces_outputs():
    """engine-semantics §7.2: a posthook returning a tuple replaces the node's outputs that are routed further."""
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    h.grad_fn.register_hook(lambda gi, go: (gi[0] + 100, None))
    (h * 3).sum().backward()
    assert x.grad.tolist() == [106.0, 106.0]


# -- e3_hooks: leaf --------------------------------------------------------------------------------------------
def test_leaf_hook_order_matches_e3():
    """engine-semantics §7.3 / e3_hooks: tensor hook -> AccumulateGrad prehook -> post-accumulate-grad hook -> AccumulateGrad posthook gi=()."""
    log = []
    w = torch.tensor([1., 2.], requires_grad=True)
    z = (w * 3).sum()
    acc = z.grad_fn.next_functions[0][0].next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    w.register_hook(lambda g: (log.append(f"leaf tensor_hook g={g.tolist()}"), g + 100)[1])
    acc.register_prehook(lambda go: (log.append(f"acc prehook go={[t.tolist() for t in go]}"), None)[1])
    w.register_post_accumulate_grad_hook(lambda p: log.append(f"post_acc_grad_hook p.grad={p.grad.tolist()}"))
    acc.register_hook(lambda gi, go: (log.append(f"acc posthook gi={gi} go={[t.tolist() for t in go]}"), None)[1])
    z.backward()
    assert log == [
        "leaf tensor_hook g=[3.0, 3.0]",
        "acc prehook go=[[103.0, 103.0]]",
        "post_acc_grad_hook p.grad=[103.0, 103.0]",
        "acc posthook gi=() go=[[103.0, 103.0]]",
    ]
    assert w.grad.tolist() == [103.0, 103.0]


def test_post_accumulate_grad_hook_receives_the_leaf_itself():
    """engine-semantics §8.2: the post-accumulate-grad hook is called with the leaf tensor object as its argument."""
    got = []
    w = torch.tensor([1., 2.], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda p: got.append(p))
    (w * 3).sum().backward()
    assert len(got) == 1 and got[0] is w


def test_leaf_hook_registered_after_accumulate_grad_exists_runs():
    """engine-semantics §7.2 / e12_misc: a leaf hook registered after its AccumulateGrad exists still runs (sees [2, 2])."""
    seen = []
    a = torch.ones(2, requires_grad=True)
    y = a * 2  # creates a's AccumulateGrad
    assert y.grad_fn.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    a.register_hook(lambda g: seen.append(g.tolist()))
    y.sum().backward()
    assert seen == [[2.0, 2.0]]


# -- capture path (engine-semantics §4.5) -----------------------------------------------------------------
def test_grad_on_middle_tensor_runs_tensor_hook_but_not_prehook():
    """engine-semantics §4.5 / e3_hooks: grad(y, [k]) runs k's tensor hook (captured 30) but not k.grad_fn's prehook."""
    log = []
    x = torch.tensor([1., 2.], requires_grad=True)
    k = x * 2
    y = (k * 3).sum()
    k.register_hook(lambda g: (log.append(f"k tensor_hook g={g.tolist()}"), g * 10)[1])
    k.grad_fn.register_prehook(lambda go: (log.append("k.grad_fn prehook (should not run)"), None)[1])
    r, = torch.autograd.grad(y, [k])
    assert log == ["k tensor_hook g=[3.0, 3.0]"]
    assert r.tolist() == [30.0, 30.0]


def test_captured_only_grad_includes_tensor_hook():
    """engine-semantics §4.5 / e10_quirks (3b): grad(y, [k]) alone returns the hooked value 300."""
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    k = h * 5
    y = (k * 3).sum()
    k.register_hook(lambda g: g * 100)
    gk, = torch.autograd.grad(y, [k])
    assert gk.tolist() == [300.0, 300.0]


def test_captured_and_needed_node_captures_raw_value():
    """engine-semantics §4.5 quirk / e10_quirks (3): grad(y, [k, h]) captures k's raw 3 but the hook still flows down (h: 1500)."""
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    k = h * 5
    y = (k * 3).sum()
    k.register_hook(lambda g: g * 100)
    gk, gh = torch.autograd.grad(y, [k, h])
    assert gk.tolist() == [3.0, 3.0]
    assert gh.tolist() == [1500.0, 1500.0]


def test_pruned_leaf_hook_does_not_run():
    """engine-semantics §4.5 / e10_quirks (1): backward(inputs=[a]) never runs b's tensor hook; b.grad stays None."""
    ran = []
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    b.register_hook(lambda g: ran.append("b hook"))
    y = (a * 2 + b.exp()).sum()
    y.backward(inputs=[a])
    assert ran == []
    assert a.grad.tolist() == [2.0, 2.0]
    assert b.grad is None


# -- hook mechanics (engine-semantics §7.2) -------------------------------------------------------------------
def test_prehooks_run_in_registration_order():
    """engine-semantics §7.2: several Node prehooks of one node run in registration order."""
    order = []
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    for i in range(4):
        y.grad_fn.register_prehook(lambda go, i=i: order.append(i))
    y.backward()
    assert order == [0, 1, 2, 3]


def test_posthooks_run_in_registration_order():
    """engine-semantics §7.2: several Node posthooks of one node run in registration order."""
    order = []
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    for i in range(3):
        y.grad_fn.register_hook(lambda gi, go, i=i: order.append(i))
    y.backward()
    assert order == [0, 1, 2]


def test_hooks_returning_their_argument_are_noops():
    """engine-semantics §7.2: tensor hook returning g, prehook returning go, posthook returning gi change nothing."""
    x = torch.tensor([1., 2.], requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: g)
    h.grad_fn.register_prehook(lambda go: go)
    h.grad_fn.register_hook(lambda gi, go: gi)
    x.register_hook(lambda g: g)
    (h * 3).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_post_acc_hook_returning_its_argument_is_accepted():
    """e3_hooks.out (no error line printed for `lambda p: p`): returning the leaf itself is not an error."""
    x = torch.tensor([1., 2.], requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: p)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


# -- removable handles ---------------------------------------------------------------------------------------
def test_tensor_hook_handle_remove_stops_hook():
    """engine-semantics §14.3: handle.remove() on a tensor hook stops it from running."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    handle = h.register_hook(lambda g: (ran.append(1), g * 10)[1])
    handle.remove()
    (h * 3).sum().backward()
    assert ran == []
    assert x.grad.tolist() == [6.0, 6.0]


def test_leaf_hook_handle_remove_stops_hook():
    """engine-semantics §14.3: handle.remove() on a leaf tensor hook stops it from running."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    handle = x.register_hook(lambda g: (ran.append(1), g * 10)[1])
    handle.remove()
    (x * 3).sum().backward()
    assert ran == []
    assert x.grad.tolist() == [3.0, 3.0]


def test_node_prehook_and_posthook_handle_remove():
    """engine-semantics §14.3: register_prehook/register_hook return RemovableHandles whose remove() stops the hook."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    hp = y.grad_fn.register_prehook(lambda go: ran.append("pre"))
    hq = y.grad_fn.register_hook(lambda gi, go: ran.append("post"))
    hp.remove()
    hq.remove()
    y.backward()
    assert ran == []


def test_removing_one_hook_keeps_the_others():
    """engine-semantics §14.3: removing one of several prehooks leaves the remaining ones in order."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.register_prehook(lambda go: ran.append("a"))
    hb = y.grad_fn.register_prehook(lambda go: ran.append("b"))
    y.grad_fn.register_prehook(lambda go: ran.append("c"))
    hb.remove()
    y.backward()
    assert ran == ["a", "c"]


def test_post_acc_hook_handle_remove_stops_hook():
    """engine-semantics §8.2: handle.remove() on a post-accumulate-grad hook stops it from running."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    handle = x.register_post_accumulate_grad_hook(lambda p: ran.append(1))
    handle.remove()
    (x * 2).sum().backward()
    assert ran == []
    assert x.grad.tolist() == [2.0, 2.0]


def test_handle_remove_between_backwards():
    """engine-semantics §14.3: a hook that ran in the first backward does not run after remove() in the second."""
    ran = []
    x = torch.ones(2, requires_grad=True)
    y = (x + 1).sum()
    handle = y.grad_fn.register_prehook(lambda go: ran.append(1))
    y.backward()
    handle.remove()
    y.backward()
    assert ran == [1]


# -- errors --------------------------------------------------------------------------------------------------
def test_prehook_returning_non_tuple_raises_type_error():
    """engine-semantics §7.2 / e12_misc: a prehook returning 3 raises TypeError "expected tuple, but hook returned 'int'"."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.register_prehook(lambda go: 3)
    with pytest.raises(TypeError) as ei:
        y.backward()
    assert str(ei.value) == "expected tuple, but hook returned 'int'"


def test_prehook_wrong_arity_raises():
    """engine-semantics §7.2 / e3_hooks: a prehook returning 2 values for 1 raises the exact 'incorrect number of values' text."""
    x = torch.tensor([1., 2.], requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    with pytest.raises(RuntimeError) as ei:
        y.backward()
    assert str(ei.value) == ("hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)")
    assert x.grad is None


def test_tensor_hook_changing_shape_raises():
    """engine-semantics §7.2 / e3_hooks: a tensor hook returning ones(3) for a [2] grad raises 'has changed the size of value'."""
    x = torch.tensor([1., 2.], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: torch.ones(3))
    with pytest.raises(RuntimeError) as ei:
        y.sum().backward()
    assert str(ei.value) == "hook '<lambda>' has changed the size of value"


def test_leaf_tensor_hook_changing_shape_raises():
    """engine-semantics §7.2: the size check applies to a leaf's hook too (run as AccumulateGrad's tensor pre-hook)."""
    x = torch.tensor([1., 2.], requires_grad=True)
    x.register_hook(lambda g: torch.ones(3))
    with pytest.raises(RuntimeError) as ei:
        (x * 2).sum().backward()
    assert str(ei.value) == "hook '<lambda>' has changed the size of value"
    assert x.grad is None


def test_named_hook_error_quotes_function_name():
    """engine-semantics §7.2: the quoted hook name is the function's name (here 'my_hook', not '<lambda>')."""
    def my_hook(go):
        return (go[0], go[0])

    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.register_prehook(my_hook)
    with pytest.raises(RuntimeError) as ei:
        y.backward()
    assert str(ei.value) == "hook 'my_hook' has returned an incorrect number of values (got 2, but expected 1)"


def test_post_acc_hook_returning_value_raises():
    """engine-semantics §8.2 / e12_misc: a post-accumulate-grad hook returning p*1 raises 'Tensor post accumulate grad hooks should return None.'"""
    x = torch.ones(2, requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda p: p * 1)
    with pytest.raises(RuntimeError) as ei:
        (x * 2).sum().backward()
    assert str(ei.value) == "Tensor post accumulate grad hooks should return None."


def test_register_hook_on_tensor_not_requiring_grad_raises():
    """engine-semantics §14.3 / e7_api: register_hook on a tensor without requires_grad raises the exact RuntimeError."""
    with pytest.raises(RuntimeError) as ei:
        torch.ones(2).register_hook(lambda g: g)
    assert str(ei.value) == "cannot register a hook on a tensor that doesn't require gradient"


def test_replacing_none_grad_in_prehook_raises():
    """engine-semantics §7.2: a prehook replacing a None grad with a tensor raises "can't replace a None gradient with a non-None value"."""
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    out = PassFirst.apply(a, b)
    acc_b = out.grad_fn.next_functions[1][0]
    acc_b.register_prehook(lambda go: (torch.ones(2),))
    with pytest.raises(RuntimeError) as ei:
        out.sum().backward()
    assert str(ei.value) == "can't replace a None gradient with a non-None value"


# -- Node API (engine-semantics §14) ------------------------------------------------------------------------------
def test_accumulate_grad_node_api():
    """engine-semantics §8.1 / §14.3: AccumulateGrad name, seq 2**64-1, no next functions, .variable is the leaf, empty metadata."""
    x = torch.ones(2, requires_grad=True)
    y = x * x
    acc0, acc1 = y.grad_fn.next_functions[0][0], y.grad_fn.next_functions[1][0]
    assert acc0 is acc1
    assert acc0.name() == "torch::autograd::AccumulateGrad"
    assert acc0._sequence_nr() == UINT64_MAX
    assert acc0.next_functions == ()
    assert acc0.variable is x
    assert acc0.metadata == {}


def test_generated_node_metadata_is_persistent_dict():
    """engine-semantics §14.3: `metadata` is {} by default and persists between accesses."""
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    assert y.grad_fn.metadata == {}
    y.grad_fn.metadata["k"] = 1
    assert y.grad_fn.metadata == {"k": 1}


def test_next_functions_has_none_for_scalar_slot():
    """engine-semantics §14.3: x*2 gives MulBackward0 with next_functions ((AccumulateGrad, 0), (None, 0))."""
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    nf = y.grad_fn.next_functions
    assert y.grad_fn.name() == "MulBackward0"
    assert len(nf) == 2
    assert nf[0][0].name() == "torch::autograd::AccumulateGrad" and nf[0][1] == 0
    assert nf[1] == (None, 0)


def test_prehook_returning_list_raises_type_error():
    """engine-semantics §7.2: a prehook returning a list (not a tuple) raises TypeError "expected tuple, but hook returned 'list'"."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.grad_fn.register_prehook(lambda go: [go[0]])
    with pytest.raises(TypeError) as ei:
        y.backward()
    assert str(ei.value) == "expected tuple, but hook returned 'list'"


def test_post_acc_hook_on_non_leaf_rejected():
    """engine-semantics §8.2 / §14.3: register_post_accumulate_grad_hook is for leaves only; a non-leaf raises RuntimeError."""
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    with pytest.raises(RuntimeError):
        h.register_post_accumulate_grad_hook(lambda p: None)


def test_tensor_hook_replaces_only_its_own_output_slot():
    """engine-semantics §7.2: a hook on output 1 of a two-output node replaces only slot 1 (g2 x10), slot 0 is unchanged."""
    seen = []

    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1.tolist(), g2.tolist()))
            return g1 * 2 + g2 * 3

    a = torch.ones(2, requires_grad=True)
    o1, o2 = Two.apply(a)
    o2.register_hook(lambda g: g * 10)
    (o1 + o2).sum().backward()
    assert seen == [([1.0, 1.0], [10.0, 10.0])]
    assert a.grad.tolist() == [32.0, 32.0]


def test_retain_grad_on_second_output_slot():
    """engine-semantics §7.4: retain_grad on output 1 of a two-output node stores that slot's grad (after its tensor hook)."""
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    a = torch.ones(2, requires_grad=True)
    o1, o2 = Two.apply(a)
    o2.retain_grad()
    o2.register_hook(lambda g: g * 10)
    (o1 * 5 + o2).sum().backward()
    assert o2.grad.tolist() == [10.0, 10.0]
    assert a.grad.tolist() == [40.0, 40.0]


def test_posthook_added_during_apply_gets_empty_grad_outputs():
    """engine-semantics §7.2: a posthook registered while the node's apply runs (no posthooks before) receives grad_outputs == ()."""
    got = []

    class P(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            ctx.register_hook(lambda gi, go: got.append((gi, go)))
            return g * 2

    a = torch.ones(2, requires_grad=True)
    P.apply(a).sum().backward()
    assert len(got) == 1
    gi, go = got[0]
    assert go == ()
    assert [t.tolist() for t in gi] == [[2.0, 2.0]]


def test_hooks_on_the_root_tensor_run():
    """engine-semantics §3.1 step 11 / §7.1: the root's tensor hook and retain_grad run on the root grad (1 -> 5), which then flows down."""
    x = torch.ones(2, requires_grad=True)
    y = (x * 2).sum()
    y.retain_grad()
    y.register_hook(lambda g: g * 5)
    y.backward()
    assert y.grad.tolist() == 5.0
    assert x.grad.tolist() == [10.0, 10.0]
