"""Small helpers shared by several engine test files: a fresh-thread runner, graph instrumentation with
pre-hooks, a GraphTask recorder, and custom autograd.Functions that more than one file uses unchanged."""
from __future__ import annotations

import threading

from agdb import engine
from agdb.engine.autograd.function import once_differentiable

# torch's exact text for a second backward through freed saved tensors (engine-semantics §5.4, e3_hooks).
ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)


def run_in_thread(fn):
    """Run `fn` in a fresh thread (fresh sequence counter and ready queue); return its result or re-raise its error."""
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the test thread
            box["error"] = e

    th = threading.Thread(target=target)
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def hook_every_node(roots, on_node) -> None:
    """Register on every node reachable from `roots` (each once) a pre-hook calling `on_node(node)` when it runs."""
    seen = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)

        def pre(grad_outputs, n=n):
            on_node(n)

        n.register_prehook(pre)
        stack.extend(c for c, _ in n.next_functions)


def node_label(node, leaf_names: dict[int, str]) -> str:
    """`Acc(<leaf name>)` for an AccumulateGrad (leaf named by id in `leaf_names`, else `?`), else `Name#seq`."""
    if hasattr(node, "variable"):
        return "Acc(%s)" % leaf_names.get(id(node.variable), "?")
    return "%s#%d" % (node.name(), node._sequence_nr())


def acc_of(leaf):
    """The AccumulateGrad node of `leaf` (created if it does not exist yet, taking no seq_nr: unlike
    get_gradient_edge, whose throwaway view_as takes one)."""
    return engine._tensor.grad_accumulator(leaf)


class GraphTaskRecorder:
    """Observer that keeps every GraphTask handed to graph_task_started, in order, in `tasks`."""

    def __init__(self) -> None:
        self.tasks = []

    def graph_task_started(self, graph_task):
        self.tasks.append(graph_task)


class PassFirst(engine.autograd.Function):
    """out = a + b; backward passes the grad to `a` and returns None for `b`."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, None


class OD(engine.autograd.Function):
    """out = a * 2 with a @once_differentiable backward (g * 2)."""

    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return g * 2
