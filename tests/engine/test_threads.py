"""Device worker threads and the reentrant pool (engine-semantics §6.1, §3.6, §12.1–§12.3, §13, §11): which thread runs each
node, in what order, how errors cross threads, and that many threads can run backward at once.

Expected values are derived by hand: the per-queue orders from the (depth, seq_nr) max-first rule of
engine-semantics §6.1 applied to the tasks each queue holds, the thread of each node from §12.1/§12.2 (a node's device is
the first non-CPU device of its input metadata; CPU work runs on the caller), gradients from numpy.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from agdb import engine
from tests.engine.helpers import GraphTaskRecorder, hook_every_node, run_in_thread

gs = engine.autograd._get_sequence_nr
POOL = "pt_autograd_reentrant"


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def _label(node, base: int) -> str:
    """`Name#k` with k the seq_nr relative to `base`, or `Acc` for an AccumulateGrad."""
    if hasattr(node, "variable"):
        return "Acc"
    return "%s#%d" % (node.name(), node._sequence_nr() - base)


class Boom(Exception):
    """A user exception type the engine must hand back unchanged."""

    def __init__(self, msg: str, tag: str) -> None:
        super().__init__(msg)
        self.tag = tag


# -- the four-hop graph: cpu → cuda:0 → cuda:1 → cpu ------------------------------------------------------------
XS = [0.5, -1.0, 2.0]  # exactly representable, so no rounding anywhere in the inputs


def _four_hop_graph():
    """Build the graph; returns (x, loss, base seq). Relative seqs and devices are in the comments."""
    base = gs()
    x = engine.tensor(np.array(XS), requires_grad=True)  # cpu leaf
    a = x.exp()            # 0  ExpBackward0      cpu
    b = a.to("cuda:0")     # 1  ToCopyBackward0   cuda:0
    c = b.sin()            # 2  SinBackward0      cuda:0
    d = b.cos()            # 3  CosBackward0      cuda:0
    e = c * d              # 4  MulBackward0      cuda:0
    f = e.to("cuda:1")     # 5  ToCopyBackward0   cuda:1
    g1 = f.exp()           # 6  ExpBackward0      cuda:1
    g2 = f.sin()           # 7  SinBackward0      cuda:1
    h = g1 + g2            # 8  AddBackward0      cuda:1
    k = h.cpu()            # 9  ToCopyBackward0   cpu
    m = k * x              # 10 MulBackward0      cpu
    loss = m.sum()         # 11 SumBackward0      cpu
    assert gs() == base + 12
    return x, loss, base


def _four_hop_grad() -> np.ndarray:
    """d/dx Σ h·x with a = eˣ, e = sin a cos a, h = eᵉ + sin e:  h + x·(eᵉ + cos e)·cos 2a·a."""
    x = np.array(XS)
    a = np.exp(x)
    e = np.sin(a) * np.cos(a)
    h = np.exp(e) + np.sin(e)
    return h + x * (np.exp(e) + np.cos(e)) * np.cos(2 * a) * a


# Hand derivation of who runs what, and in which order (engine-semantics §6.1, §12.1, §12.2):
# caller:  Sum#11 (root) → Mul#10 routes to ToCopy#9 (ready) and Acc(x) (1 of 2 deps) → ToCopy#9 pushes Add#8
#          onto cuda:1, then the caller sleeps on its empty queue.
# cuda:1:  Add#8 pushes Exp#6 (slot 0) then Sin#7 (slot 1); max seq first → Sin#7, Exp#6 (not FIFO). ToCopy#5
#          needs both, runs last and pushes Mul#4 onto cuda:0.
# cuda:0:  Mul#4 pushes Sin#2 (slot 0) then Cos#3 (slot 1) → Cos#3, Sin#2; ToCopy#1 (2 deps) last; it pushes
#          Exp#0 onto the caller's CPU queue.
# caller:  Exp#0 → Acc(x) (now 2 of 2).
# Only one thread has work at any time, so the global order is fixed too.
CALLER_ORDER_HEAD = ["SumBackward0#11", "MulBackward0#10", "ToCopyBackward0#9"]
CUDA1_ORDER = ["AddBackward0#8", "SinBackward0#7", "ExpBackward0#6", "ToCopyBackward0#5"]
CUDA0_ORDER = ["MulBackward0#4", "CosBackward0#3", "SinBackward0#2", "ToCopyBackward0#1"]
CALLER_ORDER_TAIL = ["ExpBackward0#0", "Acc"]
GLOBAL_ORDER = CALLER_ORDER_HEAD + CUDA1_ORDER + CUDA0_ORDER + CALLER_ORDER_TAIL


def _run_four_hop():
    """Build, hook and run the graph on the current thread; returns (log, caller name, x)."""
    x, loss, base = _four_hop_graph()
    log: list[tuple[str, str]] = []
    hook_every_node([loss.grad_fn], lambda n: log.append((_label(n, base), threading.current_thread().name)))
    loss.backward()
    return log, threading.current_thread().name, x


def test_four_hop_threads_and_order():
    """Four-hop graph: each node on its device's thread, hand-derived per-queue order, grad = numpy."""
    log, caller, x = run_in_thread(_run_four_hop)
    by_thread: dict[str, list[str]] = {}
    for label, th in log:
        by_thread.setdefault(th, []).append(label)
    assert by_thread == {
        caller: CALLER_ORDER_HEAD + CALLER_ORDER_TAIL,
        "pt_autograd_1": CUDA1_ORDER,
        "pt_autograd_0": CUDA0_ORDER,
    }
    assert [label for label, _ in log] == GLOBAL_ORDER
    assert x.grad.device == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), _four_hop_grad(), rtol=1e-12)


