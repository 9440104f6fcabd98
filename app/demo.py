"""The built-in example behind `agdb demo`: one small program that shows every concept the TUI explains.

A diamond whose branches meet again (gradient accumulation into one input buffer), a backward with two
roots, an `inputs=` backward that prunes the branch it does not need, a custom Function whose backward
runs a reentrant backward of its own, and a tensor hook. It is recorded on a fresh thread, whose sequence
number starts at 0, so its seq_nrs are the same in every process (the snapshot tests rely on that).
"""
from __future__ import annotations

import threading

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agdb import engine as torch
from agdb import tracer
from agdb.tracer.recording import culprits
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store.events import TaskPushed


class Cube(torch.autograd.Function):
    """x**3, whose backward asks the engine for d(x**3)/dx with a nested (reentrant) backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            inner = x.detach().requires_grad_()
            (inner * inner * inner).sum().backward()  # reentrant: runs inside this node
        return grad * inner.grad


def example() -> None:
    """The program the demo records."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    y = x.exp()
    y.register_hook(lambda g: g * 2)                   # a tensor hook on the diamond's top
    z = (y.sin() * w + y.cos()).sum()                  # the diamond: y feeds sin and cos
    z.backward(retain_graph=True)
    torch.autograd.backward([(x * 2).sum(), (w * w).sum()])   # two roots
    h = x * w
    u = h.sum() + w.exp().sum()
    u.backward(inputs=[h])     # exec_info runs only the path to h; topological_nr prunes what lies below it
    Cube.apply(x).sum().backward()                     # custom Function + reentrant backward


def record_example() -> tracer.Trace:
    """The example's trace, recorded on a thread of its own (named `demo`)."""
    result: list = []

    def run() -> None:
        with tracer.record() as rec:
            example()
        result.append(rec.trace)

    thread = threading.Thread(target=run, name="demo")
    thread.start()
    thread.join()
    return result[0]


def main() -> None:
    """Record the example and print culprits, execution order and one ready queue."""
    # Imported here, not above: the example's lines stay where the snapshots pin them.
    from agdb.tracer.views.labels import NodeLabels, priority_text, shown_name

    out = Console()
    trace = record_example()
    table = Table(title="who bumped seq_nr", title_justify="left")
    for col in ("seq_nr", "node", "line"):
        table.add_column(col)
    for c in culprits.of_trace(trace):
        table.add_row(f"{c.old} → {c.new}", shown_name(c.node_name), Text(f"{c.lineno}: {c.source}"))
    out.print(table)
    replay = Replay(trace)
    final = replay.state_at(len(trace) - 1)
    labels = NodeLabels(trace)
    out.print(Text("execution order: " + " → ".join(labels.label(n) for n in final.executed)))
    tie = next((e.step for e in trace if isinstance(e, TaskPushed) and e.queue_length >= 2), None)
    if tie is not None:
        state = replay.state_at(tie)
        for q in state.ready_queues:
            out.print(Text(f"ready queue at step {tie} (pop order): " +
                           ", ".join(f"{labels.task(t.node)} {priority_text(t.priority)}" for t in q.tasks)))
    out.print(f"{len(trace)} events recorded; try `agdb show` and `agdb culprits` on your own script.")


if __name__ == "__main__":
    main()
