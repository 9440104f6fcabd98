"""The bridge's trace says exactly what torch did (issue 29, item 4): one node per autograd node whatever its seq_nr,
the "no graph" flag, the live `agdb.seq_nr` log, column carets, and leaf names, each checked against torch's own
hooks and accessors or against agdb's engine running the same program."""
from __future__ import annotations

import logging
import textwrap

import pytest

from agdb import engine, tracer
from agdb.tracer.recording.culprits import of_trace
from agdb.tracer.replay.forward_map import ForwardMap
from agdb.tracer.store.schema import Kind
from tests.engine.helpers import run_in_thread

torch = pytest.importorskip("torch")


def _run(source: str, lib, where=None, **options):
    """Record `source` with `torch` bound to `lib` (agdb's engine or real torch), on a fresh thread; from a file in
    the directory `where` when given (columns need the source on disk)."""
    text = textwrap.dedent(source)
    filename = "program.py"
    if where is not None:
        filename = str(where / "program.py")
        (where / "program.py").write_text(text)
    code = compile(text, filename, "exec")
    scope = {"torch": lib, "__name__": "program"}

    def go():
        with tracer.record("engine" if lib is engine else "torch", **options) as rec:
            exec(code, scope)
        return rec.trace

    return run_in_thread(go), scope


# -- a) one node per autograd node -------------------------------------------------------------------------------
@pytest.mark.parametrize("before", ["", "(torch.ones(2, requires_grad=True) * 3).sum().backward()"],
                         ids=["first", "after-a-backward"])
def test_a_renumbered_node_is_one_node_with_its_line_and_its_final_seq_nr(tmp_path, before):
    """`_set_sequence_nr` gives a node another number after its line took one: the trace holds it once, on its line,
    with the number torch's own pre-hook reads when it runs, and in the graph (SumBackward0 leads to it). Followed on
    the line tracer only (NOTE [renumbered nodes] in renumbered.py); after a backward call too, whose log waits for
    the recording's end (NOTE [keys before the replay] in forward.py)."""
    trace, scope = _run(f"""
        x = torch.ones(2, requires_grad=True)
        {before}
        y = x.exp()
        y.grad_fn._set_sequence_nr(10_000)
        ran = []
        y.grad_fn.register_prehook(lambda g: ran.append((y.grad_fn.name(), y.grad_fn._sequence_nr())))
        y.sum().backward()
        """, torch, tmp_path)
    assert scope["ran"] == [("ExpBackward0", 10_000)]  # torch's own witness
    exps = [i for i in range(trace.num_nodes) if trace.node(i).name == "ExpBackward0"]
    assert len(exps) == 1
    exp = trace.node(exps[0])
    assert (exp.seq_nr, exp.lineno, exp.source) == (10_000, 4, "y = x.exp()")
    sums = [trace.node(i) for i in range(trace.num_nodes) if trace.node(i).name == "SumBackward0"]
    assert [child for child, _ in sums[-1].next_edges] == [exps[0]]  # y.sum()'s
    started = [trace.node(trace.event_node(int(s))) for s in trace.steps_of(Kind.NODE_STARTED)]
    assert [(n.name, n.seq_nr) for n in started if n.name == "ExpBackward0"] == [("ExpBackward0", 10_000)]


# -- b) the "no graph" flag --------------------------------------------------------------------------------------
NO_GRAD_FUNCTION = """
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        z = Twice.apply(x)
    y = Twice.apply(x)
    (y * 3).sum().backward()
    """


def _flags_by_name(trace):
    forward = ForwardMap(trace)
    return sorted((op.op, op.flags) for op in (forward.op(row) for row in range(len(forward))))


@pytest.mark.parametrize("culprits", ["lines", "mode"])
def test_a_function_applied_under_no_grad_is_flagged_no_graph_as_on_the_engine(culprits):
    """torch: the Function under no_grad took a number (the counter moved) and its output has no grad_fn, so its node
    joined no graph; the one applied with grad did. The bridge flags the first `no_graph`, as the engine's trace
    does for the same program."""
    torch_trace, scope = _run(NO_GRAD_FUNCTION, torch, culprits=culprits)
    assert scope["z"].grad_fn is None and scope["y"].grad_fn is not None  # torch's own answer
    engine_trace, _ = _run(NO_GRAD_FUNCTION, engine)
    got = _flags_by_name(torch_trace)
    assert ("twice", ("no_graph",)) in got and ("twice", ()) in got, got
    assert got == _flags_by_name(engine_trace)


