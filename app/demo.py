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

from agdb import tracer
from agdb.tracer.recording import culprits
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store.events import TaskPushed
from agdb.tracer.views.labels import NodeLabels, priority_text, shown_name

from .demo_program import example


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
