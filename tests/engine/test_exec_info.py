"""Engine::execute bookkeeping (engine-semantics §3, §4): dependency counts, min_topo_nr pruning, exec_info (needed /
captured), the single-root InputBuffer slot, and None grads still scheduling their node (§4.5, §5.3).

Expected values come from docs/engine-semantics.md and experiments e2_order, e4_custom, e7_api, e10_quirks, e12_misc."""
from __future__ import annotations

import pytest

from agdb import engine
from tests.engine.helpers import PassFirst, acc_of


class Obs:
    """Snapshots of a GraphTask's bookkeeping at the observer points (the engine mutates them later)."""

    def __init__(self) -> None:
        self.tasks = []
        self.deps = None
        self.min_topo = None
        self.pruned = None
        self.exec_info = None
        self.exec_info_calls = 0

    def graph_task_started(self, graph_task):
        self.tasks.append(graph_task)

    def dependencies_computed(self, graph_task, min_topo_nr, pruned):
        self.deps = dict(graph_task.dependencies)
        self.min_topo = min_topo_nr
        self.pruned = list(pruned)

    def exec_info_computed(self, graph_task):
        self.exec_info_calls += 1
        self.exec_info = {n: (info.needed, list(info.captures or [])) for n, info in graph_task.exec_info.items()}


def prehook_log(node, log, label):
    node.register_prehook(lambda go: log.append((label, go)))


# -- engine-semantics §3.4 dependency counts ---------------------------------------------------------------
def test_two_edges_to_one_child_count_two():
    """engine-semantics §3.4/§5.1: x*x gives its AccumulateGrad dependency 2; it runs once, with the summed grad 2x = 6."""
    x = engine.tensor([3.0], requires_grad=True)
    y = x * x
    acc = y.grad_fn.next_functions[0][0]
    assert acc is y.grad_fn.next_functions[1][0]
    calls = []
    acc.register_prehook(lambda go: calls.append([g.tolist() for g in go]))
    obs = Obs()
    with engine.add_observer(obs):
        y.backward(engine.ones(1))
    assert obs.deps == {acc: 2}
    assert calls == [[[6.0]]]
    assert x.grad.tolist() == [6.0]


def test_diamond_dependency_counts():
    """engine-semantics §3.4: diamond: Exp counted 2 (two parents), the others 1; the root gets no entry."""
    x = engine.randn(3, requires_grad=True)
    y = x.exp()
    u = y.sin()
    v = y.cos()
    w = u + v
    z = w.sum()
    obs = Obs()
    with engine.add_observer(obs):
        z.backward()
    assert obs.deps == {w.grad_fn: 1, u.grad_fn: 1, v.grad_fn: 1, y.grad_fn: 2, acc_of(x): 1}
    assert obs.min_topo == 0
    assert obs.pruned == []


