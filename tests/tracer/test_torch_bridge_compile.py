"""A torch.compile'd model's training step, recorded by the bridge: torch.compile's own autograd.grad calls (AOT
autograd traces the backward while it compiles) are left to torch and kept apart (NOTE [compile-time calls] in
tracer/sources/torch/backward.py), so no false divergence is raised and the program compiles as it does without
agdb: a nested compile region, a graph break and a custom Function included.

The backend is aot_eager: the same AOT autograd tracing as the default inductor, without compiling C++.
"""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402


@pytest.fixture(scope="module")
def compiled_training():
    """Two training steps of a compiled MLP (the first compiles), then one eager backward whose nodes the program
    pre-hooks itself, recorded with multithreading off (so torch's own execution order of each call is read as a
    witness); returns the trace and the (name, seq_nr) the program's pre-hooks saw, in order."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)
    seen: list = []
    with tracer.record("torch", single_threaded=True) as rec:
        for _ in range(2):
            compiled(x).sum().backward()
            opt.step()
            opt.zero_grad()
        loss = model(x).sum()
        stack, hooked = [loss.grad_fn], []
        while stack:
            n = stack.pop()
            if n is None or n in hooked:
                continue
            hooked.append(n)
            n.register_prehook(lambda go, label=(n.name(), n._sequence_nr()): seen.append(label))
            stack.extend(c for c, _ in n.next_functions)
        loss.backward()
    torch._dynamo.reset()
    return rec.trace, seen


def test_no_divergence_is_reported_for_a_compiled_training_step(compiled_training):
    """The model, torch's ids and torch's execution order of the program's three calls agree, and the eager
    call's recorded order is the one the program's own pre-hooks saw."""
    trace, seen = compiled_training
    assert trace.meta["divergences"] == []
    assert not trace.meta.get("bridge_errors")
    orders = [t["execution_order"] for t in trace.meta["graph_tasks"] if "execution_order" in t]
    assert len(orders) == 3 and all(o["model"] == "agrees" and o["observed"] == "agrees" for o in orders)
    starts = trace.steps_of(Kind.GRAPH_TASK_STARTED)
    last = [trace.node(trace.event_node(int(s))) for s in trace.steps_of(Kind.NODE_STARTED) if s > starts[-1]]
    assert [(n.name, n.seq_nr) for n in last if n.name != "GraphRoot"] == seen


def test_compile_time_calls_are_kept_apart_and_only_the_program_s_are_recorded(compiled_training):
    """The call torch.compile made while it traced is an entry apart, not a graph task; the program's three are."""
    trace, _ = compiled_training
    # Dynamo numbers frames through the process (other tests compiled before this one): the frame's first compile
    [call] = trace.meta["compile_time_calls"]
    assert call["kind"] == "grad" and re.fullmatch(r"\d+/0", call["compile_id"]), call
    assert len(trace.meta["graph_tasks"]) == 3
    assert len(trace.steps_of(Kind.GRAPH_TASK_STARTED)) == 3


NESTED = """
import torch
torch._dynamo.config.inline_single_use_invoke_subgraph = False

@torch.compiler.nested_compile_region
def block(x, w):
    return torch.sin(x @ w).relu()

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None

def f(x, w):
    y = block(x, w)
    print("a graph break")
    return Scale.apply(y[0] * 2, 3.0).sum()

calls = []
torch.manual_seed(0)
x = torch.randn(4, 4, requires_grad=True)
w = torch.randn(4, 4, requires_grad=True)
w.register_hook(lambda g: calls.append(g.clone()))
g = torch.compile(f, backend="aot_eager")
for _ in range(2):
    g(x, w).backward()
"""


def test_a_compiled_program_runs_as_without_agdb(tmp_path, capsys):
    """A nested compile region, a graph break, a custom Function and a subscript line (where the bridge pushes its
    mode) under torch.compile: recorded, the program ends as it does plainly, with the same grads and hook calls
    (the program's own record), two recorded graph tasks with CompiledFunctionBackward nodes, and no Dynamo
    warning about agdb's code."""
    import warnings

    torch._dynamo.reset()
    plain: dict = {}
    exec(compile(NESTED, "nested_plain.py", "exec"), plain)  # noqa: S102 - the test's own program, plainly
    torch._dynamo.reset()
    recorded: dict = {}
    with warnings.catch_warnings(record=True) as caught, tracer.record("torch") as rec:
        warnings.simplefilter("always")
        exec(compile(NESTED, "nested_recorded.py", "exec"), recorded)  # noqa: S102
    torch._dynamo.reset()
    assert len(recorded["calls"]) == len(plain["calls"]) == 2
    for a, b in zip(recorded["calls"], plain["calls"], strict=True):
        assert torch.equal(a, b)
    assert torch.equal(recorded["x"].grad, plain["x"].grad) and torch.equal(recorded["w"].grad, plain["w"].grad)
    assert not [w for w in caught if "Dynamo" in str(w.message)]
    trace = rec.trace
    assert len(trace.meta["graph_tasks"]) == 2 and trace.meta["divergences"] == []
    names = {trace.node_name(i) for i in range(trace.num_nodes)}
    assert any("CompiledFunctionBackward" in name for name in names), names


COMPILED_AUTOGRAD = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
x = torch.randn(3, 4)
torch._dynamo.config.compiled_autograd = True


@torch.compile(backend="aot_eager")
def step():
    model(x).sum().backward()


try:
    step()
finally:
    torch._dynamo.config.compiled_autograd = False
grad = model.weight.grad.clone()
"""


def test_compiled_autograd_is_said_in_one_line_and_the_program_is_unchanged(tmp_path, capsys):
    """Compiled autograd runs the backward inside a compiled graph: the grads are the plain run's, no graph task is
    recorded (the engine ran none), and `agdb torch` says why in one line."""
    from agdb.app.cli import main

    plain: dict = {}  # the same program eagerly: compiled autograd computes the same grads (a Linear's, exactly)
    eager = COMPILED_AUTOGRAD.replace('@torch.compile(backend="aot_eager")\n', "").replace(
        "torch._dynamo.config.compiled_autograd = True\n", "")
    exec(compile(eager, "ca_plain.py", "exec"), plain)  # noqa: S102 - the test's own program
    torch._dynamo.reset()
    script = tmp_path / "ca.py"
    script.write_text(COMPILED_AUTOGRAD.replace("finally:\n    torch._dynamo.config.compiled_autograd = False\n",
                                                "finally:\n    pass\n")
                      + "torch.save(grad, __import__('sys').argv[1])\n")
    saved_grad = tmp_path / "grad.pt"
    try:
        assert main(["torch", str(script), "-o", str(tmp_path / "ca.agdb"), "--", str(saved_grad)]) == 0
    finally:
        torch._dynamo.config.compiled_autograd = False
        torch._dynamo.reset()
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "compiled autograd" in line] == [
        line for line in err.splitlines() if line.startswith("agdb: the script turned on compiled autograd")]
    assert "no backward call of it is recorded" in err
    from agdb.tracer.store.tracefile import load

    trace = load(str(tmp_path / "ca.agdb"))
    assert trace.meta["compiled_autograd"] is True and trace.meta["graph_tasks"] == []
    assert torch.equal(torch.load(saved_grad), plain["grad"]) and plain["grad"].abs().sum() > 0
