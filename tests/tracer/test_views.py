"""forward_map, breakpoints, search, node_details and anomaly forward stacks. Expected values are derived by
hand or read from the raw events; programs run in a fresh thread, so seq_nrs start at 0."""
from __future__ import annotations

import threading
import warnings

import pytest

from agdb import engine as torch
from agdb import tracer
from agdb.tracer.replay.breakpoints import Breakpoint, hits, next_hit, parse
from agdb.tracer.replay.forward_map import ForwardMap
from agdb.tracer.replay.node_details import node_details
from agdb.tracer.replay.search import find_nodes
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import UINT64_MAX
from agdb.tracer.store.tracefile import load, save
from tests.engine.helpers import run_in_thread

ACC = "torch::autograd::AccumulateGrad"


def recorded(body):
    """Run `body()` under tracer.record() in a fresh thread; return the trace."""
    def run():
        with tracer.record() as rec:
            body()
        return rec.trace
    return run_in_thread(run)


def named(trace, name):
    """Node indices with this name, from the raw NodeCreated/SeqNrBumped events."""
    found = {e.node for e in trace if isinstance(e, ev.NodeCreated) and e.name == name}
    found |= {e.node for e in trace if isinstance(e, ev.SeqNrBumped) and e.node_name == name}
    return sorted(found)


def steps(trace, kind, **fields):
    """Steps of raw events of `kind` whose attributes equal `fields`."""
    return [e.step for e in trace if isinstance(e, kind) and all(getattr(e, k) == v for k, v in fields.items())]


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * 2

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        with torch.enable_grad():
            return g * a.exp()  # makes ExpBackward0 and MulBackward0 while the backward runs


class Boom(Double):
    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("boom")


@pytest.fixture(scope="module")
def mul_sum():
    """(x*w).sum().backward() with a hook on x*w: MulBackward0 seq 0, SumBackward0 seq 1, two AccumulateGrads."""
    def body():
        x, w = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0], requires_grad=True)
        y = x * w
        y.register_hook(lambda g: g * 1)
        y.sum().backward()
    return recorded(body)


@pytest.fixture(scope="module")
def boom():
    """Boom.apply(x).exp().sum().backward(), whose BoomBackward raises (caught)."""
    def body():
        with pytest.raises(RuntimeError, match="boom"):
            Boom.apply(torch.tensor([1.0, 2.0], requires_grad=True)).exp().sum().backward()
    return recorded(body)


# -- forward_map -----------------------------------------------------------------------------------------------
def test_rows_follow_creation_order(mul_sum):
    """Rows list ops in the order their nodes first appear (op, seq_nr, source); row_of inverts it."""
    fm = ForwardMap(mul_sum)
    first = {}
    for e in mul_sum:
        if isinstance(e, (ev.SeqNrBumped, ev.NodeCreated)):
            first.setdefault(e.node, e.step)
    ops = [fm.op(r) for r in range(len(fm))]
    assert [o.node for o in ops] == sorted(first, key=first.get)
    assert [o.op for o in ops] == ["mul", "leaf", "leaf", "sum"]
    assert [o.seq_nr for o in ops] == [0, UINT64_MAX, UINT64_MAX, 1]
    assert [o.step for o in ops] == sorted(first.values())
    assert "y = x * w" in ops[0].source
    assert len(fm) == mul_sum.num_nodes
    assert [fm.row_of(o.node) for o in ops] == list(range(len(fm)))  # row_of inverts the row order
    assert [fm.backward_nodes(r) for r in range(len(fm))] == [(o.node,) for o in ops]


def test_ordinary_ops_only_flag_accumulate(mul_sum):
    """A plain forward + backward flags only the AccumulateGrads (accumulate), nothing else."""
    fm = ForwardMap(mul_sum)
    for node in range(mul_sum.num_nodes):
        expected = ("accumulate",) if mul_sum.node(node).name == ACC else ()
        assert fm.flags_of(node) == expected, mul_sum.node(node).name


