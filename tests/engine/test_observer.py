"""The engine's instrumentation points (issue 2 §9): what observers see, in which order, and detaching."""
from __future__ import annotations

from agdb import engine as torch


class Log:
    """Records (point, summary) for every instrumentation point."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def seq_nr_bumped(self, node, seq_nr):
        self.events.append(("seq_nr_bumped", node.name(), seq_nr))

    def node_created(self, node):
        self.events.append(("node_created", node.name()))

    def graph_task_started(self, graph_task):
        self.events.append(("graph_task_started", graph_task.reentrant_depth))

    def dependencies_computed(self, graph_task, min_topo_nr, pruned):
        self.events.append(("dependencies_computed", min_topo_nr, tuple(sorted(n.name() for n in pruned))))

    def exec_info_computed(self, graph_task):
        self.events.append(("exec_info_computed", len(graph_task.exec_info)))

    def task_pushed(self, graph_task, task, queue):
        self.events.append(("task_pushed", task.fn.name() if task.fn else None, task.priority))

    def task_popped(self, graph_task, task, queue):
        self.events.append(("task_popped", task.fn.name() if task.fn else None))

    def buffer_written(self, graph_task, node, slot, is_accumulation, buffer):
        self.events.append(("buffer_written", node.name(), slot, is_accumulation))

    def hook_ran(self, graph_task, node, kind, hook):
        self.events.append(("hook_ran", node.name(), kind))

    def node_started(self, graph_task, node, inputs):
        self.events.append(("node_started", node.name()))

    def node_finished(self, graph_task, node, outputs):
        self.events.append(("node_finished", node.name(), len(outputs)))

    def grad_captured(self, graph_task, node, output_index, grad):
        self.events.append(("grad_captured", node.name(), output_index))

    def grad_accumulated(self, graph_task, node, variable, grad):
        self.events.append(("grad_accumulated", tuple(grad.tolist())))

    def error_raised(self, graph_task, node, error):
        self.events.append(("error_raised", node.name() if node else None, type(error).__name__))

    def graph_task_finished(self, graph_task):
        self.events.append(("graph_task_finished", graph_task.has_error))


def _points(log):
    return [e[0] for e in log.events]


def test_forward_reports_seq_bump_then_node_creation():
    """A recorded op reports its seq_nr bump, then the finished node; AccumulateGrad bumps nothing."""
    x = torch.ones(2, requires_grad=True)
    log = Log()
    with torch.add_observer(log):
        s = torch.autograd._get_sequence_nr()
        y = x * 2
    assert log.events == [("seq_nr_bumped", "MulBackward0", s), ("node_created", "torch::autograd::AccumulateGrad"),
                          ("node_created", "MulBackward0")]
    assert y.grad_fn._sequence_nr() == s


def test_backward_reports_every_step_in_engine_order():
    """x*x backward: task start, dependencies, push/pop, node runs, an accumulated buffer slot, .grad written."""
    x = torch.tensor([3.0], requires_grad=True)
    y = (x * x).sum()
    log = Log()
    with torch.add_observer(log):
        y.backward()
    assert log.events == [
        ("graph_task_started", 0),
        ("dependencies_computed", 0, ()),
        ("task_pushed", "SumBackward0", (0, y.grad_fn._sequence_nr())),
        ("task_popped", "SumBackward0"),
        ("node_started", "SumBackward0"),
        ("node_finished", "SumBackward0", 1),
        ("buffer_written", "MulBackward0", 0, False),
        ("task_pushed", "MulBackward0", (0, y.grad_fn._sequence_nr() - 1)),
        ("task_popped", "MulBackward0"),
        ("node_started", "MulBackward0"),
        ("node_finished", "MulBackward0", 2),
        ("buffer_written", "torch::autograd::AccumulateGrad", 0, False),
        ("buffer_written", "torch::autograd::AccumulateGrad", 0, True),
        ("task_pushed", "torch::autograd::AccumulateGrad", (0, 2**64 - 1)),
        ("task_popped", "torch::autograd::AccumulateGrad"),
        ("node_started", "torch::autograd::AccumulateGrad"),
        ("grad_accumulated", (6.0,)),
        ("node_finished", "torch::autograd::AccumulateGrad", 0),
        ("graph_task_finished", False),
    ]


def test_grad_reports_pruning_exec_info_and_captures():
    """autograd.grad on a middle tensor: min_topo_nr pruning, exec_info, and the capture instead of a run."""
    x = torch.ones(2, requires_grad=True)
    k = x.exp() * 3
    y = k.sin().sum()
    log = Log()
    with torch.add_observer(log):
        torch.autograd.grad(y, [k])
    points = _points(log)
    deps = next(e for e in log.events if e[0] == "dependencies_computed")
    assert deps[1] == k.grad_fn._topological_nr()
    assert deps[2] == ("ExpBackward0",)  # below the output: not expanded
    assert ("exec_info_computed", 3) in log.events  # root, SinBackward0 and MulBackward0
    assert ("grad_captured", "MulBackward0", 0) in log.events
    assert ("node_started", "MulBackward0") not in log.events
    assert points[-1] == "graph_task_finished"


def test_hooks_and_errors_are_reported():
    """Hooks that return report their kind; a hook that raises is reported as the node's error instead."""
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: None)
    h.grad_fn.register_prehook(lambda go: None)
    h.grad_fn.register_hook(lambda gi, go: None)
    y = h.sum()
    x.register_post_accumulate_grad_hook(lambda p: None)
    log = Log()
    with torch.add_observer(log):
        y.backward()
        z = (x * 3).sum()
        z.grad_fn.register_prehook(lambda go: 1 / 0)
        try:
            z.backward()
        except ZeroDivisionError:
            pass
    kinds = [e[2] for e in log.events if e[0] == "hook_ran"]
    assert kinds == ["tensor_pre", "pre", "post", "post_accumulate_grad"]
    errors = [e for e in log.events if e[0] == "error_raised"]
    assert errors == [("error_raised", "SumBackward0", "ZeroDivisionError")]


def test_removed_observer_sees_nothing_more():
    """After handle.remove() the observer gets no further calls; removing twice is harmless."""
    log = Log()
    handle = torch.add_observer(log)
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    seen = len(log.events)
    handle.remove()
    handle.remove()
    (x * 2).sum().backward()
    assert seen > 0 and len(log.events) == seen


def test_observer_may_implement_only_some_points():
    """An observer with a single method is called for that point alone."""
    calls = []

    class OnlyPops:
        def task_popped(self, graph_task, task, queue):
            calls.append(task.fn.name())

    x = torch.ones(2, requires_grad=True)
    y = x.exp().sum()
    with torch.add_observer(OnlyPops()):
        y.backward()
    assert calls == ["SumBackward0", "ExpBackward0", "torch::autograd::AccumulateGrad"]