def test_four_hop_grad_matches_finite_differences():
    """The four-hop gradient agrees with central finite differences of the same function in numpy."""
    _, _, x = run_in_thread(_run_four_hop)

    def f(v):
        a = np.exp(v)
        e = np.sin(a) * np.cos(a)
        return np.sum((np.exp(e) + np.sin(e)) * v)

    eps = 1e-6
    base = np.array(XS)
    fd = np.array([(f(base + eps * np.eye(3)[i]) - f(base - eps * np.eye(3)[i])) / (2 * eps) for i in range(3)])
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-6)


def test_four_hop_multithreading_disabled():
    """With set_multithreading_enabled(False) every node runs on the calling thread, in the same order."""

    def case():
        with engine.autograd.set_multithreading_enabled(False):
            return _run_four_hop()

    log, caller, x = run_in_thread(case)
    assert [label for label, _ in log] == GLOBAL_ORDER
    assert {th for _, th in log} == {caller}
    np.testing.assert_allclose(x.grad.numpy(), _four_hop_grad(), rtol=1e-12)


def test_multithreading_disabled_takes_effect_at_once_and_is_thread_local():
    """set_multithreading_enabled(False) acts at once, on this thread only, until exit."""

    def case():
        ctx = engine.autograd.set_multithreading_enabled(False)  # no `with`: effective immediately
        try:
            assert not engine.autograd.is_multithreading_enabled()
            here = _run_four_hop()
            other = run_in_thread(_run_four_hop)  # a fresh thread has the default (enabled)
        finally:
            ctx.__exit__(None, None, None)
        assert engine.autograd.is_multithreading_enabled()
        return here, other

    (log_here, caller_here, _), (log_other, caller_other, _) = run_in_thread(case)
    assert {th for _, th in log_here} == {caller_here}
    assert {th for _, th in log_other} == {caller_other, "pt_autograd_0", "pt_autograd_1"}