def test_graph_root_two_edges_to_same_root():
    """engine-semantics §3.4/§5.1: backward([y, y]) gives y.grad_fn dependency 2 and one run with the summed grad."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3).sum()
    calls = []
    y.grad_fn.register_prehook(lambda go: calls.append([g.item() for g in go]))
    obs = Obs()
    with engine.add_observer(obs):
        engine.autograd.backward([y, y])
    assert obs.deps[y.grad_fn] == 2
    assert calls == [[2.0]]
    assert x.grad.tolist() == [6.0, 6.0]


def test_plain_backward_has_empty_exec_info():
    """engine-semantics §4.2/§9.2: plain backward without inputs= leaves exec_info empty (init_to_execute is not run)."""
    x = engine.randn(3, requires_grad=True)
    y = x.exp().sum()
    obs = Obs()
    with engine.add_observer(obs):
        y.backward()
    assert obs.exec_info_calls == 0
    assert obs.tasks[0].exec_info == {}


# -- engine-semantics §3.1 step 8 / §3.4 min_topo_nr pruning --------------------------------------------------
def test_min_topo_pruning_in_compute_dependencies():
    """engine-semantics §3.1 step 8/§3.4: grad wrt a topo-2 tensor does not expand nodes with topo < 2; they keep their counts."""
    a = engine.tensor([0.5, 1.0], requires_grad=True)
    b = engine.tensor([2.0, 3.0], requires_grad=True)
    e = a.exp()  # topo 1
    s = e.sin()  # topo 2
    m = s * b  # topo 3
    y = m.sum()  # topo 4
    log = []
    prehook_log(e.grad_fn, log, "Exp")
    prehook_log(acc_of(b), log, "Acc(b)")
    obs = Obs()
    with engine.add_observer(obs):
        (gs_,) = engine.autograd.grad(y, [s])
    assert obs.min_topo == 2
    # Exp and Acc(b) are counted by their parents but not expanded: Acc(a) gets no entry.
    assert obs.deps == {m.grad_fn: 1, s.grad_fn: 1, acc_of(b): 1, e.grad_fn: 1}
    assert set(obs.pruned) == {e.grad_fn, acc_of(b)}
    assert gs_.tolist() == [2.0, 3.0]
    assert log == []


def test_min_topo_is_min_over_outputs():
    """engine-semantics §3.1 step 8: with several inputs, min_topo is the minimum topo over their nodes (a leaf gives 0)."""
    x = engine.randn(2, requires_grad=True)
    k = x.exp().sin()  # topo 2
    y = (k * 2).sum()
    obs = Obs()
    with engine.add_observer(obs):
        engine.autograd.grad(y, [k], retain_graph=True)
    assert obs.min_topo == 2
    with engine.add_observer(obs):
        engine.autograd.grad(y, [k, x])
    assert obs.min_topo == 0


# -- engine-semantics §4.2/§4.3 exec_info -------------------------------------------------------------------
def _middle_tensor_graph():
    """x -> Exp -> Mul (k) -> Sin -> Sum (y), a prehook on each logging its label; returns x, k, sin, y, log."""
    x = engine.randn(3, requires_grad=True)
    h = x.exp()
    k = h * 3
    sin = k.sin()
    y = sin.sum()
    log = []
    for n, lbl in ((y.grad_fn, "Sum"), (sin.grad_fn, "Sin"), (k.grad_fn, "Mul"), (h.grad_fn, "Exp"),
                   (acc_of(x), "Acc")):
        prehook_log(n, log, lbl)
    return x, k, sin, y, log


def test_backward_inputs_non_leaf_runs_node_but_nothing_below():
    """engine-semantics §4.3/§15 D2: backward(inputs=[k]) marks k.grad_fn needed and runs it; Exp and Acc(x) get no entry."""
    x, k, sin, y, log = _middle_tensor_graph()
    obs = Obs()
    with engine.add_observer(obs):
        y.backward(inputs=[k])
    assert [lbl for lbl, _ in log] == ["Sum", "Sin", "Mul"]
    assert obs.exec_info == {y.grad_fn: (True, []), sin.grad_fn: (True, []), k.grad_fn: (True, [])}
    assert k.retains_grad is True
    assert k.grad.tolist() == pytest.approx(k.cos().tolist())
    assert x.grad is None


def test_grad_on_middle_tensor_captures_without_running():
    """engine-semantics §4.3/§4.5/§15 D: grad(y, [k]) captures k's grad at k.grad_fn without running it (no pre-hook)."""
    x, k, sin, y, log = _middle_tensor_graph()
    obs = Obs()
    with engine.add_observer(obs):
        (gk,) = engine.autograd.grad(y, [k])
    assert [lbl for lbl, _ in log] == ["Sum", "Sin"]
    assert obs.exec_info == {y.grad_fn: (True, []), sin.grad_fn: (True, []), k.grad_fn: (False, [(0, 0)])}
    assert gk.tolist() == pytest.approx(k.cos().tolist())
    assert x.grad is None


def test_captured_and_needed_quirk():
    """engine-semantics §4.5 quirk/e10 (3): grad(y, [k, h]) with k hook ×100: k's capture is the raw 3, h's grad includes it: 1500."""
    x = engine.ones(2, requires_grad=True)
    h = x * 2
    k = h * 5
    y = (k * 3).sum()
    k.register_hook(lambda g: g * 100)
    obs = Obs()
    with engine.add_observer(obs):
        gk, gh = engine.autograd.grad(y, [k, h])
    assert gk.tolist() == [3.0, 3.0]
    assert gh.tolist() == [1500.0, 1500.0]
    assert obs.exec_info[k.grad_fn] == (True, [(0, 0)])
    assert obs.exec_info[h.grad_fn] == (False, [(0, 1)])
    assert acc_of(x) not in obs.exec_info


def test_captured_only_applies_tensor_hooks():
    """engine-semantics §4.5/e10 (3b): grad(y, [k]) alone captures k's grad after its tensor hook: 300."""
    x = engine.ones(2, requires_grad=True)
    h = x * 2
    k = h * 5
    y = (k * 3).sum()
    k.register_hook(lambda g: g * 100)
    (gk,) = engine.autograd.grad(y, [k])
    assert gk.tolist() == [300.0, 300.0]


def test_pruned_node_tensor_hook_does_not_run():
    """engine-semantics §4.5/§15 C/e10 (1): backward(inputs=[a]) gives b's branch no task: b's hook never runs, b.grad None."""
    a = engine.ones(2, requires_grad=True)
    b = engine.ones(2, requires_grad=True)
    calls = []
    b.register_hook(lambda g: calls.append(g))
    y = (a * 2 + b.exp()).sum()
    obs = Obs()
    with engine.add_observer(obs):
        y.backward(inputs=[a])
    assert calls == []
    assert b.grad is None
    assert a.grad.tolist() == [2.0, 2.0]
    assert acc_of(b) not in obs.exec_info
    assert obs.exec_info[acc_of(a)] == (True, [])


