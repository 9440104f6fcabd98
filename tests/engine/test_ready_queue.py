"""The ready queue (engine-semantics §6.1, §6.2) and the end-to-end execution orders of engine-semantics §15.

(a) ReadyQueue against an independent model of libstdc++'s std::priority_queue (push_heap/pop_heap);
(b) the observed tie orders of engine-semantics §6.2; (c) the orders observed on torch 2.13 in experiments/e2_order.out.
"""
from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agdb import engine
from agdb.engine._engine import GraphTask, NodeTask, ReadyQueue
from agdb.engine._node import Node
from agdb.engine._state import UINT64_MAX
from tests.engine.helpers import hook_every_node, node_label, run_in_thread

INT_MAX = 2**31 - 1
gs = engine.autograd._get_sequence_nr


# -- a model of libstdc++'s heap ---------------------------------------------------------------------------
# `less(a, b)` is the priority_queue comparator: True means b has priority over a (b leaves first).
def _heap_sift_up(arr, hole, top, value, less):
    """std::__push_heap: move the hole up while its parent is strictly less than `value`."""
    parent = (hole - 1) // 2
    while hole > top and less(arr[parent], value):
        arr[hole] = arr[parent]
        hole = parent
        parent = (hole - 1) // 2
    arr[hole] = value


def _heap_adjust(arr, hole, length, value, less):
    """std::__adjust_heap: walk the hole to a leaf through the larger child (right on ties), then sift up."""
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * child + 2  # right child
        if less(arr[child], arr[child - 1]):  # left strictly better: take it
            child -= 1
        arr[hole] = arr[child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:  # a lone left child at the bottom
        child = 2 * child + 2
        arr[hole] = arr[child - 1]
        hole = child - 1
    _heap_sift_up(arr, hole, top, value, less)


class LibstdcxxPQ:
    """std::priority_queue<T, vector<T>, Less>: push = push_back + push_heap, pop = pop_heap + pop_back."""

    def __init__(self, less):
        self.arr: list = []
        self.less = less

    def push(self, value):
        self.arr.append(value)
        _heap_sift_up(self.arr, len(self.arr) - 1, 0, value, self.less)

    def pop(self):
        arr = self.arr
        top = arr[0]
        n = len(arr)
        if n > 1:
            value = arr[n - 1]
            arr[n - 1] = arr[0]
            _heap_adjust(arr, 0, n - 1, value, self.less)
        arr.pop()
        return top

    def __len__(self):
        return len(self.arr)


class ModelTask:
    """A task as CompareNodeTaskTime sees it: a null fn flag, reentrant depth (INT_MAX once gone), seq."""

    def __init__(self, ident, depth, seq, null_fn=False, alive=lambda: True):
        self.ident, self.depth, self.seq, self.null_fn, self.alive = ident, depth, seq, null_fn, alive

    def reentrant_depth(self):
        return self.depth if self.alive() else INT_MAX


def compare_node_task_time(t1: ModelTask, t2: ModelTask) -> bool:
    """engine-semantics §6.1 rules 2-5 (no shutdown tasks): True iff t2 has priority over t1."""
    if t1.null_fn:
        return False
    if t2.null_fn:
        return True
    d1, d2 = t1.reentrant_depth(), t2.reentrant_depth()
    if d1 == d2:
        return t1.seq < t2.seq
    return d1 < d2


def _model_pop_order(keys):
    """Push ModelTasks with the given (depth, seq) keys into an empty model queue; return the pop order."""
    pq = LibstdcxxPQ(compare_node_task_time)
    for i, (d, s) in enumerate(keys):
        pq.push(ModelTask(i, d, s))
    return [pq.pop().ident for _ in range(len(keys))]


# -- helpers to make engine tasks ----------------------------------------------------------------------
def _graph_task(depth: int, queue: ReadyQueue) -> GraphTask:
    return GraphTask(keep_graph=False, create_graph=False, reentrant_depth=depth, cpu_ready_queue=queue,
                     graph_roots=[], accumulate_grad=True)


def _engine_task(gt: GraphTask, seq: int | None) -> NodeTask:
    """A real NodeTask for a real Node with an explicit seq (which bumps nothing); seq None = null fn."""
    return NodeTask(gt, None if seq is None else Node(sequence_nr=seq), None)


# -- (b) the tie table of engine-semantics §6.2 ------------------------------------------------------------
TIE_ORDERS = {
    2: [0, 1],
    3: [0, 1, 2],
    4: [0, 2, 1, 3],
    5: [0, 2, 4, 1, 3],
    6: [0, 2, 5, 4, 1, 3],
    7: [0, 2, 5, 6, 4, 1, 3],
    8: [0, 2, 6, 5, 7, 4, 1, 3],
}


@pytest.mark.parametrize("k", sorted(TIE_ORDERS))
def test_model_reproduces_observed_tie_orders(k):
    """engine-semantics §6.2: the libstdc++ model in this file pops k equal-key tasks in the observed order (model check)."""
    assert _model_pop_order([(0, 7)] * k) == TIE_ORDERS[k]


@pytest.mark.parametrize("key", [(0, UINT64_MAX), (0, 5), (3, 1000)], ids=["acc", "seq5", "depth3"])
@pytest.mark.parametrize("k", sorted(TIE_ORDERS))
def test_ready_queue_tie_orders(k, key):
    """engine-semantics §6.2: k equal-key tasks pushed in order 0..k-1 into an empty ReadyQueue pop in the observed order."""
    queue = ReadyQueue("test")
    gt = _graph_task(key[0], queue)
    tasks = [_engine_task(gt, key[1]) for _ in range(k)]
    for t in tasks:
        queue.push(t)
    popped = [queue.pop() for _ in range(k)]
    assert [tasks.index(t) for t in popped] == TIE_ORDERS[k]


# -- (a) property: ReadyQueue == libstdc++ model ------------------------------------------------------------
_DEPTHS = st.integers(0, 2)
_SEQS = st.sampled_from([0, 1, 2, 3, UINT64_MAX])
_OP = st.one_of(
    st.tuples(st.just("push"), _DEPTHS, _SEQS),
    st.tuples(st.just("pop"), st.just(0), st.just(0)),
)


def _check_against_model(ops):
    queue = ReadyQueue("test")
    gts = {d: _graph_task(d, queue) for d in range(3)}
    model = LibstdcxxPQ(compare_node_task_time)
    ident_of: dict[int, int] = {}
    keep = []
    next_id = 0
    for op, depth, seq in ops:
        if op in ("push", "dummy"):
            null_fn = op == "dummy"
            task = _engine_task(gts[depth], None if null_fn else seq)
            keep.append(task)
            ident_of[id(task)] = next_id
            model.push(ModelTask(next_id, depth, seq, null_fn=null_fn))
            queue.push(task)
            next_id += 1
        elif len(model):
            assert ident_of[id(queue.pop())] == model.pop().ident
    while len(model):
        assert ident_of[id(queue.pop())] == model.pop().ident
    assert len(queue) == 0


@settings(max_examples=400, deadline=None)
@given(st.lists(_OP, max_size=60))
def test_ready_queue_matches_libstdcxx_model(ops):
    """engine-semantics §6.1/§6.2: any interleaving of pushes (many equal (depth, seq) keys) and pops matches libstdc++."""
    _check_against_model(ops)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([("push", 0, UINT64_MAX), ("pop", 0, 0)]), max_size=60))
