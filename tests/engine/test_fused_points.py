"""The fused observer points (NOTE [fused points] in engine/_observer.py): the engine calls task_popped_and_started
and buffer_written_and_task_pushed where the two points follow each other with nothing between, and an observer
sees the same events in the same order whether it implements the fused points or gets them as two calls."""
from __future__ import annotations

from collections import Counter

import pytest

from agdb import engine as torch
from tests.engine.helpers import run_in_thread
from tests.engine.test_observer import Log


class Separate(Log):
    """The two points only (the engine adapts the fused calls), with the grads each node starts on."""

    def node_started(self, graph_task, node, inputs):
        self.events.append(("node_started", node.name(), tuple(None if t is None else t.tolist() for t in inputs)))


class Fused(Separate):
    """The fused points, each logged as the two events it stands for, and counted."""

    def __init__(self) -> None:
        super().__init__()
        self.fused = {"task_popped_and_started": 0, "buffer_written_and_task_pushed": 0}

    def task_popped_and_started(self, graph_task, task, queue, inputs):
        self.fused["task_popped_and_started"] += 1
        self.task_popped(graph_task, task, queue)
        self.node_started(graph_task, task.fn, inputs)

    def buffer_written_and_task_pushed(self, graph_task, node, slot, is_accumulation, buffer, task, queue):
        self.fused["buffer_written_and_task_pushed"] += 1
        self.buffer_written(graph_task, node, slot, is_accumulation, buffer)
        self.task_pushed(task.graph_task, task, queue)


def _chain_with_a_hook():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    z = y.sin() + y * 3.0
    z.register_hook(lambda g: g * 2.0)  # a tensor pre-hook: AddBackward0 is popped and started apart
    (z.exp().sum() + x.sum()).backward()
    return x.grad.tolist()


def _grad_with_exec_info():
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    y = (x * w).sin() * x
    return [g.tolist() for g in torch.autograd.grad(y.sum(), (x,), retain_graph=True)]


def _create_graph():
    x = torch.tensor([1.0, -1.0], requires_grad=True)
    y = (x * x * x).sum()
    (gx,) = torch.autograd.grad(y, x, create_graph=True)  # the buffer sums record ops between write and push
    gx.sum().backward()
    return x.grad.tolist()


def _reentrant():
    class Reentrant(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                inner = x.detach().requires_grad_(True)
                (inner.sin().sum()).backward()  # a backward inside a node
            return g * 2.0 + inner.grad

    x = torch.tensor([0.25, 0.75], requires_grad=True)
    Reentrant.apply(x.exp()).sum().backward()
    return x.grad.tolist()


def _on_cuda():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (x.to("cuda:0") * 3.0).sin().to("cpu") * x  # nodes on a device worker's queue and on this thread's
    y.sum().backward()
    return x.grad.tolist()


def test_across_devices_the_same_events_are_seen():
    """Pushes to a device's queue go through ReadyQueue.push_node, which reports the write with the push; the two
    threads' events interleave differently in each log, so the logs are compared as multisets."""

    def case():
        separate, fused = Separate(), Fused()
        with torch.add_observer(separate), torch.add_observer(fused):
            _on_cuda()
        return separate, fused

    separate, fused = run_in_thread(case)
    assert Counter(map(repr, fused.events)) == Counter(map(repr, separate.events))
    assert fused.fused["buffer_written_and_task_pushed"] > 0 and fused.fused["task_popped_and_started"] > 0


@pytest.mark.parametrize("program", [_chain_with_a_hook, _grad_with_exec_info, _create_graph, _reentrant])
def test_fused_and_separate_observers_see_the_same_events(program):
    """Both observers attached to the same run log the same events; the fused one got fused calls."""

    def case():
        separate, fused = Separate(), Fused()
        with torch.add_observer(separate), torch.add_observer(fused):
            result = program()
        return separate, fused, result

    separate, fused, _ = run_in_thread(case)
    assert fused.events == separate.events
    assert fused.fused["buffer_written_and_task_pushed"] > 0
    if program is not _grad_with_exec_info:  # a graph task with exec_info reports its pops apart
        assert fused.fused["task_popped_and_started"] > 0
    kinds = [e[0] for e in separate.events]
    assert kinds.count("task_popped") == kinds.count("task_pushed")  # each task popped once


def test_node_with_hooks_is_reported_apart():
    """A node with a pre-hook is popped, then its hook runs, then it starts: not one fused call."""

    def case():
        fused = Fused()
        x = torch.tensor([1.0], requires_grad=True)
        y = x.exp()
        y.grad_fn.register_prehook(lambda g: None)
        with torch.add_observer(fused):
            y.sum().backward()
        return fused

    fused = run_in_thread(case)
    names = [(e[0], e[1]) for e in fused.events if e[0] in ("task_popped", "hook_ran", "node_started")]
    assert names[2:5] == [("task_popped", "ExpBackward0"), ("hook_ran", "ExpBackward0"),
                          ("node_started", "ExpBackward0")]
    # SumBackward0 and AccumulateGrad were fused; ExpBackward0 was not
    assert fused.fused["task_popped_and_started"] == 2


def test_results_are_the_same_observed_or_not():
    """The fused path runs the same engine steps: every program's grads are those of the unobserved run."""
    for program in (_chain_with_a_hook, _grad_with_exec_info, _create_graph, _reentrant, _on_cuda):
        plain = run_in_thread(program)

        def observed(program=program):
            with torch.add_observer(Fused()):
                return program()

        assert run_in_thread(observed) == plain