def test_engine_flag_on_multi_root_graph_root():
    """backward([a.sum(), b.sum()]) makes a GraphRoot that takes seq 2 and is flagged engine only."""
    def body():
        a, b = torch.tensor([1.0], requires_grad=True), torch.tensor([2.0], requires_grad=True)
        torch.autograd.backward([a.sum(), b.sum()])
    trace = recorded(body)
    fm = ForwardMap(trace)
    (root,) = named(trace, "GraphRoot")
    assert trace.node(root).seq_nr == 2
    assert fm.flags_of(root) == ("engine",)
    assert all(fm.flags_of(n) == () for n in named(trace, "SumBackward0"))


def test_in_backward_for_create_graph_nodes():
    """grad((x*x).sum(), x, create_graph=True) makes MulBackward0 x2 and AddBackward0 in backward
    (engine-semantics §1.7)."""
    def body():
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        torch.autograd.grad((x * x).sum(), x, create_graph=True)  # forward: Mul seq 0, Sum seq 1
        (x * 3).sum()  # after the backward: seq 5 and 6, not in_backward
    trace = recorded(body)
    fm = ForwardMap(trace)
    flagged = {n for n in range(trace.num_nodes) if "in_backward" in fm.flags_of(n)}
    assert sorted(trace.node(n).name for n in flagged) == ["AddBackward0", "MulBackward0", "MulBackward0"]
    assert sorted(trace.node(n).seq_nr for n in flagged) == [2, 3, 4]


def test_in_backward_for_nodes_made_in_function_backward():
    """Ops run under enable_grad inside a custom Function's backward are in_backward; the forward nodes are not."""
    def body():
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        Double.apply(x).sum().backward()
    trace = recorded(body)
    (start,) = steps(trace, ev.GraphTaskStarted)
    (end,) = steps(trace, ev.GraphTaskFinished)
    inside = {e.node for e in trace if isinstance(e, ev.SeqNrBumped) and start < e.step < end}
    assert sorted(trace.node(n).name for n in inside) == ["ExpBackward0", "MulBackward0"]
    fm = ForwardMap(trace)
    assert {n for n in range(trace.num_nodes) if "in_backward" in fm.flags_of(n)} == inside


def test_no_graph_for_function_under_no_grad():
    """A custom Function applied under no_grad still takes seq 0 (engine-semantics §1.4) and is flagged no_graph."""
    def body():
        x = torch.tensor([1.0], requires_grad=True)
        with torch.no_grad():
            Double.apply(x)
        Double.apply(x).sum()
    trace = recorded(body)
    fm = ForwardMap(trace)
    lone, joined = named(trace, "DoubleBackward")
    assert (trace.node(lone).seq_nr, trace.node(joined).seq_nr) == (0, 1)
    assert fm.flags_of(lone) == ("no_graph",)
    assert fm.flags_of(joined) == ()


def test_other_thread_when_two_threads_take_seq_0():
    """Two live threads each make MulBackward0 with seq 0: both flagged other_thread, AccumulateGrads not."""
    barrier = threading.Barrier(2)  # both threads alive at once, so their idents differ

    def worker():
        barrier.wait()
        (torch.tensor([1.0], requires_grad=True) * 2).sum().backward()  # MulBackward0 takes seq 0 of this thread
        barrier.wait()

    def body():
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    trace = recorded(body)
    fm = ForwardMap(trace)
    muls = named(trace, "MulBackward0")
    assert len(muls) == 2 and {trace.node(n).seq_nr for n in muls} == {0}
    assert len({fm.op(fm.row_of(n)).thread for n in muls}) == 2
    assert all(fm.flags_of(n) == ("other_thread",) for n in muls)
    assert all(fm.flags_of(n) == ("accumulate",) for n in named(trace, ACC))


def test_threads_run_one_after_the_other_are_told_apart_even_when_python_reuses_their_ident():
    """Two short-lived threads, the second started after the first ended (CPython then often hands it the
    same ident): each is its own thread row with its own name, each node names the thread that made it,
    both seq 0 nodes are flagged other_thread, and each thread's CPU queue is its own."""
    idents = []

    def worker():
        idents.append(threading.get_ident())
        (torch.tensor([1.0], requires_grad=True) * 2).sum().backward()  # MulBackward0 takes seq 0 of this thread

    def body():
        for name in ("first", "second"):
            t = threading.Thread(target=worker, name=name)
            t.start()
            t.join()
    trace = recorded(body)
    names = [name for _, name in trace.threads]
    assert names.count("first") == 1 and names.count("second") == 1, trace.threads
    muls = named(trace, "MulBackward0")
    assert sorted(trace.threads[trace.node(n).thread][1] for n in muls) == ["first", "second"]
    fm = ForwardMap(trace)
    assert all(fm.flags_of(n) == ("other_thread",) for n in muls)
    assert sorted(trace.queue_label(q) for q in trace.queues) == ["cpu (first)", "cpu (second)"], idents


