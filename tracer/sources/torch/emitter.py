"""The builder's event methods with a thread's row and a CPU queue's row filled in: what the bridge's model of the
engine writes to (model.py).

Imports neither torch nor the engine.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

from numpy import ndarray

from agdb.tracer.recording.builder import CHUNK, ROW, TraceBuilder
from agdb.tracer.store.schema import WAKE_UP, Kind

_FULL = CHUNK * ROW  # raw row ints past which the rows are frozen (TraceBuilder.node_started's check)
_PUSHED, _POPPED, _WRITTEN = Kind.TASK_PUSHED, Kind.TASK_POPPED, Kind.BUFFER_WRITTEN
_STARTED, _FINISHED = Kind.NODE_STARTED, Kind.NODE_FINISHED
_CAPTURED, _ACCUMULATED = Kind.GRAD_CAPTURED, Kind.GRAD_ACCUMULATED


def group(grads: Sequence[Any]) -> Any:
    """The summary group of an event's grads, each the builder's summary item of its grad already (Reconstruction.item,
    or a small grad's values as a bare array: NOTE [small grads at once] in reconstruct.py): one bare array alone is
    the group itself, as the engine's Recorder writes one small CPU grad (NOTE [summary fast path] in
    tracer/recording/freeze.py), else a tuple of them."""
    if len(grads) == 1 and type(grads[0]) is ndarray:
        return grads[0]
    return tuple(grads)


class Emitter:
    """The builder's event methods with a thread's row and a CPU queue's row filled in (what the model writes to).

    The events a node's replay writes (pops, pushes, buffer writes, its start and end, captures, accumulations) go
    straight into the builder's raw buffers (NOTE [builder fast path] in tracer/recording/builder.py), in the layout
    its named methods use: through those, each event would cost two more calls with every keyword spelt out, five or
    six events a node. Each grad comes as the builder's summary item of it (`group`). The events of a call's start
    and end are the builder's methods, as partials.
    """

    def __init__(self, builder: TraceBuilder, thread: int, queue: int) -> None:
        self.b = builder
        self.thread = thread
        self.queue = queue
        for name in ("graph_task_started", "dependencies_computed", "exec_info_computed", "error_raised",
                     "graph_task_finished"):
            setattr(self, name, functools.partial(getattr(builder, name), thread=thread))
        raw = builder.raw_buffers()
        self._rows, self._summaries = raw.rows, raw.summaries
        self._hook = builder.hook_ran

    def task_pushed(self, *, graph_task: int, node: int | None, seq_nr: int, queue_length: int) -> None:
        # seq_code inline: 2**64-1 (AccumulateGrad, Error) is stored as -1
        self._rows.extend((_PUSHED, self.thread, graph_task, node or 0, self.queue, queue_length,
                           WAKE_UP if node is None else -1 if seq_nr >= 2**63 else seq_nr))

    def task_popped(self, *, graph_task: int, node: int | None, queue_length: int, stale: bool = False) -> None:
        self._rows.extend((_POPPED, self.thread, graph_task, node or 0, self.queue, queue_length, int(stale)))

    def buffer_written(self, *, graph_task: int, node: int, slot: int, is_accumulation: bool) -> None:
        self._rows.extend((_WRITTEN, self.thread, graph_task, node, slot, int(is_accumulation), 0))

    def node_started(self, *, graph_task: int, node: int, inputs: Sequence[Any]) -> None:
        self._summaries.append(group(inputs))  # its side data before its row, as the builder's methods write
        rows = self._rows
        rows.extend((_STARTED, self.thread, graph_task, node, 0, 0, 0))
        if len(rows) >= _FULL:
            self.b.freeze_rows()

    def node_finished(self, *, graph_task: int, node: int, outputs: Sequence[Any]) -> None:
        self._summaries.append(group(outputs))
        self._rows.extend((_FINISHED, self.thread, graph_task, node, 0, 0, 0))

    def hook_ran(self, *, graph_task: int, node: int, hook_kind: str, hook_name: str) -> None:
        self._hook(thread=self.thread, graph_task=graph_task, node=node, hook_kind=hook_kind, hook_name=hook_name)

    def grad_captured(self, *, graph_task: int, node: int, output_index: int, grad: Any) -> None:
        self._summaries.append(grad if type(grad) is ndarray else (grad,))
        self._rows.extend((_CAPTURED, self.thread, graph_task, node, output_index, 0, 0))

    def grad_accumulated(self, *, graph_task: int, node: int, grad: Any) -> None:
        self._summaries.append(grad if type(grad) is ndarray else (grad,))
        self._rows.extend((_ACCUMULATED, self.thread, graph_task, node, 0, 0, 0))

    @property
    def num_events(self) -> int:
        """How many events the builder holds."""
        return self.b.num_events