# -- c) the live agdb.seq_nr log -----------------------------------------------------------------------------------
CHAIN = """
    x = torch.ones(2, requires_grad=True)
    y = x.exp()
    z = (y * 2).sum()
    z.backward()
    """


@pytest.mark.parametrize("culprits", ["lines", "mode"])
def test_the_seq_nr_logger_prints_each_increment_while_torch_records(caplog, culprits):
    """With `agdb.seq_nr` at INFO, recording real torch logs one line per increment, as the engine's recording of the
    same program does (the numbers: each thread's counter starts where it is, so compared from the first)."""
    caplog.set_level(logging.INFO, logger="agdb.seq_nr")
    _run(CHAIN, torch, culprits=culprits)
    on_torch = [r.getMessage() for r in caplog.records if r.name == "agdb.seq_nr"]
    caplog.clear()
    _run(CHAIN, engine)
    on_engine = [r.getMessage() for r in caplog.records if r.name == "agdb.seq_nr"]
    assert len(on_torch) == 3, on_torch
    assert [m.split(" by ", 1)[1] for m in on_torch] == [m.split(" by ", 1)[1] for m in on_engine]


# -- d) column carets ----------------------------------------------------------------------------------------------
CARETS = """
    def square(t):
        return t * t

    x = torch.ones(2, requires_grad=True)
    w = torch.ones(2, requires_grad=True)
    z = (x.sin() * w).sum()
    h = x
    for _ in range(3):
        h = h.tanh()
    v = square(x.cos()) + torch.exp(w)
    parts = [p.exp() * 2 for p in (x, w)]
    total = torch.cat(parts).sum()
    """


def _culprit_columns(trace):
    return [(c.node_name, c.lineno, c.source[c.col:c.end_col] if c.col >= 0 else None) for c in of_trace(trace)]


def test_columns_on_the_engine_are_what_python_positions_say(tmp_path):
    """The reference the bridge is held to: the engine's columns, from `co_positions` at the op's bytecode."""
    trace, _ = _run(CARETS, engine, tmp_path)
    got = _culprit_columns(trace)
    assert ("SinBackward0", 7, "x.sin()") in got
    assert ("MulBackward0", 7, "x.sin() * w") in got
    assert ("SumBackward0", 7, "(x.sin() * w).sum()") in got
    assert ("MulBackward0", 3, "t * t") in got
    assert ("AddBackward0", 11, "square(x.cos()) + torch.exp(w)") in got


@pytest.mark.parametrize("culprits", ["lines", "mode"])
def test_torch_culprits_have_the_engines_columns(culprits, tmp_path):
    """Every culprit of a torch recording carries the column range the engine's rule gives the same program: the
    bytecode running in the user's frame when the node took its number (Python's `co_positions`)."""
    torch_trace, _ = _run(CARETS, torch, tmp_path, culprits=culprits)
    engine_trace, _ = _run(CARETS, engine, tmp_path)
    got = _culprit_columns(torch_trace)
    assert all(col is not None for *_, col in got), got
    assert got == _culprit_columns(engine_trace)



# -- e) the module call that made each op ----------------------------------------------------------------------------
MODULES = """
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(3, 3)
            self.act = torch.nn.Tanh()

        def forward(self, x):
            return self.act(self.fc1(x)) * 2

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block(), Block()])
            self.head = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    model = Net()
    x = torch.ones(2, 3)
    out = model(x)
    loss = out.sum()
    loss.backward()
    """


