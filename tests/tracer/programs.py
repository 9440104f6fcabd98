"""Run a random `tests.strategies.Program` on the engine under `tracer.record()`.

Each program runs in a fresh thread, so it starts with a fresh sequence counter and an empty CPU ready
queue (nothing left over from other tests). Independently of the tracer, a Node pre-hook on every node of
every graph (the outer one and each reentrant inner one) logs `(name, seq_nr)` when the node runs: the
engine's own record of its execution order.
"""
from __future__ import annotations

from dataclasses import dataclass

from agdb import engine, tracer
from tests.engine.helpers import OD, hook_every_node, run_in_thread


class PlannedFailure(Exception):
    """Raised on purpose by a pre-hook of a program's `fail_at` node."""


@dataclass
class ProgramRun:
    """What running a Program produced."""

    trace: object
    hook_log: list  # (name, seq_nr) of every node whose Node pre-hooks ran, in order
    failed: bool  # the planned failure happened (a graph task ended with an error)
    counter: int  # the thread's sequence counter at the end (it started at 0): how many bumps happened


def _leaf(i: int, requires_grad: bool):
    return engine.tensor([0.1 * (i + 1), -0.2, 0.3 - 0.05 * i], requires_grad=requires_grad)


def run_program(program) -> ProgramRun:
    """Build `program`'s forward, then its ending, all recorded; returns the trace and the pre-hook log."""
    return run_in_thread(lambda: _run(program))


def _run(program) -> ProgramRun:
    log: list = []

    def on_node(node) -> None:
        log.append((node.name(), node._sequence_nr()))

    class Double(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Reent(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            with engine.enable_grad():
                q = a.detach().requires_grad_()
                r = (q.exp() * 3).sin().sum()
                hook_every_node([r.grad_fn], on_node)
                engine.autograd.backward(r)  # reentrant: runs inside this node
            return g * 3

    unary = {
        "exp": lambda v: v.exp(), "sin": lambda v: v.sin(), "cos": lambda v: v.cos(), "tanh": lambda v: v.tanh(),
        "sigmoid": lambda v: v.sigmoid(), "scale": lambda v: v * 0.5, "fn": Double.apply, "od": OD.apply,
        "reent": Reent.apply,
    }
    binary = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b}
    stack = {"stack": lambda *vs: engine.stack(list(vs)).sum(0)}
    failed = False
    with tracer.record() as rec:
        values = [_leaf(i, r) for i, r in enumerate(program.leaves)]
        for op, args in program.ops:
            values.append({**unary, **binary, **stack}[op](*(values[a] for a in args)))
        roots = [values[i].sum() for i in program.roots]
        for i in program.hooks:
            values[i].register_hook(lambda g: g * 2)
        fail_handle = None
        if program.fail_at is not None:
            def fail(grad_outputs):
                raise PlannedFailure("planned failure")

            fail_handle = values[program.fail_at].grad_fn.register_prehook(fail)  # before the logging hooks
        hook_every_node([r.grad_fn for r in roots], on_node)
        inputs = [values[i] for i in program.inputs]
        if fail_handle is not None:
            try:
                _ending(program.ending, roots, inputs, retain_graph=True)
            except PlannedFailure:
                failed = True
            fail_handle.remove()
        if program.repeat:
            _ending(program.ending, roots, inputs, retain_graph=True)
        _ending(program.ending, roots, inputs, retain_graph=None)
    return ProgramRun(rec.trace, log, failed, engine.autograd._get_sequence_nr())


def _ending(ending: str, roots: list, inputs: list, retain_graph) -> None:
    if ending == "backward":
        roots[0].backward(retain_graph=retain_graph)
    elif ending == "backward_inputs":
        roots[0].backward(inputs=inputs, retain_graph=retain_graph)
    elif ending == "grad":
        engine.autograd.grad(roots[0], inputs, retain_graph=retain_graph, allow_unused=True)
    elif ending == "grad_create_graph":
        engine.autograd.grad(roots[0], inputs, retain_graph=retain_graph, create_graph=True, allow_unused=True)
    elif ending == "two_roots":
        engine.autograd.backward(roots, retain_graph=retain_graph)
    else:
        raise ValueError(ending)