def test_engine_flag_on_identity_for_unused_input():
    """grad(y, [w, unused], allow_unused=True) makes an Identity that takes a seq_nr: flagged engine."""
    def body():
        w, unused = torch.tensor([1.0], requires_grad=True), torch.tensor([1.0], requires_grad=True)
        torch.autograd.grad((w * 2).sum(), [w, unused], allow_unused=True)
    trace = recorded(body)
    (identity,) = named(trace, "torch::autograd::Identity")
    assert "engine" in ForwardMap(trace).flags_of(identity)


# -- breakpoints -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, kind, value", [
    ("node MulBackward0", "node", "MulBackward0"), ("MulBackward0", "node", "MulBackward0"),
    ("node Sum Backward", "node", "Sum Backward"), ("seq 12", "seq_nr", "12"), ("seq_nr 3", "seq_nr", "3"),
    ("SEQ 4", "seq_nr", "4"), ("push", "push", ""), ("push SumBackward0", "push", "SumBackward0"),
    ("nan", "nan", ""), ("  NaN ", "nan", ""), ("error", "error", ""),
])
def test_parse_accepted_forms(text, kind, value):
    """Each documented form parses to its kind and value; str() gives the canonical text back."""
    bp = parse(text)
    assert bp == Breakpoint(kind, value)
    assert str(bp) == f"{kind} {value}".strip()


ALL_FORMS = r"node NAME.*seq N.*push \[NAME\].*nan.*error"


@pytest.mark.parametrize("text, message", [
    ("", ALL_FORMS), ("   ", ALL_FORMS), ("node", ALL_FORMS), ("nan extra", ALL_FORMS), ("error now", ALL_FORMS),
    ("seq x", "seq 12"), ("seq", "seq 12"), ("seq -1", "seq 12"), ("seq 1 2", "seq 12"),
])
def test_parse_bad_input(text, message):
    """Bad text raises ValueError listing every accepted form (a bad `seq` names the `seq 12` form)."""
    with pytest.raises(ValueError, match=message):
        parse(text)


def test_hits_node_by_name(mul_sum):
    """node NAME stops at each NodeStarted of that name; AccumulateGrad matches torch::autograd::AccumulateGrad."""
    assert hits(mul_sum, parse("MulBackward0")).tolist() == steps(mul_sum, ev.NodeStarted, node_name="MulBackward0")
    acc = steps(mul_sum, ev.NodeStarted, node_name=ACC)
    assert len(acc) == 2
    assert hits(mul_sum, parse("node AccumulateGrad")).tolist() == acc
    assert hits(mul_sum, parse(f"node {ACC}")).tolist() == acc
    assert hits(mul_sum, parse("node Mul")).tolist() == []


def test_hits_seq(mul_sum):
    """seq 1 stops where SumBackward0 takes seq 1 (its bump) and where it starts; an unused seq never stops."""
    (bump,) = [e for e in mul_sum if isinstance(e, ev.SeqNrBumped) and e.old == 1]
    assert bump.node_name == "SumBackward0"
    expected = [bump.step] + steps(mul_sum, ev.NodeStarted, node=bump.node)
    assert len(expected) == 2
    assert hits(mul_sum, parse("seq 1")).tolist() == expected
    assert hits(mul_sum, parse("seq 99")).tolist() == []


def test_hits_push(mul_sum):
    """push stops at every TaskPushed; push NAME only at that node's pushes."""
    assert hits(mul_sum, parse("push")).tolist() == steps(mul_sum, ev.TaskPushed)
    sums = steps(mul_sum, ev.TaskPushed, node_name="SumBackward0")
    assert len(sums) == 1
    assert hits(mul_sum, parse("push SumBackward0")).tolist() == sums
    assert hits(mul_sum, parse("push AccumulateGrad")).tolist() == steps(mul_sum, ev.TaskPushed, node_name=ACC)


