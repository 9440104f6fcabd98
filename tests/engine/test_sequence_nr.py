"""The thread-local global sequence number (engine-semantics §1), with values taken from that section and from
experiments/e1_seq.out and e12_misc.out, not from what the engine prints."""
from __future__ import annotations

import threading

import pytest

from agdb import engine
from agdb.engine._state import UINT64_MAX
from tests.engine.helpers import OD, run_in_thread

gs = engine.autograd._get_sequence_nr


class _Recorder:
    """Observer that records every node that takes a number from the counter."""

    def __init__(self) -> None:
        self.bumped: list[tuple[str, int]] = []

    def seq_nr_bumped(self, node, seq_nr):
        self.bumped.append((node.name(), seq_nr))


def test_uint64_max_is_two_to_the_64_minus_one():
    """The engine's UINT64_MAX, which the tests below compare against, is 2**64 - 1 = 18446744073709551615."""
    assert UINT64_MAX == 2**64 - 1 == 18446744073709551615


# -- engine-semantics §1.1 thread-local counter --------------------------------------------------------
def test_new_thread_counter_starts_at_zero():
    """engine-semantics §1.1: a fresh thread sees counter 0, its first node gets seq 0, and it then reads 1."""
    a = engine.randn(3, requires_grad=True)
    for _ in range(3):
        a * 2  # make sure the main thread's counter is not 0
    main_before = gs()
    assert main_before >= 3

    res: dict = {}

    def worker():
        res["start"] = gs()
        t = a * 5
        res["seq"] = t.grad_fn._sequence_nr()
        res["after"] = gs()

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert res == {"start": 0, "seq": 0, "after": 1}
    assert gs() == main_before  # the worker's node did not touch the main thread's counter


def test_nodes_record_creating_thread():
    """engine-semantics §1.2: a node records the id of the thread that created it."""
    a = engine.randn(3, requires_grad=True)
    main_node = (a * 2).grad_fn
    assert main_node.thread_id == threading.get_ident()

    def worker():
        node = (a * 3).grad_fn
        return node.thread_id, threading.get_ident()

    node_tid, worker_tid = run_in_thread(worker)
    assert node_tid == worker_tid
    assert node_tid != main_node.thread_id


# -- engine-semantics §1.2 / §1.6 a recorded op -----------------------------------------------------------
def test_recorded_op_takes_pre_increment_value():
    """engine-semantics §1.2/§1.6: after b = a*2 with counter s, b.grad_fn has seq s and the counter is s+1."""
    a = engine.randn(3, requires_grad=True)
    s0 = gs()
    b = a * 2
    assert b.grad_fn.name() == "MulBackward0"
    assert b.grad_fn._sequence_nr() == s0
    assert gs() == s0 + 1


def test_fresh_thread_op_chain_numbers():
    """engine-semantics §1.1/§1.2: in a fresh thread the first ops get seqs 0, 1, 2, 3 (as in §15 example A)."""

    def build():
        x = engine.randn(3, requires_grad=True)
        y = x.exp()
        u = y.sin()
        v = y.cos()
        w = u + v
        z = w.sum()
        return [n.grad_fn._sequence_nr() for n in (y, u, v, w, z)], gs()

    seqs, after = run_in_thread(build)
    assert seqs == [0, 1, 2, 3, 4]
    assert after == 5


# -- engine-semantics §1.3 AccumulateGrad ----------------------------------------------------------------
def test_accumulate_grad_seq_is_uint64_max():
    """engine-semantics §1.3/§8.1: AccumulateGrad has seq 2**64-1, its name, no next edges, and .variable is the leaf."""
    a = engine.randn(3, requires_grad=True)
    b = a * 2
    acc = b.grad_fn.next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert acc._sequence_nr() == UINT64_MAX
    assert acc.next_functions == ()
    assert acc.variable is a


def test_creating_accumulate_grad_does_not_bump():
    """engine-semantics §1.3/§1.5: creating a leaf's AccumulateGrad leaves the counter unchanged."""
    a = engine.randn(3, requires_grad=True)
    s = gs()
    acc = engine._tensor.grad_accumulator(a)  # creates the AccumulateGrad
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert gs() == s


def test_get_gradient_edge_of_a_leaf_bumps_once():
    """torch's get_gradient_edge reaches a leaf's AccumulateGrad through a throwaway `a.view_as(a)` made under
    enable_grad (torch/autograd/graph.py, _get_grad_fn_or_grad_acc): one seq_nr, even under no_grad; a non-leaf's
    edge is its grad_fn, no seq_nr."""
    a = engine.randn(3, requires_grad=True)
    s = gs()
    edge = engine.autograd.graph.get_gradient_edge(a)
    assert edge.node.name() == "torch::autograd::AccumulateGrad" and edge.output_nr == 0
    assert gs() == s + 1
    with engine.no_grad():
        assert engine.autograd.graph.get_gradient_edge(a).node is edge.node
    assert gs() == s + 2
    h = a * 3
    assert engine.autograd.graph.get_gradient_edge(h).node is h.grad_fn
    assert gs() == s + 3