def test_ready_queue_all_equal_keys_matches_model(ops):
    """engine-semantics §6.2: with every key equal (all AccumulateGrads), pops follow libstdc++'s tie pattern exactly."""
    _check_against_model(ops)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_OP, st.tuples(st.just("dummy"), _DEPTHS, st.just(0))), max_size=50))
def test_ready_queue_with_null_fn_tasks_matches_model(ops):
    """engine-semantics §6.1 rules 2-3: null-fn (dummy) tasks beat every real task and tie among themselves, as libstdc++."""
    _check_against_model(ops)


# -- engine-semantics §6.1 deterministic rules ----------------------------------------------------------
def test_larger_seq_first_at_same_depth():
    """engine-semantics §6.1 rule 4: at equal depth the larger sequence_nr pops first; AccumulateGrad's 2**64-1 beats all."""
    queue = ReadyQueue("test")
    gt = _graph_task(0, queue)
    tasks = [_engine_task(gt, s) for s in (3, UINT64_MAX, 10, 0, 7)]
    for t in tasks:
        queue.push(t)
    assert [queue.pop().fn._sequence_nr() for _ in tasks] == [UINT64_MAX, 10, 7, 3, 0]


def test_larger_depth_beats_larger_seq():
    """engine-semantics §6.1 rule 5: a task of larger reentrant depth pops before any task of smaller depth, whatever the seqs."""
    queue = ReadyQueue("test")
    outer = _graph_task(0, queue)
    inner = _graph_task(1, queue)
    t_outer_acc = _engine_task(outer, UINT64_MAX)
    t_outer = _engine_task(outer, 100)
    t_inner = _engine_task(inner, 1)
    for t in (t_outer_acc, t_outer, t_inner):
        queue.push(t)
    assert [queue.pop() for _ in range(3)] == [t_inner, t_outer_acc, t_outer]