def _module_truth(source: str):
    """torch's own answer: forward pre- and post-hooks (the test's, not agdb's) on every module read the thread's
    counter around each call; each number belongs to the innermost call that was running when it was taken, named as
    `model` plus the module's path from `named_modules()` written as Python reaches it."""
    from agdb.tracer.recording.leaf_names import python_path

    seq = torch.autograd._get_sequence_nr
    owner: dict[int, str] = {}

    def install(model):
        stack = []
        for name, m in model.named_modules():
            path = "model" + (python_path(name) if name else "")

            def pre(mod, args, path=path):
                stack.append((path, seq()))

            def post(mod, args, out):
                path, first = stack.pop()
                for s in range(first, seq()):
                    owner.setdefault(s, path)  # an inner call ends first and claims its numbers first

            m.register_forward_pre_hook(pre)
            m.register_forward_hook(post)

    text = textwrap.dedent(source).replace("out = model(x)", "install(model)\nout = model(x)")

    def go():
        scope = {"torch": torch, "__name__": "program", "install": install}
        exec(compile(text, "truth.py", "exec"), scope)

    run_in_thread(go)
    first = min(owner)
    return {s - first: path for s, path in owner.items()}


def _culprit_modules(trace):
    rows = of_trace(trace)
    first = rows[0].old
    return {c.old - first: c.module for c in rows}


@pytest.mark.parametrize("culprits", ["lines", "mode"])
def test_each_op_names_the_module_call_that_made_it_as_torch_hooks_see_it(culprits):
    """Five ops of one line `out = model(x)` are told apart by the module call that made each (`model.blocks[0].fc1`,
    `model.head[2]`), as torch's own forward hooks see it; an op outside every module call (`out.sum()`) has none;
    agdb's engine gives the same program the same paths."""
    truth = _module_truth(MODULES)
    torch_trace, _ = _run(MODULES, torch, culprits=culprits)
    got = _culprit_modules(torch_trace)
    assert {s: got.get(s) for s in truth} == truth
    assert "model.blocks[1].act" in truth.values() and "model.head[0]" in truth.values()
    assert [m for s, m in sorted(got.items()) if s not in truth] == [""]  # the sum
    engine_trace, _ = _run(MODULES, engine)
    assert _culprit_modules(engine_trace) == got


# -- f) one leaf name on both sources --------------------------------------------------------------------------------
LEAVES = """
    class Holder:
        def __init__(self):
            self.head = torch.nn.Linear(2, 1)

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    holder = Holder()
    towers = [torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)]
    x = torch.ones(3, 2)
    h = model(x)
    (holder.head(h).sum() + towers[0](h).sum() + towers[1](h).sum()).backward()
    """


def test_one_script_names_its_leaves_alike_on_the_engine_and_on_torch():
    """A Sequential held in `model`, a module in an object's attribute and modules in a list: each parameter by the
    path the script writes to reach it, the same on both sources (written by hand from the script)."""
    expected = sorted(["model[0].weight", "model[0].bias", "holder.head.weight", "holder.head.bias",
                       "towers[0].weight", "towers[0].bias", "towers[1].weight", "towers[1].bias"])
    names = {}
    for lib in (engine, torch):
        trace, _ = _run(LEAVES, lib)
        names[lib.__name__] = sorted(trace.index.leaf_labels.values())
    assert names == {"agdb.engine": expected, "torch": expected}


def test_modules_false_leaves_module_calls_alone():
    """`record("torch", modules=False)` puts nothing on nn.Module.__call__ and no module path on a culprit."""
    before = torch.nn.Module.__call__
    trace, _ = _run(MODULES, torch, modules=False)
    assert torch.nn.Module.__call__ is before
    assert {c.module for c in of_trace(trace)} == {""}


TEMPORARY_AND_FAILING = """
    class Boom(torch.nn.Module):
        def forward(self, x):
            y = x.exp()
            raise ValueError("boom")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x)

    x = torch.ones(1, 2, requires_grad=True)
    a = Net()(x)
    try:
        Boom()(x)
    except ValueError:
        pass
    b = (a * 2).sum()
    """


@pytest.mark.parametrize("lib", [engine, torch], ids=["engine", "torch"])
def test_a_temporary_module_is_named_by_its_class_and_a_failed_call_ends(lib):
    """`Net()(x)` has no holder: its calls are named by the class (`Net.fc`); a module call that raised ends there, so
    the ops after it are in no module call."""
    trace, _ = _run(TEMPORARY_AND_FAILING, lib)
    assert [(c.node_name, c.module) for c in of_trace(trace)] == [
        ("TBackward0", "Net.fc"), ("AddmmBackward0", "Net.fc"), ("ExpBackward0", "Boom"), ("MulBackward0", ""),
        ("SumBackward0", "")]