def test_first_op_on_leaf_bumps_once_despite_creating_accumulator():
    """engine-semantics §1.3/§1.4: a*2 on a fresh leaf creates MulBackward0 and AccumulateGrad but bumps only 1."""
    a = engine.randn(3, requires_grad=True)
    s = gs()
    b = a * 2
    assert gs() - s == 1
    assert b.grad_fn.next_functions[0][0]._sequence_nr() == UINT64_MAX


# -- engine-semantics §1.5 things that do not bump ------------------------------------------------------
def test_no_bump_under_no_grad():
    """engine-semantics §1.5: an op under no_grad does not bump the counter."""
    a = engine.randn(3, requires_grad=True)
    s = gs()
    with engine.no_grad():
        c = a * 3
    assert gs() - s == 0
    assert c.grad_fn is None


def test_no_bump_for_non_requiring_inputs():
    """engine-semantics §1.5: an op whose inputs do not require grad does not bump the counter."""
    s = gs()
    d = engine.randn(3) * 4
    d2 = (d.exp() + d).sum()
    assert gs() - s == 0
    assert d2.grad_fn is None


def test_no_bump_for_leaf_creation():
    """engine-semantics §1.5: creating leaf tensors (requiring grad or not) does not bump the counter."""
    s = gs()
    engine.randn(3, requires_grad=True)
    engine.tensor([1.0, 2.0], requires_grad=True)
    engine.ones(2, requires_grad=True)
    engine.zeros(4)
    assert gs() - s == 0


def test_mixed_op_bumps_once_with_none_edge():
    """engine-semantics §1.5: an op with one non-requiring and one requiring input bumps 1 and has a None next edge."""
    a = engine.randn(3, requires_grad=True)
    keep = a * 2
    acc = keep.grad_fn.next_functions[0][0]
    s = gs()
    e = engine.randn(3) * a
    assert gs() - s == 1
    assert e.grad_fn.next_functions == ((None, 0), (acc, 0))
    assert e.grad_fn.next_functions[1][0] is acc


# -- engine-semantics §1.4 GraphRoot ------------------------------------------------------------------
def test_single_root_backward_bumps_zero():
    """engine-semantics §1.4/§3.1 step 7: a single-root backward makes no GraphRoot and bumps the counter by 0."""
    x = engine.randn(3, requires_grad=True)
    y1 = (x * 2).sum()
    s = gs()
    y1.backward()
    assert gs() - s == 0
    assert x.grad is not None


def test_two_root_backward_bumps_one():
    """engine-semantics §1.4: backward([y1, y2]) creates a GraphRoot and bumps the counter by exactly 1."""
    x = engine.randn(3, requires_grad=True)
    y1 = (x * 2).sum()
    y2 = (x * 3).sum()
    s = gs()
    engine.autograd.backward([y1, y2])
    assert gs() - s == 1
    assert x.grad.tolist() == pytest.approx([5.0, 5.0, 5.0])


# -- engine-semantics §1.4 Identity --------------------------------------------------------------------
def test_grad_unused_fresh_leaf_bumps_identity():
    """engine-semantics §1.4/§3.3: grad(y, [leaf never used], allow_unused=True) creates an Identity: +1, result (None,)."""
    x = engine.randn(3, requires_grad=True)
    z = engine.randn(3, requires_grad=True)
    y = (x * 2).sum()
    s = gs()
    r = engine.autograd.grad(y, [z], allow_unused=True)
    assert gs() - s == 1
    assert r == (None,)


def test_grad_unused_leaf_with_accumulator_bumps_zero():
    """engine-semantics §1.4: grad(y, [unreachable leaf that already owns an AccumulateGrad]) bumps 0, result (None,)."""
    x = engine.randn(3, requires_grad=True)
    w = engine.randn(3, requires_grad=True)
    ww = w * 2  # gives w an AccumulateGrad, kept alive by ww's graph
    y = (x * 2).sum()
    s = gs()
    r = engine.autograd.grad(y, [w], allow_unused=True)
    assert gs() - s == 0
    assert r == (None,)
    assert ww.grad_fn.next_functions[0][0].variable is w