def test_null_fn_task_beats_real_tasks():
    """engine-semantics §6.1 rules 2-3: a dummy (null fn) task has priority over any real task, even a deeper one."""
    queue = ReadyQueue("test")
    gt0 = _graph_task(0, queue)
    gt5 = _graph_task(5, queue)
    real = [_engine_task(gt5, UINT64_MAX), _engine_task(gt0, 3)]
    dummy = _engine_task(gt0, None)
    queue.push(real[0])
    queue.push(dummy)
    queue.push(real[1])
    assert queue.pop() is dummy


def test_model_stale_task_surfaces_first():
    """engine-semantics §6.1 (model check): a task whose GraphTask is gone (depth INT_MAX) is not passed by a later push."""
    model = LibstdcxxPQ(compare_node_task_time)
    gone = ModelTask(0, 0, 5, alive=lambda: False)
    model.push(gone)
    model.push(ModelTask(1, 0, 10))
    assert model.pop() is gone


def test_stale_task_is_popped_first_by_next_backward():
    """engine-semantics §6.1/§12.2: a task left by an errored backward is popped (and dropped, unrun) first by the next backward."""

    class PopRecorder:
        def __init__(self):
            self.pops = []
            self.queues = set()

        def task_popped(self, graph_task, task, queue):
            self.pops.append((task.fn, graph_task))
            self.queues.add(queue)

    def case():
        ran = []
        x = engine.ones(2, requires_grad=True)
        a = x.exp()  # seq 0: pushed together with Sin (seq 1), which fails first
        b = x.sin()
        y = (a + b).sum()
        stale_fn = a.grad_fn
        stale_fn.register_prehook(lambda go: ran.append("stale"))

        def boom(go):
            raise ValueError("boom")

        b.grad_fn.register_prehook(boom)
        with pytest.raises(ValueError):
            y.backward()
        del a, b, y
        gc.collect()
        x2 = engine.ones(2, requires_grad=True)
        z = (x2 * 2).sum()
        rec = PopRecorder()
        with engine.add_observer(rec):
            z.backward()
        (queue,) = rec.queues
        return ran, rec.pops, stale_fn, z.grad_fn, len(queue)

    ran, pops, stale_fn, root, left = run_in_thread(case)
    assert ran == []
    assert pops[0] == (stale_fn, None)  # surfaced before the new root, with its GraphTask gone
    assert pops[1][0] is root
    assert left == 0


# -- (c) end-to-end orders of engine-semantics §15 ----------------------------------------------------------
def advance_counter_to(n: int) -> None:
    """Make this (fresh) thread's counter equal `n`, as the earlier cases of e2_order.py left it."""
    t = engine.ones(1, requires_grad=True)
    while gs() < n:
        t.exp()
    assert gs() == n


class Labels:
    """Pre-hooks on every node reachable from the roots, logging `Name#seq` or `Acc(<leaf>)` (sim.instrument)."""

    def __init__(self):
        self.leaf_names: dict[int, str] = {}
        self.node_names: dict[int, str] = {}
        self.log: list[str] = []
        self.ident_log: list[str] = []

    def leaf(self, name, *shape):
        t = engine.randn(*(shape or (3,)), requires_grad=True)
        self.leaf_names[id(t)] = name
        return t

    def label(self, n):
        return node_label(n, self.leaf_names)

    def instrument(self, roots):
        hook_every_node(roots, self._record)

    def _record(self, n):
        self.log.append(self.label(n))
        self.ident_log.append(self.node_names.get(id(n), self.label(n)))


def test_order_A_diamond():
    """engine-semantics §15 A: diamond: Sum#4, Add#3, Cos#2, Sin#1, Exp#0, Acc(x) (larger seq first; Exp waits for both)."""

    def case():
        L = Labels()
        x = L.leaf("x")
        y = x.exp()
        u = y.sin()
        v = y.cos()
        z = (u + v).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return L.log

    assert run_in_thread(case) == ["SumBackward0#4", "AddBackward0#3", "CosBackward0#2", "SinBackward0#1",
                                   "ExpBackward0#0", "Acc(x)"]