def test_device_leaves_accumulate_on_their_workers():
    """AccumulateGrad of a cuda:N leaf runs on pt_autograd_N; .grad lands on cuda:N."""
    # Each runs before its sibling ToCopy (seq 2**64-1 first, engine-semantics §6.1).

    def case():
        base = gs()
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        w0 = engine.tensor([3.0, 4.0], device="cuda:0", requires_grad=True)
        w1 = engine.tensor([5.0, 6.0], device="cuda:1", requires_grad=True)
        a = x.to("cuda:0")       # 0 ToCopyBackward0 cuda:0
        b = a * w0               # 1 MulBackward0    cuda:0 → ToCopy#0 (slot 0), Acc(w0) (slot 1)
        c = b.to("cuda:1")       # 2 ToCopyBackward0 cuda:1
        d = c * w1               # 3 MulBackward0    cuda:1 → ToCopy#2 (slot 0), Acc(w1) (slot 1)
        loss = d.cpu().sum()     # 4 ToCopyBackward0 cpu, 5 SumBackward0 cpu
        names = {id(x): "x", id(w0): "w0", id(w1): "w1"}
        log: list[tuple[str, str]] = []
        hook_every_node([loss.grad_fn], lambda n: log.append(
            ("Acc(%s)" % names[id(n.variable)] if hasattr(n, "variable") else _label(n, base),
             threading.current_thread().name)))
        loss.backward()
        grads = [(t.grad.device, t.grad.tolist()) for t in (x, w0, w1)]
        return log, threading.current_thread().name, grads

    log, caller, grads = run_in_thread(case)
    assert log == [("SumBackward0#5", caller), ("ToCopyBackward0#4", caller),
                   ("MulBackward0#3", "pt_autograd_1"), ("Acc(w1)", "pt_autograd_1"),
                   ("ToCopyBackward0#2", "pt_autograd_1"),
                   ("MulBackward0#1", "pt_autograd_0"), ("Acc(w0)", "pt_autograd_0"),
                   ("ToCopyBackward0#0", "pt_autograd_0"), ("Acc(x)", caller)]
    # loss = Σ x·w0·w1
    assert grads == [("cpu", [15.0, 24.0]), ("cuda:0", [5.0, 12.0]), ("cuda:1", [3.0, 8.0])]


# -- lazy start of a worker ------------------------------------------------------------------------------------
def test_worker_thread_started_lazily_and_reused():
    """pt_autograd_7 starts only when a backward needs cuda:7, once, and is reused."""
    assert _threads_named("pt_autograd_7") == []
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("cuda:7").exp()  # forward work on cuda:7 starts nothing
    assert y.device == "cuda:7"
    assert _threads_named("pt_autograd_7") == []
    (x * 2).sum().backward()  # a CPU-only backward starts nothing either
    assert _threads_named("pt_autograd_7") == []

    ran: list[int] = []
    y.grad_fn.register_prehook(lambda go: ran.append(threading.get_ident()))
    y.cpu().sum().backward(retain_graph=True)
    workers = _threads_named("pt_autograd_7")
    assert len(workers) == 1
    assert ran == [workers[0].ident]

    y.cpu().sum().backward()
    assert _threads_named("pt_autograd_7") == workers
    assert ran == [workers[0].ident, workers[0].ident]
    np.testing.assert_allclose(x.grad.numpy(), 2 + 2 * np.exp([1.0, 2.0]), rtol=1e-6)


# -- deep reentrant backward (engine-semantics §13.1, §13.3) ------------------------------------------------------
def _run_nest(levels: int = 70):
    """Nest(levels) as in experiments/e6_reentrant.py, with factor depth+1 so each level's grad is distinct.
    Returns ({depth: (ident, thread name)}, {depth: inner q.grad}, outer x.grad)."""
    where: dict[int, tuple[int, str]] = {}
    inner: dict[int, list[float]] = {}

    class Nest(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a, depth):
            ctx.depth = depth
            return a * (depth + 1)

        @staticmethod
        def backward(ctx, g):
            th = threading.current_thread()
            where[ctx.depth] = (th.ident, th.name)
            if ctx.depth > 0:
                with engine.enable_grad():
                    q = engine.ones(1, dtype=engine.float64, requires_grad=True)
                    Nest.apply(q, ctx.depth - 1).sum().backward()
                    inner[ctx.depth - 1] = q.grad.tolist()
            return g * (ctx.depth + 1), None

    x = engine.ones(1, dtype=engine.float64, requires_grad=True)
    Nest.apply(x, levels).sum().backward()
    return where, inner, x.grad.tolist()


def _wait_pool_idle(timeout: float = 60.0) -> None:
    """Wait until every pool thread is back waiting for work (it finishes its loop after the caller wakes)."""
    from agdb.engine._threads import reentrant_pool

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with reentrant_pool.cond:
            if reentrant_pool.num_workers == len(reentrant_pool.threads) and not reentrant_pool.graph_tasks:
                return
        time.sleep(0.005)
    raise AssertionError("reentrant pool threads did not go idle")


