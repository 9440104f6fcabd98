"""`make demo` until the TUI lands: records a small example and prints what the engine did.

Shows the lines that bumped the sequence number, the order the engine ran the nodes in, and the ready
queue at the step where two AccumulateGrads tie.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

import engine as torch
import tracer
from tracer import culprits
from tracer.events import TaskPushed
from tracer.replay import Replay


def example() -> None:
    """A diamond with gradient accumulation and a shared leaf, then a two-root backward."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    y = x.exp()
    z = (y.sin() * w + y.cos()).sum()
    z.backward(retain_graph=True)
    torch.autograd.backward([(x * 2).sum(), (w * w).sum()])


def record_example() -> tracer.Trace:
    """The example's trace."""
    with tracer.record() as rec:
        example()
    return rec.trace


def main() -> None:
    """Record the example and print culprits, execution order and one ready queue."""
    out = Console()
    trace = record_example()
    table = Table(title="who bumped seq_nr", title_justify="left")
    for col in ("seq_nr", "node", "line"):
        table.add_column(col)
    for c in culprits.of_trace(trace):
        table.add_row(f"{c.old} → {c.new}", c.node_name, Text(f"{c.lineno}: {c.source}"))
    out.print(table)
    replay = Replay(trace)
    final = replay.state_at(len(trace) - 1)
    out.print("execution order: " + " → ".join(trace.node_name(n) for n in final.executed))
    tie = next((e.step for e in trace if isinstance(e, TaskPushed) and e.queue_length >= 2), None)
    if tie is not None:
        state = replay.state_at(tie)
        for q in state.ready_queues:
            out.print(f"ready queue at step {tie} (pop order): " +
                      ", ".join(f"{t.name} {t.priority}" for t in q.tasks))
    out.print(f"{len(trace)} events recorded; try `agdb show` and `agdb culprits` on your own script.")


if __name__ == "__main__":
    main()