def test_hits_nan(mul_sum):
    """nan stops at each event holding a grad with a NaN: DivBackward0's outputs and what AccumulateGrad gets."""
    def body():
        x = torch.tensor([0.0], requires_grad=True)
        (x / x).sum().backward()  # at 0: d/dx (x/x) is 1/x = inf and -x/x**2 = nan; x.grad = inf + nan = nan
    trace = recorded(body)

    def has_nan(e):
        grads = getattr(e, "inputs", ()) + getattr(e, "outputs", ()) + (getattr(e, "grad", None),)
        return any(g is not None and g.has_nan for g in grads)
    expected = [e.step for e in trace if has_nan(e)]
    assert hits(trace, parse("nan")).tolist() == expected
    div_finish = steps(trace, ev.NodeFinished, node_name="DivBackward0")
    acc_start = steps(trace, ev.NodeStarted, node_name=ACC)
    assert set(div_finish + acc_start) <= set(expected)
    assert hits(mul_sum, parse("nan")).tolist() == []


def test_hits_error(boom, mul_sum):
    """error stops at the ErrorRaised of a custom Function whose backward raises; a clean run never stops."""
    assert hits(boom, parse("error")).tolist() == steps(boom, ev.ErrorRaised) and len(steps(boom, ev.ErrorRaised)) == 1
    assert hits(mul_sum, parse("error")).tolist() == []


def test_next_hit_both_ways(mul_sum):
    """next_hit picks the nearest hit strictly after (or before) a step among breakpoints, else None."""
    (s,) = steps(mul_sum, ev.NodeStarted, node_name="SumBackward0")
    (m,) = steps(mul_sum, ev.NodeStarted, node_name="MulBackward0")
    assert s < m
    bps = [parse("MulBackward0"), parse("SumBackward0")]
    assert next_hit(mul_sum, bps, -1) == (s, bps[1])
    assert next_hit(mul_sum, bps, s) == (m, bps[0])
    assert next_hit(mul_sum, bps, m) is None
    assert next_hit(mul_sum, bps, len(mul_sum), -1) == (m, bps[0])
    assert next_hit(mul_sum, bps, m, -1) == (s, bps[1])
    assert next_hit(mul_sum, bps, s, -1) is None
    assert next_hit(mul_sum, [], 0) is None


def test_huge_seq_matches_nothing(mul_sum):
    """seq 2**63 is no node's seq_nr, so it stops nowhere and finds no node."""
    assert hits(mul_sum, parse(f"seq {2**63}")).tolist() == []
    assert find_nodes(mul_sum, str(2**63)).tolist() == []


# -- search ----------------------------------------------------------------------------------------------------
def test_find_nodes():
    """Search by name substring ignoring case, by `12` / `seq 12`; empty or unmatched queries find nothing."""
    def body():
        y = torch.tensor([1.0], requires_grad=True)
        for _ in range(13):
            y = y * 1.5  # MulBackward0 with seq 0..12
        y.sum()
    trace = recorded(body)
    (twelve,) = [e.node for e in trace if isinstance(e, ev.SeqNrBumped) and e.old == 12]
    for query in ("12", " 12 ", "seq 12", "SEQ 12", "seq_nr 12"):
        assert find_nodes(trace, query).tolist() == [twelve], query
    assert find_nodes(trace, "mULbACK").tolist() == named(trace, "MulBackward0")
    assert len(named(trace, "MulBackward0")) == 13
    assert find_nodes(trace, "accumulate").tolist() == named(trace, ACC)
    assert find_nodes(trace, "").tolist() == []
    assert find_nodes(trace, "   ").tolist() == []
    assert find_nodes(trace, "nosuchnode").tolist() == []
    assert find_nodes(trace, "99").tolist() == []


def test_superscript_digit_is_not_a_seq(mul_sum):
    """`²` is text, not a seq_nr: searching it finds nothing and `seq ²` is refused at parse time."""
    assert find_nodes(mul_sum, "²").tolist() == []
    with pytest.raises(ValueError, match="seq 12"):
        parse("seq ²")


