"""The PyTorch bridge on real torch programs: the recorded order is the order the script observes, agdb's model of
the engine predicts it (no divergence), and seq_nr culprits point at the right lines."""
from __future__ import annotations

import inspect
import weakref

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.recording.culprits import of_trace  # noqa: E402
from agdb.tracer.sources import torch as torch_bridge  # noqa: E402
from agdb.tracer.store import events as ev  # noqa: E402
from agdb.tracer.store.leaf_labels import stored_names  # noqa: E402
from agdb.tracer.store.schema import UINT64_MAX, Kind  # noqa: E402
from tests.engine.helpers import run_in_thread  # noqa: E402
from tests.tracer import torch_programs  # noqa: E402


def _watcher(log):
    """A `watch(*tensors)` that pre-hooks every reachable node once; the hooks log (name, seq_nr) as nodes run."""
    hooked = []
    seen = set()  # torch hands back the same wrapper while one is alive, and `hooked` keeps them alive

    def watch(*tensors):
        stack = [t.grad_fn for t in tensors]
        while stack:
            n = stack.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            hooked.append(n)  # hold the wrapper: ids stay unique, and the hook stays on its node
            label = (n.name(), n._sequence_nr())
            n.register_prehook(lambda go, label=label: log.append(label))
            stack.extend(c for c, _ in n.next_functions)

    return watch, hooked


def _record(program, **options):
    log: list = []
    watch, hooked = _watcher(log)
    with tracer.record("torch", **options) as rec:
        program(watch)
    hooked.clear()
    return rec.trace, log


def _started(trace):
    out = []
    for step in trace.steps_of(Kind.NODE_STARTED):
        info = trace.node(trace.event_node(int(step)))
        if info.name != "GraphRoot":
            out.append((info.name, info.seq_nr))
    return out


@pytest.mark.parametrize("options", [{}, {"values": False, "defer": True}], ids=["default", "no-values-deferred"])
@pytest.mark.parametrize("program", torch_programs.PROGRAMS, ids=lambda p: p.__name__)
def test_recorded_order_is_the_observed_order_and_the_model_predicts_it(program, options):
    trace, log = _record(program, **options)
    assert log, "the program ran no node"
    assert _started(trace) == log
    assert trace.meta["divergences"] == []
    assert trace.source == "torch"


def _marked_lines(program):
    lines, first = inspect.getsourcelines(program)
    marks = {}
    for offset, text in enumerate(lines):
        if "# <- " in text:
            marks[first + offset] = text.split("# <- ")[1].strip()
    return marks


@pytest.mark.parametrize("culprits", ["lines", "mode"])
@pytest.mark.parametrize("program", [p for p in torch_programs.PROGRAMS if _marked_lines(p)],
                         ids=lambda p: p.__name__)
def test_culprits_point_at_the_lines_that_made_the_nodes(program, culprits):
    trace, _ = _record(program, culprits=culprits)
    marks = _marked_lines(program)
    if program is torch_programs.reentrant:
        marks.update(_marked_lines(torch_programs.Reent.backward))
    by_line: dict[int, set] = {}
    for c in of_trace(trace):
        if c.filename == torch_programs.__file__:
            by_line.setdefault(c.lineno, set()).add(c.node_name)
    for line, name in marks.items():
        assert name in by_line.get(line, set()), (line, name, by_line)


def test_seq_nrs_are_torchs_and_increments_are_contiguous():
    """Every node's seq_nr is the one torch gave it, and the culprits cover the counter without gaps."""
    trace, log = _record(torch_programs.custom_function)
    bumps = of_trace(trace)
    assert [c.new for c in bumps] == [c.old + 1 for c in bumps]
    assert all(b.old == a.new for a, b in zip(bumps, bumps[1:], strict=False))
    seqs = {seq for _, seq in log if seq != UINT64_MAX}
    assert seqs <= {c.old for c in bumps}