def test_deep_reentrant_moves_to_one_pool_thread():
    """Nest(70): levels 70..10 on the caller, 9..0 on one pt_autograd_reentrant thread."""
    # 1 outer + MAX_DEPTH (60) inline reentrant levels; then the pool (engine-semantics §13.1, §13.3). GraphTask depths 0..70.
    rec = GraphTaskRecorder()
    with engine.add_observer(rec):
        where, inner, xg = _run_nest(70)
    caller = threading.get_ident()
    assert sorted(where) == list(range(71))
    assert all(where[d] == (caller, threading.current_thread().name) for d in range(10, 71))
    pool_ids = {where[d][0] for d in range(0, 10)}
    assert len(pool_ids) == 1 and caller not in pool_ids
    assert {where[d][1] for d in range(0, 10)} == {POOL}
    assert len({ident for ident, _ in where.values()}) == 2
    # The pool thread takes total_depth from the task (61) and keeps counting from there (engine-semantics §13.1).
    assert [t.reentrant_depth for t in rec.tasks] == list(range(71))
    assert xg == [71.0]
    assert inner == {d: [float(d + 1)] for d in range(70)}


def test_deep_reentrant_second_run_reuses_idle_pool_thread():
    """A second Nest(70) run with the pool idle creates no new pool thread."""
    where1, _, _ = _run_nest(70)
    _wait_pool_idle()
    before = _threads_named(POOL)
    assert before, "the first run made a pool thread"
    where2, inner2, xg2 = _run_nest(70)
    after = _threads_named(POOL)
    assert after == before
    assert {where2[d][0] for d in range(10)} <= {t.ident for t in before}
    assert len({where2[d][0] for d in range(10)}) == 1
    assert xg2 == [71.0] and inner2[0] == [1.0]


def test_reentrant_on_device_worker():
    """Reentrant depth 3 on pt_autograd_0: all levels and inner nodes run on that worker."""
    # Inner CPU nodes too: on a worker the reentrant task's CPU queue is the worker's own queue.
    levels: dict[int, str] = {}
    inner_nodes: list[tuple[int, str, str]] = []
    inner_grads: dict[int, list[float]] = {}

    class DevNest(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a, depth):
            ctx.depth = depth
            return a * (depth + 1)

        @staticmethod
        def backward(ctx, g):
            levels[ctx.depth] = threading.current_thread().name
            if ctx.depth > 0:
                with engine.enable_grad():
                    q = engine.ones(2, dtype=engine.float64, requires_grad=True)  # cpu leaf
                    out = DevNest.apply(q.to("cuda:0"), ctx.depth - 1).cpu().sum()
                    hook_every_node([out.grad_fn], lambda n, d=ctx.depth - 1: inner_nodes.append(
                        (d, n.name(), threading.current_thread().name)))
                    out.backward()
                    inner_grads[ctx.depth - 1] = q.grad.tolist()
            return g * (ctx.depth + 1), None

    x = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    outer: list[tuple[str, str]] = []
    loss = DevNest.apply(x.to("cuda:0"), 3).cpu().sum()
    hook_every_node([loss.grad_fn], lambda n: outer.append((n.name(), threading.current_thread().name)))
    rec = GraphTaskRecorder()
    with engine.add_observer(rec):
        loss.backward()
    caller = threading.current_thread().name
    assert levels == {3: "pt_autograd_0", 2: "pt_autograd_0", 1: "pt_autograd_0", 0: "pt_autograd_0"}
    assert outer == [("SumBackward0", caller), ("ToCopyBackward0", caller), ("DevNestBackward", "pt_autograd_0"),
                     ("ToCopyBackward0", "pt_autograd_0"), ("torch::autograd::AccumulateGrad", caller)]
    # Each inner graph: Sum and ToCopy (cpu), DevNest and ToCopy (cuda:0), Acc(q) (cpu) — all on the worker.
    assert sorted(inner_nodes) == sorted(
        (d, name, "pt_autograd_0") for d in range(3) for name in
        ("SumBackward0", "ToCopyBackward0", "DevNestBackward", "ToCopyBackward0", "torch::autograd::AccumulateGrad"))
    assert [t.reentrant_depth for t in rec.tasks] == [0, 1, 2, 3]
    assert x.grad.tolist() == [4.0, 4.0]
    assert inner_grads == {2: [3.0, 3.0], 1: [2.0, 2.0], 0: [1.0, 1.0]}