def test_captures_in_input_order():
    """engine-semantics §4.2/§4.4: grad(y, [b, a]) fills one captured slot per input, in the inputs' order."""
    a = engine.tensor([1.0, 2.0], requires_grad=True)
    b = engine.tensor([5.0, 7.0], requires_grad=True)
    y = (a * b).sum()
    obs = Obs()
    with engine.add_observer(obs):
        gb, ga = engine.autograd.grad(y, [b, a])
    assert gb.tolist() == [1.0, 2.0]
    assert ga.tolist() == [5.0, 7.0]
    assert obs.exec_info[acc_of(b)] == (False, [(0, 0)])
    assert obs.exec_info[acc_of(a)] == (False, [(0, 1)])


def test_backward_inputs_unused_leaf_is_silent_noop():
    """engine-semantics §3.3: backward(inputs=[z]) with a never-used leaf maps to an unreachable Identity: nothing runs, z.grad None."""
    x = engine.randn(3, requires_grad=True)
    z = engine.randn(3, requires_grad=True)
    y = (x * 2).sum()
    log = []
    prehook_log(y.grad_fn, log, "Sum")
    y.backward(inputs=[z])
    assert z.grad is None
    assert x.grad is None
    assert log == []


# -- engine-semantics §3.1 step 11 the single-root InputBuffer slot -----------------------------------------
class Three(engine.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1, a * 2, a * 3

    @staticmethod
    def backward(ctx, g0, g1, g2):
        return g0 + g1 * 2 + g2 * 3


def _fmt(grads):
    return tuple(None if g is None else g.item() for g in grads)


def test_single_root_grad_goes_to_input_nr_slot():
    """engine-semantics §3.1 step 11/e7_api: backward(outputs[1], 5.) gives the node (None, 5., None), not slot 0."""
    a = engine.tensor(1.0, requires_grad=True)
    outs = Three.apply(a)
    node = outs[1].grad_fn
    assert outs[0].grad_fn is node and outs[2].grad_fn is node
    seen = []
    node.register_prehook(lambda go: seen.append(_fmt(go)))
    engine.autograd.backward(outs[1], engine.tensor(5.0))
    assert seen == [(None, 5.0, None)]
    assert a.grad.item() == 10.0  # undefined grads materialised as zeros: 0 + 5*2 + 0


def test_two_roots_on_same_node_fill_two_slots():
    """engine-semantics §3.1 step 11/e12_misc: backward([o0, o2], [1., 3.]) gives the node (1., None, 3.)."""
    a = engine.tensor(1.0, requires_grad=True)
    outs = Three.apply(a)
    seen = []
    outs[0].grad_fn.register_prehook(lambda go: seen.append(_fmt(go)))
    engine.autograd.backward([outs[0], outs[2]], [engine.tensor(1.0), engine.tensor(3.0)])
    assert seen == [(1.0, None, 3.0)]
    assert a.grad.item() == 10.0  # 1 + 0*2 + 3*3


# -- engine-semantics §5.3 None grads still schedule the downstream node --------------------------------
def test_none_grad_runs_downstream_node_with_none():
    """engine-semantics §5.3/e4_custom: a custom backward returning (g, None) still runs ExpBackward0 below, with (None,)."""
    a = engine.ones(2, requires_grad=True)
    x = engine.ones(2, requires_grad=True)
    e = x.exp()
    out = PassFirst.apply(a, e)
    pre, post = [], []
    e.grad_fn.register_prehook(lambda go: pre.append(go))
    e.grad_fn.register_hook(lambda gi, go: post.append(gi))
    out.sum().backward()
    assert pre == [(None,)]
    assert post == [(None,)]
    assert x.grad is None
    assert a.grad.tolist() == [1.0, 1.0]


def test_none_grad_runs_accumulate_grad_with_none():
    """engine-semantics §5.3/e12_misc: a None grad to a leaf still runs its tensor hook (None), Acc pre-hook (None,), post-acc hook."""
    a = engine.ones(2, requires_grad=True)
    b = engine.ones(2, requires_grad=True)
    log = []
    b.register_post_accumulate_grad_hook(lambda p: log.append(("post_acc", p.grad)))
    b.register_hook(lambda g: log.append(("tensor_hook", g)))
    out = PassFirst.apply(a, b)
    out.grad_fn.next_functions[1][0].register_prehook(lambda go: log.append(("acc_pre", go)))
    out.sum().backward()
    assert log == [("tensor_hook", None), ("acc_pre", (None,)), ("post_acc", None)]
    assert b.grad is None