# -- node_details ----------------------------------------------------------------------------------------------
def test_users_and_slots():
    """users lists (parent, slot) for each edge into the node: x*x uses x's AccumulateGrad in slots 0 and 1."""
    def body():
        x = torch.tensor([1.0], requires_grad=True)
        e = (x * x).exp()
        (e.sin() + e.cos()).sum()
    trace = recorded(body)
    (acc,), (mul,), (exp,) = named(trace, ACC), named(trace, "MulBackward0"), named(trace, "ExpBackward0")
    (sin,), (cos,) = named(trace, "SinBackward0"), named(trace, "CosBackward0")
    last = len(trace) - 1
    assert node_details(trace, acc, last).users == ((mul, 0), (mul, 1))
    assert node_details(trace, mul, last).users == ((exp, 0),)
    assert sorted(node_details(trace, exp, last).users) == sorted([(sin, 0), (cos, 0)])


def test_events_hooks_and_last_run(mul_sum):
    """Events, hooks and last_run of MulBackward0 are its raw events up to the step, no later."""
    (mul,) = named(mul_sum, "MulBackward0")
    (start,) = steps(mul_sum, ev.NodeStarted, node=mul)
    (finish,) = steps(mul_sum, ev.NodeFinished, node=mul)
    (hook,) = [e for e in mul_sum if isinstance(e, ev.HookRan) and e.node == mul]
    assert hook.hook_kind == "tensor_pre" and hook.step < start
    mine = [e for e in mul_sum if getattr(e, "node", None) == mul]
    for step in (hook.step - 1, start, len(mul_sum) - 1):
        d = node_details(mul_sum, mul, step)
        assert d.info == mul_sum.node(mul)
        assert list(d.events) == [e for e in mine if e.step <= step]
        assert d.hooks == ((hook,) if step >= hook.step else ())
        assert d.errors == ()
    assert node_details(mul_sum, mul, start).last_run == (mul_sum[start], None)
    started, finished = node_details(mul_sum, mul, len(mul_sum) - 1).last_run
    assert (started, finished) == (mul_sum[start], mul_sum[finish])
    assert started.inputs[0].preview == (1.0, 1.0)  # d(sum)/dy, through the identity-like hook
    assert [o.preview for o in finished.outputs] == [(3.0, 4.0), (1.0, 2.0)]  # g*w for x, g*x for w


def test_error_in_details(boom):
    """The node whose backward raised lists the ErrorRaised, and its last run has no NodeFinished."""
    (node,) = named(boom, "BoomBackward")
    d = node_details(boom, node, len(boom) - 1)
    raw = [e for e in boom if isinstance(e, ev.ErrorRaised)]
    assert d.errors == tuple(raw) and raw[0].message == "boom"
    assert d.last_run[0] is not None and d.last_run[1] is None


# -- anomaly-mode forward stacks -------------------------------------------------------------------------------
def test_forward_stack_survives_save_load(tmp_path):
    """A node made under detect_anomaly keeps its forward traceback through save/load; one made outside has ''."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with tracer.record() as rec, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            y = x.exp()  # the line the stack must show
        y.sum()
    trace = rec.trace
    (exp,), (total,) = named(trace, "ExpBackward0"), named(trace, "SumBackward0")
    stack = trace.node(exp).forward_stack
    assert __file__ in stack and "y = x.exp()  # the line the stack must show" in stack
    assert trace.node(total).forward_stack == ""
    save(trace, tmp_path / "t.agdb")
    loaded = load(tmp_path / "t.agdb")
    assert [loaded.node(i).forward_stack for i in range(loaded.num_nodes)] == \
        [trace.node(i).forward_stack for i in range(trace.num_nodes)]

    assert loaded.node(total).forward_stack == ""


def test_same_program_twice_gives_the_same_trace():
    """Graph tasks are numbered per trace (1, 2, ...), so a second recording in one process matches the first."""
    from agdb.app.demo import record_example

    first, second = list(record_example()), list(record_example())
    assert first == second
    started = [e.graph_task for e in first if isinstance(e, ev.GraphTaskStarted)]
    assert started == list(range(1, len(started) + 1))