def test_order_B_two_accumulate_grads():
    """engine-semantics §15 B: two AccumulateGrads ready together keep push order: Sum#6, Mul#5, Acc(a), Acc(b)."""

    def case():
        advance_counter_to(5)
        L = Labels()
        a, b = L.leaf("a"), L.leaf("b")
        z = (a * b).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return L.log

    assert run_in_thread(case) == ["SumBackward0#6", "MulBackward0#5", "Acc(a)", "Acc(b)"]


def test_order_B2_five_accumulate_grads():
    """engine-semantics §15 B2: five AccumulateGrads from one Cat follow the libstdc++ tie order p, r, t, q, s."""

    def case():
        advance_counter_to(7)
        L = Labels()
        ts = [L.leaf(nm, 2) for nm in "pqrst"]
        z = engine.cat(ts).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return L.log

    assert run_in_thread(case) == ["SumBackward0#8", "CatBackward0#7", "Acc(p)", "Acc(r)", "Acc(t)", "Acc(q)",
                                   "Acc(s)"]


def test_order_eight_leaf_cat():
    """engine-semantics §6.2: an 8-leaf cat runs its AccumulateGrads in the order a, c, g, f, h, e, b, d."""

    def case():
        L = Labels()
        ts = [L.leaf(nm, 2) for nm in "abcdefgh"]
        z = engine.cat(ts).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return L.log

    assert run_in_thread(case) == ["SumBackward0#1", "CatBackward0#0"] + ["Acc(%s)" % c for c in "acgfhebd"]


def test_order_B3_accumulate_grad_preempts():
    """engine-semantics §15 B3: Acc(w) runs right after Mul#10, before Cat#9, then the tie order p, r, t, q, s."""

    def case():
        advance_counter_to(9)
        L = Labels()
        ts = [L.leaf(nm, 2) for nm in "pqrst"]
        c = engine.cat(ts)
        w = L.leaf("w", 10)
        z = (c * w).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return L.log

    assert run_in_thread(case) == ["SumBackward0#11", "MulBackward0#10", "Acc(w)", "CatBackward0#9", "Acc(p)",
                                   "Acc(r)", "Acc(t)", "Acc(q)", "Acc(s)"]


def test_order_C_inputs_prunes_branch():
    """engine-semantics §15 C: backward(inputs=[a]) runs Sum#15, Add#14, Mul#12, Acc(a); Exp#13/Acc(b) never run, b's hook silent."""

    def case():
        advance_counter_to(12)
        L = Labels()
        a, b = L.leaf("a"), L.leaf("b")
        b_hook_calls = []
        b.register_hook(lambda g: b_hook_calls.append(g))
        y = (a * 2 + b.exp()).sum()
        L.instrument([y.grad_fn])
        y.backward(inputs=[a])
        return L.log, b.grad, b_hook_calls, a.grad.tolist()

    log, b_grad, b_hook_calls, a_grad = run_in_thread(case)
    assert log == ["SumBackward0#15", "AddBackward0#14", "MulBackward0#12", "Acc(a)"]
    assert b_grad is None
    assert b_hook_calls == []
    assert a_grad == [2.0, 2.0, 2.0]


def test_order_D_grad_on_middle_tensor():
    """engine-semantics §15 D: grad(y, [k]) runs only Sum#19, Sin#18; k.grad_fn (Mul#17) is captured, not run."""

    def case():
        advance_counter_to(16)
        L = Labels()
        x = L.leaf("x")
        h = x.exp()
        k = h * 3
        y = k.sin().sum()
        L.instrument([y.grad_fn])
        (gk,) = engine.autograd.grad(y, [k])
        return L.log, gk.tolist(), k.cos().tolist(), k.grad_fn._sequence_nr(), x.grad

    log, gk, expected_gk, kseq, x_grad = run_in_thread(case)
    assert log == ["SumBackward0#19", "SinBackward0#18"]
    assert kseq == 17
    assert gk == pytest.approx(expected_gk)
    assert x_grad is None


