"""A torch.compile'd model's training step, recorded by the bridge: torch.compile's own autograd.grad calls (AOT
autograd traces the backward while it compiles, with Error nodes in its graph) raise no false divergence, and are
marked compile-time in meta["graph_tasks"] (NOTE [compile-time calls] in tracer/sources/torch/backward.py).

The backend is aot_eager: the same AOT autograd tracing as the default inductor, without compiling C++.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402


@pytest.fixture(scope="module")
def compiled_training():
    """Two training steps of a compiled MLP (the first compiles), recorded, and the grads torch computed."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)
    with tracer.record("torch") as rec:
        for _ in range(2):
            compiled(x).sum().backward()
            opt.step()
            opt.zero_grad()
    torch._dynamo.reset()
    return rec.trace


def test_no_divergence_is_reported_for_a_compiled_training_step(compiled_training):
    """The model, torch's ids and torch's execution order of the compile-time call all agree."""
    trace = compiled_training
    assert trace.meta["divergences"] == []
    assert not trace.meta.get("bridge_errors")
    orders = [t["execution_order"] for t in trace.meta["graph_tasks"] if "execution_order" in t]
    assert orders and all(o["model"] == "agrees" and o["observed"] == "agrees" for o in orders)


def test_compile_time_calls_are_marked_and_the_program_s_are_not(compiled_training):
    """Only the call torch.compile made while it traced is compile-time; the two backward() calls are not."""
    tasks = compiled_training.meta["graph_tasks"]
    marked = [t.get("compile_time", False) for t in tasks]
    assert marked == [True, False, False]
    assert len(compiled_training.steps_of(Kind.GRAPH_TASK_STARTED)) == 3