# -- errors across threads (engine-semantics §11.1, §11.2, §12.2) ------------------------------------------------------
def _check_next_backwards_work(x_values: list[float]) -> None:
    """After an error: a CPU-only backward and a multi-device one both work and give exact grads."""
    x = engine.tensor(x_values, dtype=engine.float64, requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0] * len(x_values)
    x.grad = None
    ran: list[tuple[str, str]] = []
    loss = (x.to("cuda:0") * 2).to("cuda:1").cpu().sum()
    hook_every_node([loss.grad_fn], lambda n: ran.append((n.name(), threading.current_thread().name)))
    loss.backward()
    assert x.grad.tolist() == [2.0] * len(x_values)
    assert ("MulBackward0", "pt_autograd_0") in ran


def test_error_in_custom_backward_on_worker():
    """A custom backward raising on pt_autograd_0 reaches the caller intact; nothing else runs."""
    # Same type, message and attributes; the sibling task on the same queue and everything below never
    # run; x.grad stays None; the workers survive and later backwards work.
    workers_before = _threads_named("pt_autograd_0")
    raised_on: list[str] = []

    class BadDev(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            raised_on.append(threading.current_thread().name)
            raise Boom("backward failed on the worker", tag="bad-dev")

    base = gs()
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    b = x.to("cuda:0")       # 0 ToCopyBackward0 cuda:0
    e = b.exp()              # 1 ExpBackward0    cuda:0
    p = BadDev.apply(b)      # 2 BadDevBackward  cuda:0
    s = e + p                # 3 AddBackward0    cuda:0: pushes Exp#1 then BadDev#2; BadDev#2 pops first
    loss = s.cpu().sum()     # 4 ToCopyBackward0 cpu, 5 SumBackward0 cpu
    log: list[tuple[str, str]] = []
    hook_every_node([loss.grad_fn], lambda n: log.append((_label(n, base), threading.current_thread().name)))
    with pytest.raises(Boom) as ei:
        loss.backward()
    assert type(ei.value) is Boom
    assert str(ei.value) == "backward failed on the worker" and ei.value.tag == "bad-dev"
    caller = threading.current_thread().name
    assert log == [("SumBackward0#5", caller), ("ToCopyBackward0#4", caller),
                   ("AddBackward0#3", "pt_autograd_0"), ("BadDevBackward#2", "pt_autograd_0")]
    assert raised_on == ["pt_autograd_0"]
    assert x.grad is None
    _check_next_backwards_work([1.0, 2.0])
    assert len(log) == 4  # nothing of the failed graph ran later either
    if workers_before:
        assert _threads_named("pt_autograd_0") == workers_before
    assert len(_threads_named("pt_autograd_0")) == 1


def test_error_in_tensor_hook_on_worker():
    """A tensor hook raising on pt_autograd_1 reaches the caller intact; nothing else runs."""
    hook_threads: list[str] = []

    def bad_hook(g):
        hook_threads.append(threading.current_thread().name)
        raise Boom("hook failed on pt_autograd_1", tag="hook")

    base = gs()
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    a = x.to("cuda:1")       # 0 ToCopyBackward0 cuda:1
    b = a.exp()              # 1 ExpBackward0    cuda:1
    b.register_hook(bad_hook)
    loss = b.cpu().sum()     # 2 ToCopyBackward0 cpu, 3 SumBackward0 cpu
    log: list[tuple[str, str]] = []
    hook_every_node([loss.grad_fn], lambda n: log.append((_label(n, base), threading.current_thread().name)))
    with pytest.raises(Boom) as ei:
        loss.backward()
    assert str(ei.value) == "hook failed on pt_autograd_1" and ei.value.tag == "hook"
    caller = threading.current_thread().name
    assert hook_threads == ["pt_autograd_1"]
    assert log == [("SumBackward0#3", caller), ("ToCopyBackward0#2", caller)]
    assert x.grad is None
    _check_next_backwards_work([4.0, 5.0, 6.0])
    assert len(log) == 2


def test_error_in_cpu_node_while_device_task_outstanding():
    """A CPU node's error returns at once with a cuda:0 task outstanding; its routed task never runs."""
    # When the device task finishes it routes Acc(w) onto the caller's queue; the next backward pops
    # and discards it, so w.grad holds only the new grad.
    release = threading.Event()
    slow_started = threading.Event()
    slow_done = threading.Event()
    stale_pushed = threading.Event()

    class Slow(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.to("cuda:0") * 1

        @staticmethod
        def backward(ctx, g):
            slow_started.set()
            release.wait(60)
            slow_done.set()
            return g.cpu()

    class BadCPU(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            assert slow_started.wait(60)
            raise Boom("cpu node failed", tag="cpu")

    base = gs()
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    w = engine.tensor([3.0, 4.0], requires_grad=True)
    r = BadCPU.apply(x)      # 0 BadCPUBackward  cpu
    p = Slow.apply(w)        # 1 SlowBackward    cuda:0 (its child Acc(w) is on cpu)
    q = p.cpu()              # 2 ToCopyBackward0 cpu
    loss = (q + r).sum()     # 3 AddBackward0, 4 SumBackward0 (cpu)
    acc_w = p.grad_fn.next_functions[0][0]
    log: list[tuple[str, str]] = []
    hook_every_node([loss.grad_fn], lambda n: log.append((_label(n, base), threading.current_thread().name)))
    acc_w_inputs: list[list[float]] = []
    acc_w.register_prehook(lambda go: acc_w_inputs.append(go[0].tolist()))

    class WatchPush:
        def task_pushed(self, graph_task, task, queue):
            if task.fn is acc_w:
                stale_pushed.set()

    caller = threading.current_thread().name
    try:
        with engine.add_observer(WatchPush()):
            with pytest.raises(Boom) as ei:
                loss.backward()
            assert str(ei.value) == "cpu node failed"
            assert slow_started.is_set() and not slow_done.is_set()  # the device task is still running
            # the two threads' entries interleave in no fixed way; each thread's own order is fixed
            assert [lab for lab, th in log if th == caller] == [
                "SumBackward0#4", "AddBackward0#3", "ToCopyBackward0#2", "BadCPUBackward#0"]
            assert [lab for lab, th in log if th != caller] == ["SlowBackward#1"]
            assert [th for lab, th in log if th != caller] == ["pt_autograd_0"]
            release.set()
            assert stale_pushed.wait(60), "the worker routes Slow's output after the error"
    finally:
        release.set()
    assert x.grad is None and w.grad is None
    assert acc_w_inputs == []
    (w * 5).sum().backward()  # pops the stale Acc(w) task first (seq 2**64-1) and must discard it
    assert w.grad.tolist() == [5.0, 5.0]
    assert acc_w_inputs == [[5.0, 5.0]]  # the same AccumulateGrad ran once, for the new graph only
    assert log[5:] == [("Acc", caller)]
    _check_next_backwards_work([1.0])


# -- many threads at once ---------------------------------------------------------------------------------------
def _hammer(body, n_threads: int = 32, n_iter: int = 50) -> dict[int, list]:
    """Run `body(thread_no, iteration)` n_iter times on each of n_threads threads started together; returns
    each thread's list of body results. Fails on any exception or on a thread still running after 60 s."""
    errors: list[BaseException] = []
    results: dict[int, list] = {}
    start = threading.Barrier(n_threads)

    def target(tno):
        try:
            start.wait()
            results[tno] = [body(tno, i) for i in range(n_iter)]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not [t for t in threads if t.is_alive()], "a backward hung"
    assert errors == []
    assert sorted(results) == list(range(n_threads))
    return results


def _data(tno: int, i: int) -> np.ndarray:
    return np.array([0.25 * (tno % 7) - 0.5, 0.1 * i - 2.0, 1.0 + 0.01 * tno])


def test_stress_cpu_only():
    """32 threads × 50 CPU backwards: exact grads, no errors, per-thread seq counters."""
    # Each thread's counter starts at 0 and grows by 3 per iteration (Exp, Mul, Sum).

    def body(tno, i):
        xs = _data(tno, i)
        x = engine.tensor(xs, requires_grad=True)
        before = gs()
        e = x.exp()
        loss = (e * x).sum()
        first = e.grad_fn._sequence_nr()
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp(xs) * (1 + xs), rtol=1e-12)
        return before, first, gs()

    for per_thread in _hammer(body).values():
        assert per_thread == [(3 * i, 3 * i, 3 * i + 3) for i in range(50)]


def test_stress_through_two_devices():
    """32 threads × 50 backwards via cuda:0/cuda:1: exact grads, no errors, per-thread counters."""
    # 7 nodes per iteration, none created in backward (create_graph=False).
    ran_on: set[str] = set()

    def body(tno, i):
        xs = _data(tno, i)
        x = engine.tensor(xs, requires_grad=True)
        before = gs()
        a = x.to("cuda:0")
        first = a.grad_fn._sequence_nr()
        y = a.exp().to("cuda:1") * x.to("cuda:1")
        loss = y.cpu().sum()
        if i == 0:
            y.grad_fn.register_prehook(lambda go: ran_on.add(threading.current_thread().name))
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp(xs) * (1 + xs), rtol=1e-12)
        return before, first, gs()

    for per_thread in _hammer(body).values():
        assert per_thread == [(7 * i, 7 * i, 7 * i + 7) for i in range(50)]
    assert ran_on == {"pt_autograd_1"}


# -- seq_nr of nodes created on a worker (create_graph) -----------------------------------------------------
def test_create_graph_on_worker_uses_worker_counter():
    """create_graph nodes made on pt_autograd_0 take the worker's counter and thread id."""
    # Nodes made while MulBackward0 runs on the worker: 2 MulBackward0, the buffer's AddBackward0, then
    # ToCopyBackward0 — seqs s..s+3 of the worker's counter; the caller's counter does not move.
    seen: dict = {}

    def case():
        x = engine.tensor([1.5, -2.0], dtype=engine.float64, requires_grad=True)
        xc = x.to("cuda:0")
        y = (xc * xc).sum()
        mul = y.grad_fn.next_functions[0][0]
        assert mul.name() == "MulBackward0"

        def pre(go):
            seen["ident"] = threading.get_ident()
            seen["name"] = threading.current_thread().name
            seen["seq"] = gs()

        mul.register_prehook(pre)
        caller_before = gs()
        (g,) = engine.autograd.grad(y, x, create_graph=True)
        caller_after = gs()
        copy = g.grad_fn
        add = copy.next_functions[0][0]
        muls = [n for n, _ in add.next_functions]
        info = {
            "copy": (copy.name(), copy._sequence_nr(), copy.thread_id),
            "add": (add.name(), add._sequence_nr(), add.thread_id),
            "muls": sorted((m.name(), m._sequence_nr(), m.thread_id) for m in muls),
        }
        g.sum().backward()
        return caller_before, caller_after, g.tolist(), g.device, info, x.grad.tolist(), threading.get_ident()

    caller_before, caller_after, gval, gdev, info, xgrad, caller_ident = run_in_thread(case)
    s, worker = seen["seq"], seen["ident"]
    assert seen["name"] == "pt_autograd_0" and worker != caller_ident
    assert caller_after == caller_before
    assert info["muls"] == [("MulBackward0", s, worker), ("MulBackward0", s + 1, worker)]
    assert info["add"] == ("AddBackward0", s + 2, worker)
    assert info["copy"] == ("ToCopyBackward0", s + 3, worker)
    assert gval == [3.0, -4.0] and gdev == "cpu"
    assert xgrad == [2.0, 2.0]


# -- observers see the threads -------------------------------------------------------------------------------
def test_observer_sees_tasks_on_their_threads_and_queues():
    """Observers see each task popped on its own thread/queue and pushed by its parent's thread."""

    class Seen:
        def __init__(self, nodes):
            self.nodes = nodes
            self.popped: list[tuple[str, tuple[str, str]]] = []
            self.pushed: list[tuple[str, tuple[str, str]]] = []

        # no asserts in here: they would run inside the engine's queues, on its threads
        def task_popped(self, graph_task, task, queue):
            if task.fn in self.nodes:
                self.popped.append((self.nodes[task.fn], (threading.current_thread().name, queue.name)))

        def task_pushed(self, graph_task, task, queue):
            if task.fn in self.nodes:
                self.pushed.append((self.nodes[task.fn], (threading.current_thread().name, queue.name)))

    def case():
        x, loss, base = _four_hop_graph()
        nodes: dict = {}
        stack = [loss.grad_fn]
        while stack:
            n = stack.pop()
            if n is not None and n not in nodes:
                nodes[n] = _label(n, base)
                stack.extend(c for c, _ in n.next_functions)
        seen = Seen(nodes)
        with engine.add_observer(seen):
            loss.backward()
        me = threading.current_thread()
        return seen, me.name, "cpu:%d" % me.ident

    seen, caller, cpu_q = run_in_thread(case)
    w0, w1 = ("pt_autograd_0", "cuda:0"), ("pt_autograd_1", "cuda:1")
    on_caller = (caller, cpu_q)
    assert len(seen.popped) == len(seen.pushed) == 13  # each node pushed once and popped once
    assert dict(seen.popped) == {
        "SumBackward0#11": on_caller, "MulBackward0#10": on_caller, "ToCopyBackward0#9": on_caller,
        "AddBackward0#8": w1, "SinBackward0#7": w1, "ExpBackward0#6": w1, "ToCopyBackward0#5": w1,
        "MulBackward0#4": w0, "CosBackward0#3": w0, "SinBackward0#2": w0, "ToCopyBackward0#1": w0,
        "ExpBackward0#0": on_caller, "Acc": on_caller,
    }
    # pushed by the thread of the parent that made it ready, onto the queue of the node's own device
    assert dict(seen.pushed) == {
        "SumBackward0#11": on_caller, "MulBackward0#10": on_caller, "ToCopyBackward0#9": on_caller,
        "AddBackward0#8": (caller, "cuda:1"), "SinBackward0#7": w1, "ExpBackward0#6": w1, "ToCopyBackward0#5": w1,
        "MulBackward0#4": ("pt_autograd_1", "cuda:0"), "CosBackward0#3": w0, "SinBackward0#2": w0,
        "ToCopyBackward0#1": w0, "ExpBackward0#0": ("pt_autograd_0", cpu_q), "Acc": on_caller,
    }


# -- shutdown ----------------------------------------------------------------------------------------------------
def test_process_exits_cleanly_after_workers_and_pool_were_used():
    """A process that used cuda:0, cuda:1 and a 70-deep reentrant backward exits with code 0 (a hang fails at the
    timeout, a guard far beyond the second a healthy run takes on a busy machine)."""
    script = textwrap.dedent("""
        import threading
        from agdb import engine

        x = engine.tensor([1.0, 2.0], requires_grad=True)
        (x.to("cuda:0").exp().to("cuda:1").sin().cpu() * x).sum().backward()

        class Nest(engine.autograd.Function):
            @staticmethod
            def forward(ctx, a, depth):
                ctx.depth = depth
                return a * 1

            @staticmethod
            def backward(ctx, g):
                if ctx.depth > 0:
                    with engine.enable_grad():
                        q = engine.ones(1, requires_grad=True)
                        Nest.apply(q, ctx.depth - 1).sum().backward()
                return g, None

        q = engine.ones(1, requires_grad=True)
        Nest.apply(q, 70).sum().backward()
        names = sorted({t.name for t in threading.enumerate()})
        print("threads", names)
        print("grad", q.grad.tolist())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=str(pathlib.Path(__file__).resolve().parents[2]))
    assert proc.returncode == 0, proc.stderr
    assert "grad [1.0]" in proc.stdout
    assert "'pt_autograd_0'" in proc.stdout and "'pt_autograd_1'" in proc.stdout and f"'{POOL}'" in proc.stdout
    assert "Traceback" not in proc.stderr
