"""The builder's event methods with a thread's row and a CPU queue's row filled in: what the bridge's model of the
engine writes to (model.py).

Imports neither torch nor the engine.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

from agdb.tracer.recording.builder import TraceBuilder


class Emitter:
    """The builder's event methods with a thread's row and a CPU queue's row filled in (what the model writes to).

    The events a node's replay writes (pops, pushes, buffer writes, its start and end, hooks, captures) are methods
    that call the builder's with every keyword spelt out: a functools.partial with keywords copies and merges its
    dict on each call, ~1 µs more a call, five or six calls a node. The events of a call's start and end are
    partials.
    """

    def __init__(self, builder: TraceBuilder, thread: int, queue: int) -> None:
        self.b = builder
        self.thread = thread
        self.queue = queue
        for name in ("graph_task_started", "dependencies_computed", "exec_info_computed", "grad_accumulated",
                     "error_raised", "graph_task_finished"):
            setattr(self, name, functools.partial(getattr(builder, name), thread=thread))
        self._pushed, self._popped, self._written = builder.task_pushed, builder.task_popped, builder.buffer_written
        self._started, self._finished = builder.node_started, builder.node_finished
        self._hook, self._captured = builder.hook_ran, builder.grad_captured

    def task_pushed(self, *, graph_task: int, node: int | None, seq_nr: int, queue_length: int) -> None:
        self._pushed(thread=self.thread, graph_task=graph_task, node=node, queue=self.queue, seq_nr=seq_nr,
                     queue_length=queue_length)

    def task_popped(self, *, graph_task: int, node: int | None, queue_length: int, stale: bool = False) -> None:
        self._popped(thread=self.thread, graph_task=graph_task, node=node, queue=self.queue, queue_length=queue_length,
                     stale=stale)

    def buffer_written(self, *, graph_task: int, node: int, slot: int, is_accumulation: bool) -> None:
        self._written(thread=self.thread, graph_task=graph_task, node=node, slot=slot, is_accumulation=is_accumulation)

    def node_started(self, *, graph_task: int, node: int, inputs: Sequence[Any]) -> None:
        self._started(thread=self.thread, graph_task=graph_task, node=node, inputs=inputs)

    def node_finished(self, *, graph_task: int, node: int, outputs: Sequence[Any]) -> None:
        self._finished(thread=self.thread, graph_task=graph_task, node=node, outputs=outputs)

    def hook_ran(self, *, graph_task: int, node: int, hook_kind: str, hook_name: str) -> None:
        self._hook(thread=self.thread, graph_task=graph_task, node=node, hook_kind=hook_kind, hook_name=hook_name)

    def grad_captured(self, *, graph_task: int, node: int, output_index: int, grad: Any) -> None:
        self._captured(thread=self.thread, graph_task=graph_task, node=node, output_index=output_index, grad=grad)

    @property
    def num_events(self) -> int:
        """How many events the builder holds."""
        return self.b.num_events