def test_accumulate_grad_leaves_carry_their_parameter_names():
    trace, _ = _record(torch_programs.model_with_optimizer)
    names = set(stored_names(trace).values())
    assert names == {"model[0].weight", "model[0].bias", "model[2].weight", "model[2].bias"}
    for index in stored_names(trace):
        assert trace.node(int(index)).name == "torch::autograd::AccumulateGrad"


def test_hooks_are_registered_once_per_graph_and_removed_after():
    """A second backward over a retained graph reuses the nodes' keys (and hooks); no hook of ours outlives the
    recording (a node's hook dict is empty again)."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with tracer.record("torch") as rec:
        z = (x.exp() * 2).sum()
        z.backward(retain_graph=True)
        z.backward(retain_graph=True)
        pres = list(rec.source.shared.handles.values())  # weakrefs to each node's pre-hook dict, which holds its post's
        posts = [weakref.ref(ref().post) for ref in pres]
    trace = rec.trace
    runs = _started(trace)
    assert len(runs) == 8 and runs[:4] == runs[4:]
    assert len({trace.event_node(int(s)) for s in trace.steps_of(Kind.NODE_STARTED)}) == 4
    from agdb.tracer.sources.torch.hooks import HOOK_KEY

    assert pres and all(ref() is None or HOOK_KEY not in ref() for ref in pres + posts)
    logs = [state.log for state in rec.source.shared.states]
    z2 = (x.exp() * 2).sum()
    z2.backward()  # fresh nodes; and x's AccumulateGrad, hooked while recording, must log nothing now
    assert all(not log for log in logs)


def test_errors_end_the_graph_task_and_say_where():
    trace, _ = _record(torch_programs.error_in_backward)
    errors = [trace[int(s)] for s in trace.steps_of(Kind.ERROR_RAISED)]
    assert len(errors) == 1
    assert errors[0].error_type == "ValueError" and "refused by a hook" in errors[0].message
    assert errors[0].node_name == "CosBackward0"


def test_reentrant_backward_is_one_level_deeper():
    trace, _ = _record(torch_programs.reentrant)
    depths = [trace[int(s)].reentrant_depth for s in trace.steps_of(Kind.GRAPH_TASK_STARTED)]
    assert depths == [0, 1]


def test_a_diverging_order_is_reported():
    """Feed the model an order torch would never produce: it says so, and where."""
    from agdb.tracer.sources.torch.model import EngineModel, Graph, GraphTaskModel

    class Sink:
        num_events = 0

        def __getattr__(self, name):
            return lambda **kw: None

    found = []
    model = EngineModel(Sink(), found.append)
    graph = Graph({1: 5, 2: 3, 3: 4}, {1: ((2, 0), (3, 0)), 2: (), 3: ()}, {})
    gt = GraphTaskModel(1, 0, graph, 1, (0,), (), True, graph.topological_nrs([1]))
    model.start(gt, [(1, 0)], False, False)
    model.node_started(gt, 1, ())
    model.node_finished(gt, 1, (None, None), (True, True))
    model.node_started(gt, 2, ())  # the model expects 3 (seq 4) before 2 (seq 3)
    assert [(d.expected, d.observed) for d in found] == [(3, 2)]


def test_grads_in_and_out_are_summarised():
    """The diamond's root gets 1.0 and hands 1.0 on; AccumulateGrad records the leaf's grad (torch's own)."""
    trace, _ = _record(torch_programs.diamond)
    started = trace[int(trace.steps_of(Kind.NODE_STARTED)[0])]
    assert started.node_name == "SumBackward0" and started.inputs[0].preview == (1.0,)
    accumulated = trace[int(trace.steps_of(Kind.GRAD_ACCUMULATED)[0])]
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    (y.sin() + y.cos()).sum().backward()
    assert accumulated.grad.preview == pytest.approx(tuple(x.grad.tolist()))


def test_the_model_reconstructs_pushes_and_dependencies():
    """Diamond: Exp waits for both branches (dependency 2, its buffer written twice: the second an accumulation)."""
    trace, _ = _record(torch_programs.diamond)
    deps = trace[int(trace.steps_of(Kind.DEPENDENCIES_COMPUTED)[0])].dependencies
    names = {trace.node(n).name: c for n, c in deps}
    assert names["ExpBackward0"] == 2
    writes = [trace[int(s)] for s in trace.steps_of(Kind.BUFFER_WRITTEN)]
    exp_writes = [w.is_accumulation for w in writes if w.node_name == "ExpBackward0"]
    assert exp_writes == [False, True]
    pushes = [trace[int(s)].node_name for s in trace.steps_of(Kind.TASK_PUSHED)]
    assert pushes.count("ExpBackward0") == 1


def test_divergences_are_said_in_words():
    """A divergence names its nodes as every view does (diamond: x.exp() took seq_nr 0, y.sin() 1, y.cos() 2; its
    one leaf is `x`), with no `torch::autograd::` prefix."""
    from agdb.tracer import Trace

    trace, _ = run_in_thread(lambda: _record(torch_programs.diamond))  # a fresh thread: its seq_nrs start at 0
    assert torch_bridge.divergence_text(trace) == ""
    leaf = next(i for i in range(trace.num_nodes) if trace.node(i).name.endswith("AccumulateGrad"))
    meta = dict(trace.meta, divergences=[{"graph_task": 1, "step": 12, "expected": 2, "observed": 1},
                                         {"graph_task": 1, "step": 14, "expected": leaf, "observed": -1}])
    fake = Trace(trace.columns, list(trace.strings), meta)
    assert torch_bridge.divergence_text(fake).split("\n") == [
        "step 12, graph task 1: the model expected CosBackward0 seq 2, torch ran SinBackward0 seq 1",
        "step 14, graph task 1: the model expected AccumulateGrad x, torch ran nothing more"]


def test_a_failure_of_the_bridge_never_fails_the_program():
    """If the bridge's own walk breaks, the backward still runs (unrecorded) and the trace says why."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with tracer.record("torch") as rec:
        def broken(*args):
            raise RuntimeError("walk broke")

        rec.source.walker.walk = broken
        (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    assert rec.trace.meta["bridge_errors"] == ["RuntimeError: walk broke"]
    assert len(rec.trace.steps_of(Kind.GRAPH_TASK_STARTED)) == 0


@pytest.mark.parametrize("culprits", ["mode", "lines"])
def test_torch_is_left_as_it_was(culprits):
    """After the recording: no trace function, no mode on the stack, Function.apply, the engine entry point and
    the tensor-hook methods restored."""
    import sys

    from torch.autograd.function import Function

    apply, run = Function.__dict__["apply"], torch.autograd._engine_run_backward
    methods = {name: torch.Tensor.__dict__.get(name) for name in ("register_hook", "retain_grad",
                                                                 "register_post_accumulate_grad_hook")}
    with tracer.record("torch", culprits=culprits):
        assert torch._C._len_torch_function_stack() == (culprits == "mode")
        assert (sys.gettrace() is not None) == (culprits == "lines")
    assert torch._C._len_torch_function_stack() == 0 and sys.gettrace() is None
    assert Function.__dict__["apply"] is apply and torch.autograd._engine_run_backward is run
    assert {name: torch.Tensor.__dict__.get(name) for name in methods} == methods


def test_a_nested_recording_leaves_the_outer_one_its_hooks():
    """A recording inside another: once the inner one ends, the outer one still hooks (and unhooks) the graphs it
    walks, and torch's hook registration is torch's again after both."""
    from torch.autograd.function import _HookMixin

    register = _HookMixin.__dict__["_register_hook"]
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with tracer.record("torch") as outer:
        with tracer.record("torch"):
            pass
        z = (x.exp() * 2).sum()
        z.backward(retain_graph=True)
        handles = dict(outer.source.shared.handles)
    assert len(_started(outer.trace)) == 4
    assert handles and all(pre() is not None for pre in handles.values())  # the graph lives: its hook dicts too
    assert _HookMixin.__dict__["_register_hook"] is register


def test_other_leaves_are_named_by_the_variables_the_program_binds_them_to():
    """A leaf that is no module's parameter gets the name the backward call's frame (its locals, then globals, then
    two callers' locals) binds it to, as the engine names it (NOTE [leaf names]); one only a finished function named
    gets none. A stale view in the same frame is not asked for its grad_fn: the counter moves as unrecorded."""
    def make():
        inner = torch.ones(2, requires_grad=True)
        return inner * 3

    def program(watch):
        w = torch.ones(2, requires_grad=True)
        g = w.clone()
        v, u = g[0:1], g[1:2]  # noqa: F841 - u stays in the frame, stale
        v.mul_(2)  # u is stale from here on
        (g * w + make()).sum().backward()
        return torch.autograd._get_sequence_nr()

    before = torch.autograd._get_sequence_nr()
    plain = program(None) - before
    with tracer.record("torch") as rec:
        start = torch.autograd._get_sequence_nr()
        recorded = program(None) - start
    assert recorded == plain
    trace = rec.trace
    leaves = [i for i in range(trace.num_nodes) if trace.node(i).name == "torch::autograd::AccumulateGrad"]
    assert len(leaves) == 2
    assert sorted(stored_names(trace).values()) == ["w"]


@pytest.mark.parametrize("keep", [False, True], ids=["graphs-freed", "graphs-kept"])
def test_a_leaf_gets_a_new_accumulate_grad_once_the_last_one_died(keep):
    """NOTE [node identity]: each step frees its graph, so torch makes the leaf a new AccumulateGrad per step (a
    pre-hook put on the first one fires once); while the graphs are kept, every step runs the same one (it fires
    at every step). The trace has as many AccumulateGrads as torch made, each run as often as torch ran it. And
    the recording does not change that: the locals it read do not keep a deleted loss, and its graph, alive
    (NOTE [stale locals] in lines.py; under culprits="mode" they do, as after a locals() call)."""
    w = torch.ones(2, requires_grad=True)
    fired: list[int] = []
    kept = []

    def program():
        for step in range(3):
            loss = (w * 2).sum()
            if step == 0:
                loss.grad_fn.next_functions[0][0].next_functions[0][0].register_prehook(
                    lambda g, fired=fired: fired.append(len(kept)))
            loss.backward(retain_graph=keep)
            kept.append(loss if keep else None)
            del loss

    with tracer.record("torch") as rec:
        program()
    made = 1 if keep else 3
    assert len(fired) == (3 if keep else 1)  # torch's own witness
    trace = rec.trace
    accs = [i for i in range(trace.num_nodes) if trace.node(i).name == "torch::autograd::AccumulateGrad"]
    assert len(accs) == made
    runs = [trace.event_node(int(s)) for s in trace.steps_of(Kind.NODE_STARTED)]
    assert sorted(runs.count(a) for a in accs) == [3 // made] * made


def test_the_locals_the_recording_read_keep_nothing_alive_after_it_and_lose_nothing():
    """NOTE [stale locals]: the frame whose locals the line tracer and the backward's look-ups read holds a
    snapshot; a tensor deleted while recording is freed at once, and every local the program still has keeps its
    value, in the frame and in the dict its own `locals()` gave it."""
    import weakref

    def program():
        w = torch.ones(2, requires_grad=True)
        y = w.exp()  # named at its line: the frame's locals are read
        first = weakref.ref(y)
        y.sum().backward()
        del y
        alive_while_recording = first() is not None
        z = w * 3
        return w, z, alive_while_recording, set(held)

    held = locals()
    with tracer.record("torch") as rec:
        w, z, alive_while_recording, names = program()
    kept = set(held)  # before anything reads the locals again
    assert not alive_while_recording
    assert torch.equal(z, torch.ones(2) * 3) and w.grad is not None
    assert {"program", "weakref", "held", "rec"} <= set(names) and {"program", "weakref", "held", "rec"} <= kept
    assert rec.source.culprits == "lines"


def test_a_generator_s_locals_keep_nothing_alive_across_its_yields():
    """NOTE [stale locals]: a generator whose locals the line tracer read stays refreshed after a yield (a yield is
    no end of its frame): a tensor it deleted before yielding again is freed."""
    import weakref

    def steps(w):
        loss = (w * 2).sum()  # named at its line: the frame's locals are read
        ref = weakref.ref(loss)
        yield ref
        del loss
        yield ref

    w = torch.ones(2, requires_grad=True)
    with tracer.record("torch") as rec:
        it = steps(w)
        ref = next(it)
        alive_before = ref() is not None
        next(it)
        alive_after = ref() is not None
    assert (alive_before, alive_after) == (True, False)
    assert rec.source.culprits == "lines"


def test_a_leaf_given_as_a_root_is_named_too():
    """backward([y, x]) with the leaf x itself a root: its AccumulateGrad is keyed before the walk, and still gets
    the variable's name."""
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    with tracer.record("torch") as rec:
        y = (w * 2).sum()
        torch.autograd.backward([y, x], [torch.ones(()), torch.ones(3)])
    assert sorted(stored_names(rec.trace).values()) == ["w", "x"]


@pytest.mark.parametrize("options", [{"values": False}, {"defer": True}, {"values": False, "defer": True}],
                         ids=["no-values", "deferred", "no-values-deferred"])
def test_a_reentrant_backward_s_nodes_are_made_in_their_place_whatever_the_options(options, capsys):
    """A custom backward that recomputes and calls backward (docs/examples/custom_reentrant.py): its nodes are
    bumped, then made, inside the outer graph task, on the custom backward's line, as record()'s default has them
    (with values=False too, not before their increments on the call's line)."""
    import runpy
    from pathlib import Path

    example = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "custom_reentrant.py")

    def recorded(**opts):
        with tracer.record("torch", **opts) as rec:
            runpy.run_path(example, run_name="__main__")
        trace = rec.trace
        first = min(trace.node(i).seq_nr for i in range(trace.num_nodes) if trace.node(i).seq_nr < 2**63)
        order = []
        for e in trace:
            if isinstance(e, (ev.SeqNrBumped, ev.NodeCreated)):
                seq = e.old if isinstance(e, ev.SeqNrBumped) else e.seq_nr
                order.append((type(e).__name__, e.lineno, seq - first if seq < 2**63 else None))
            elif isinstance(e, ev.GraphTaskStarted):
                order.append(("GraphTaskStarted", e.reentrant_depth))
        return order

    assert recorded(**options) == recorded()
    capsys.readouterr()


def test_parameter_names_come_from_the_modules_the_program_holds():
    """NOTE [leaf names]: a module held as an attribute, in a list, or as a variable names its parameters by the path
    the user writes from its outermost holder (a submodule also held keeps the outer name); a temporary module's
    parameters get none."""
    class Trainer:
        def __init__(self):
            self.model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1))
            self.first = self.model[0]

    def program(watch):
        trainer = Trainer()
        heads = [torch.nn.Linear(2, 1)]
        x = torch.ones(1, 2)
        (trainer.model(x).sum() + heads[0](x).sum() + torch.nn.Linear(2, 1)(x).sum()).backward()

    trace, _ = _record(program)
    assert sorted(stored_names(trace).values()) == [
        "heads[0].bias", "heads[0].weight", "trainer.model[0].bias", "trainer.model[0].weight",
        "trainer.model[2].bias", "trainer.model[2].weight"]
    leaves = [i for i in range(trace.num_nodes) if trace.node(i).name == "torch::autograd::AccumulateGrad"]
    assert len(leaves) == 8  # the temporary Linear's two are left unnamed