def test_order_D2_backward_inputs_non_leaf():
    """engine-semantics §15 D2: backward(inputs=[k]) runs Sum#23, Sin#22, Mul#21 (k.grad_fn runs) and nothing below; k.grad set."""

    def case():
        advance_counter_to(20)
        L = Labels()
        x = L.leaf("x")
        h = x.exp()
        k = h * 3
        y = k.sin().sum()
        L.instrument([y.grad_fn])
        y.backward(inputs=[k])
        return L.log, k.retains_grad, k.grad.tolist(), k.cos().tolist(), x.grad

    log, retains, kgrad, expected, x_grad = run_in_thread(case)
    assert log == ["SumBackward0#23", "SinBackward0#22", "MulBackward0#21"]
    assert retains is True
    assert kgrad == pytest.approx(expected)
    assert x_grad is None


def test_order_E_two_roots():
    """engine-semantics §15 E: two roots: Sum#27, Exp#26, Sum#25, Mul#24, Acc(x); the GraphRoot takes seq 28."""

    class Rec:
        roots: list = []

        def graph_task_started(self, gt):
            self.roots.append(gt.graph_root)

    def case():
        advance_counter_to(24)
        L = Labels()
        x = L.leaf("x")
        y1 = (x * 2).sum()
        y2 = x.exp().sum()
        L.instrument([y1.grad_fn, y2.grad_fn])
        rec = Rec()
        with engine.add_observer(rec):
            engine.autograd.backward([y1, y2])
        return L.log, [r._sequence_nr() for r in rec.roots], gs()

    log, root_seqs, after = run_in_thread(case)
    assert log == ["SumBackward0#27", "ExpBackward0#26", "SumBackward0#25", "MulBackward0#24", "Acc(x)"]
    assert root_seqs == [28]
    assert after == 29


def test_order_F_forced_ties():
    """engine-semantics §15 F: five Exp nodes forced to seq 1000: Exp(p), Acc(p), Exp(t), Acc(t), Exp(s), Acc(s), Exp(r), ..."""

    def case():
        advance_counter_to(29)
        L = Labels()
        ts = [L.leaf(nm, 2) for nm in "pqrst"]
        parts = [t.exp() for t in ts]
        for nm, p in zip("pqrst", parts):
            p.grad_fn._set_sequence_nr(1000)
            L.node_names[id(p.grad_fn)] = "Exp(%s)" % nm
        z = engine.cat(parts).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return L.log, L.ident_log

    log, ident_log = run_in_thread(case)
    assert log == ["SumBackward0#35", "CatBackward0#34", "ExpBackward0#1000", "Acc(p)", "ExpBackward0#1000",
                   "Acc(t)", "ExpBackward0#1000", "Acc(s)", "ExpBackward0#1000", "Acc(r)", "ExpBackward0#1000",
                   "Acc(q)"]
    assert ident_log == ["SumBackward0#35", "CatBackward0#34"] + [
        s for nm in "ptsrq" for s in ("Exp(%s)" % nm, "Acc(%s)" % nm)]


def test_stale_tasks_do_not_disturb_later_tie_orders():
    """engine-semantics §6.1/§12.2: stale tasks of a failed backward are dropped by the next; a later 4-leaf cat keeps a, c, b, d."""

    def case():
        stale_ran = []
        x = engine.ones(2, requires_grad=True)
        a = x.exp()
        b = x.sin()
        y = (a + b).sum()
        a.grad_fn.register_prehook(lambda go: stale_ran.append("ExpBackward0"))

        def boom(go):
            raise ValueError("boom")

        b.grad_fn.register_prehook(boom)
        with pytest.raises(ValueError, match="boom"):
            y.backward()  # Sin (seq 1) fails; Exp (seq 0) is left in this thread's queue
        del a, b, y
        gc.collect()  # the failed GraphTask is gone
        x2 = engine.ones(2, requires_grad=True)
        (x2 * 2).sum().backward()  # pushing its root meets the stale task, which surfaces and is dropped
        L = Labels()
        ts = [L.leaf(nm, 2) for nm in "abcd"]
        z = engine.cat(ts).sum()
        L.instrument([z.grad_fn])
        z.backward()
        return stale_ran, x2.grad.tolist(), [s for s in L.log if s.startswith("Acc")]

    stale_ran, x2_grad, accs = run_in_thread(case)
    assert stale_ran == []
    assert x2_grad == [2.0, 2.0]
    assert accs == ["Acc(a)", "Acc(c)", "Acc(b)", "Acc(d)"]