# -- engine-semantics §1.4 / §10.2 custom Function -------------------------------------------------------
class MyFn(engine.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class MyFn2(engine.autograd.Function):
    inner_seq: list = []

    @staticmethod
    def forward(ctx, x):
        with engine.enable_grad():
            y = x * 2
        MyFn2.inner_seq.append(y.grad_fn._sequence_nr())
        return y.detach()

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_custom_function_non_requiring_input_bumps_one():
    """engine-semantics §1.4: Function.apply bumps 1 even when no input requires grad; the output has no grad_fn."""
    s = gs()
    out = MyFn.apply(engine.randn(2))
    assert gs() - s == 1
    assert out.grad_fn is None
    assert out.requires_grad is False


def test_custom_function_requiring_input_seq_is_counter_before_apply():
    """engine-semantics §1.4/§10.2 step 4: the PyNode's seq equals the counter before apply, and apply bumps 1."""
    a = engine.randn(3, requires_grad=True)
    s = gs()
    out = MyFn.apply(a)
    assert gs() - s == 1
    assert out.grad_fn.name() == "MyFnBackward"
    assert out.grad_fn._sequence_nr() == s


def test_custom_function_under_no_grad_bumps_one():
    """engine-semantics §1.4: Function.apply under no_grad still bumps 1; the output has no grad_fn."""
    a = engine.randn(3, requires_grad=True)
    with engine.no_grad():
        s = gs()
        out = MyFn.apply(a)
        assert gs() - s == 1
    assert out.grad_fn is None


def test_custom_function_enable_grad_op_inside_forward_gets_next_seq():
    """engine-semantics §10.2 step 4: an op under enable_grad inside forward gets node seq + 1; apply bumps 2 in total."""
    a = engine.randn(3, requires_grad=True)
    MyFn2.inner_seq.clear()
    s = gs()
    out = MyFn2.apply(a)
    assert gs() - s == 2
    assert out.grad_fn._sequence_nr() == s
    assert MyFn2.inner_seq == [s + 1]


# -- engine-semantics §1.7 nodes created during backward ------------------------------------------------
def test_create_graph_grad_creates_three_nodes():
    """engine-semantics §1.7: create_graph grad of (x*x).sum() creates exactly two MulBackward0 and one AddBackward0."""
    x = engine.randn(3, requires_grad=True)
    y = (x * x).sum()
    rec = _Recorder()
    s = gs()
    with engine.add_observer(rec):
        (g,) = engine.autograd.grad(y, x, create_graph=True)
    assert gs() - s == 3
    assert sorted(name for name, _ in rec.bumped) == ["AddBackward0", "MulBackward0", "MulBackward0"]
    assert [seq for _, seq in rec.bumped] == [s, s + 1, s + 2]
    assert g.grad_fn.name() == "AddBackward0"
    assert g.requires_grad


def test_grad_without_create_graph_creates_no_nodes():
    """engine-semantics §1.7: without create_graph the backward formulas run with grad off and create no nodes."""
    x = engine.randn(3, requires_grad=True)
    y = (x * x).sum()
    s = gs()
    (g,) = engine.autograd.grad(y, x)
    assert gs() - s == 0
    assert g.grad_fn is None
    assert g.requires_grad is False


def test_create_graph_nodes_take_calling_threads_counter():
    """engine-semantics §1.7: nodes made during a create_graph backward take numbers from the thread that ran backward."""
    x = engine.randn(3, requires_grad=True)
    y = (x * x).sum()  # graph built on the main thread

    def worker():
        start = gs()
        (g,) = engine.autograd.grad(y, x, create_graph=True)
        return start, gs(), g.grad_fn.thread_id, threading.get_ident()

    main_before = gs()
    start, after, node_tid, tid = run_in_thread(worker)
    assert (start, after) == (0, 3)
    assert node_tid == tid
    assert gs() == main_before


# -- engine-semantics §1.8 _set_sequence_nr ------------------------------------------------------------
def test_set_sequence_nr_changes_node_not_counter():
    """engine-semantics §1.8: _set_sequence_nr overwrites the node's seq and leaves the counter alone."""
    a = engine.randn(3, requires_grad=True)
    b = a.exp()
    s = gs()
    b.grad_fn._set_sequence_nr(1000)
    assert b.grad_fn._sequence_nr() == 1000
    assert gs() == s
    c = a.sin()
    assert c.grad_fn._sequence_nr() == s


# -- engine-semantics §1.3 / §1.4 / §10.9 once_differentiable --------------------------------------------
def test_once_differentiable_error_node_and_bumps():
    """engine-semantics §1.3/§1.4/§10.9: once_differentiable gives an Error grad_fn with seq 2**64-1; OD + DelayedError = +2."""
    x = engine.ones(2, requires_grad=True)
    v = engine.ones(2, requires_grad=True)
    s = gs()
    (g,) = engine.autograd.grad(OD.apply(x), x, grad_outputs=v, create_graph=True)
    assert gs() - s == 2
    assert g.grad_fn.name() == "torch::autograd::Error"
    assert g.grad_fn._sequence_nr() == UINT64_MAX
    assert g.tolist() == [2.0, 2.0]


def test_once_differentiable_double_backward_raises():
    """engine-semantics §10.9: differentiating through the once_differentiable result raises the documented message."""
    x = engine.ones(2, requires_grad=True)
    v = engine.ones(2, requires_grad=True)
    (g,) = engine.autograd.grad(OD.apply(x), x, grad_outputs=v, create_graph=True)
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        g.sum().backward()


def test_once_differentiable_without_grad_outputs_requiring_grad():
    """engine-semantics §10.9: when the grad_outputs do not require grad, the result has no grad_fn and OD bumps only 1."""
    x = engine.ones(2, requires_grad=True)
    s = gs()
    (g,) = engine.autograd.grad(OD.apply(x).sum(), x, create_graph=True)
    # OD.apply (1) + SumBackward0 (1); the Error/DelayedError path is not taken.
    assert gs() - s == 2
    assert g.grad_fn is None
