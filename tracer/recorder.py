"""The Recorder: an engine observer that appends every event to plain buffers, then freezes a Trace.

Imports numpy, the standard library and the engine's observer hook only; never textual or rich.

NOTE [recording hot path]
Each instrumentation point appends one tuple (kind, thread, graph_task, node uid, a, b, c) to a list;
list.append is atomic under the GIL, so events from worker threads interleave in one global order with
no lock. Everything else (names, edges, frames, grad summaries) goes to side lists and is decoded when
the recording finishes. Small grads are copied and summarised at finish; large ones are summarised at
once, so the recorder never keeps a big tensor alive. The per-task methods read the thread's index
inline (`self._local.index`) rather than through `_thread()`: a call per event is measurable here.
"""
from __future__ import annotations

import linecache
import logging
import os
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from .events import (
    HOOK_KINDS,
    KIND_CODES,
    UINT64_MAX,
    BufferWritten,
    DependenciesComputed,
    ErrorRaised,
    ExecInfoComputed,
    GradAccumulated,
    GradCaptured,
    GraphTaskFinished,
    GraphTaskStarted,
    HookRan,
    NodeCreated,
    NodeFinished,
    NodeStarted,
    SeqNrBumped,
    TaskPopped,
    TaskPushed,
)

K_BUMP, K_CREATED, K_STARTED_TASK = KIND_CODES[SeqNrBumped], KIND_CODES[NodeCreated], KIND_CODES[GraphTaskStarted]
K_DEPS, K_EXEC = KIND_CODES[DependenciesComputed], KIND_CODES[ExecInfoComputed]
K_PUSH, K_POP, K_BUFFER = KIND_CODES[TaskPushed], KIND_CODES[TaskPopped], KIND_CODES[BufferWritten]
K_HOOK, K_NSTART, K_NFINISH = KIND_CODES[HookRan], KIND_CODES[NodeStarted], KIND_CODES[NodeFinished]
K_CAPTURED, K_ACCUM = KIND_CODES[GradCaptured], KIND_CODES[GradAccumulated]
K_ERROR, K_FINISHED = KIND_CODES[ErrorRaised], KIND_CODES[GraphTaskFinished]

_SMALL = 16  # grads with at most this many elements are copied now and summarised at finish
_PREVIEW = 3

# Frames in these packages are skipped when looking for the user's line. The app is not among them:
# it calls the user's script from above, so the walk outward from the engine meets the user first.
_AGDB_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), pkg) + os.sep
    for pkg in ("engine", "tracer"))


def seq_code(seq: int) -> int:
    """A seq_nr as stored in an int64 column: 2**64-1 (AccumulateGrad, Error) becomes -1."""
    return -1 if seq >= 2**63 else seq


def seq_decode(code: int) -> int:
    """Inverse of seq_code."""
    return UINT64_MAX if code == -1 else int(code)


class Recorder:
    """Records engine events while attached; `finish()` returns the frozen Trace."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.strings: dict[str, int] = {}
        self.node_threads: dict[int, int] = {}  # node uid -> row of the thread that made it, as recorded
        self.thread_rows: list[tuple[int, str]] = []
        self.queues: dict[str, int] = {}
        self.frames: dict[tuple, int] = {}
        self.frame_rows: list[tuple[str, int, str]] = []
        self.nodes: dict[int, tuple] = {}  # uid -> static node info
        # Ragged payloads, each in step order of the events that own them.
        self.tasks: list[tuple] = []
        self.deps: list[tuple] = []
        self.exec_infos: list[tuple] = []
        self.summaries: list[tuple] = []
        self._local = threading.local()  # this thread's index into thread_rows
        self.bumps: dict[int, tuple[str, int, int]] = {}  # uid -> (name, seq_nr, frame) at the bump
        self.stacks: dict[int, str] = {}  # uid -> forward stack, for nodes made under anomaly mode
        self._lock = threading.Lock()
        self._handle = None
        self._log_culprits = False

    # -- attaching -------------------------------------------------------------------------------------------
    def attach(self) -> Recorder:
        """Start recording (attaches to the engine's observer points)."""
        from engine import add_observer

        if self._handle is None:
            self._log_culprits = logging.getLogger("agdb.seq_nr").isEnabledFor(logging.INFO)
            self._handle = add_observer(self)
        return self

    def detach(self) -> None:
        """Stop recording; the events so far stay."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def finish(self, progress: Any = None) -> Any:
        """Detach and freeze what was recorded into a Trace."""
        from .trace import build_trace

        self.detach()
        return build_trace(self, progress)

    # -- small helpers (hot path) ---------------------------------------------------------------------------
    def _thread(self) -> int:
        try:
            return self._local.index
        except AttributeError:
            pass
        # A thread's first event: it gets a row of its own. Not looked up by ident: Python hands a finished
        # thread's ident to the next thread it starts, and two threads must not become one.
        with self._lock:
            index = len(self.thread_rows)
            self.thread_rows.append((threading.get_ident(), threading.current_thread().name))
        self._local.index = index
        return index

    def _str(self, text: str) -> int:
        index = self.strings.get(text)
        if index is None:
            index = self.strings.setdefault(text, len(self.strings))
        return index

    def _frame_index(self, f: Any) -> int:
        """The frame table row of frame `f` (the user's line), or -1 for none."""
        if f is None:
            return -1
        key = (f.f_code, f.f_lineno)
        index = self.frames.get(key)
        if index is None:
            index = self.frames.setdefault(key, len(self.frame_rows))
            if index == len(self.frame_rows):
                self.frame_rows.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        return index

    def _register(self, node: Any) -> int:
        """Remember a node's static facts the first time it is seen; returns its uid."""
        uid = node._uid
        if uid not in self.nodes:
            self.nodes[uid] = _static(node, -1, len(self.rows))
            for child, _ in node.next_edges:
                if child is not None and child._uid not in self.nodes:
                    self._register(child)
        return uid

    def _summaries(self, tensors: Any) -> None:
        # Tuples, not lists: the gc stops tracking tuples of untracked objects, so a long recording does
        # not make every full collection walk its buffers. One tensor is the common case: no loop.
        if len(tensors) == 1:
            t = tensors[0]
            data = t._data if t is not None else None
            if data is not None and data.size <= _SMALL:
                self.summaries.append(((data.copy(), t._device),))
                return
        self.summaries.append(tuple([_capture(t) for t in tensors]))

    # -- observer points ------------------------------------------------------------------------------------
    def seq_nr_bumped(self, node: Any, seq_nr: int) -> None:
        # The node is not finished yet: keep its name, number and line (node_created adds the rest; a
        # custom Function's node that never gets edges keeps just these).
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        uid = node._uid
        frame = user_frame()
        self.bumps[uid] = (node._name or node.name(), seq_nr, self._frame_index(frame))
        self.rows.append((K_BUMP, thread, 0, uid, 0, 0, 0))
        if self._log_culprits:
            from .culprits import log_bump

            log_bump(node, seq_nr, frame)

    def node_created(self, node: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        uid = node._uid
        bump = self.bumps.get(uid)
        frame = bump[2] if bump is not None else self._frame_index(user_frame())
        rows = self.rows
        self.nodes[uid] = _static(node, frame, len(rows))
        self.node_threads[uid] = thread
        rows.append((K_CREATED, thread, 0, uid, 0, 0, 0))
        if node._metadata is not None and "traceback_" in node._metadata:  # made under anomaly mode
            self.stacks[uid] = "".join(node._metadata["traceback_"])

    def graph_task_started(self, gt: Any) -> None:
        self._register(gt.graph_root)
        info = (gt.graph_root._uid, tuple((self._register(n), nr) for n, nr in
                                          ((r, 0) for r in gt.graph_roots if r is not None)),
                tuple((self._register(n), nr) for n, nr in gt.outputs),
                gt.keep_graph, gt.create_graph, gt.accumulate_grad, gt.reentrant_depth)
        self.tasks.append(info)
        self.rows.append((K_STARTED_TASK, self._thread(), gt.id, gt.graph_root._uid, 0, 0, 0))

    def dependencies_computed(self, gt: Any, min_topo_nr: int, pruned: list) -> None:
        deps = tuple((self._register(n), c) for n, c in gt.dependencies.items())
        self.deps.append((deps, tuple(self._register(n) for n in pruned)))
        self.rows.append((K_DEPS, self._thread(), gt.id, 0, 0, min_topo_nr, 0))

    def exec_info_computed(self, gt: Any) -> None:
        needed = tuple(self._register(n) for n, info in gt.exec_info.items() if info.needed)
        captured = tuple((self._register(n), i, o) for n, info in gt.exec_info.items()
                         for i, o in (info.captures or ()))
        self.exec_infos.append((needed, captured))
        self.rows.append((K_EXEC, self._thread(), gt.id, 0, 0, 0, 0))

    def task_pushed(self, gt: Any, task: Any, queue: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        q = self.queues.get(queue.name)
        if q is None:
            q = self._queue(queue)
        fn = task.fn
        if fn is None:
            self.rows.append((K_PUSH, thread, gt.id if gt is not None else 0, 0, q, len(queue.heap), -2))
            return
        seq = -task.key[2]
        self.rows.append((K_PUSH, thread, gt.id if gt is not None else 0, fn._uid, q, len(queue.heap),
                          seq if seq < 2**63 else -1))

    def task_popped(self, gt: Any, task: Any, queue: Any) -> None:
        # Which push this pop undoes is worked out when the trace is built (FIFO per task, node and queue).
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        q = self.queues.get(queue.name)
        if q is None:
            q = self._queue(queue)
        fn = task.fn
        owner = task.owner
        self.rows.append((K_POP, thread, owner.id if owner is not None else 0, fn._uid if fn is not None else 0, q,
                          len(queue.heap), int(fn is not None and task.key[1] == -2**31 + 1)))

    def _queue(self, queue: Any) -> int:
        index = self.queues.get(queue.name)
        if index is None:
            index = self.queues.setdefault(queue.name, len(self.queues))
        return index

    def buffer_written(self, gt: Any, node: Any, slot: int, is_accumulation: bool, buffer: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        self.rows.append((K_BUFFER, thread, gt.id, node._uid, slot, int(is_accumulation), 0))

    def hook_ran(self, gt: Any, node: Any, kind: str, hook: Any) -> None:
        name = getattr(hook, "__qualname__", None) or type(hook).__name__
        self.rows.append((K_HOOK, self._thread(), gt.id if gt is not None else 0, node._uid,
                          HOOK_KINDS.index(kind), self._str(name), 0))

    # Summary groups are appended in step order, so the n-th summary-bearing event owns the n-th group.
    def node_started(self, gt: Any, node: Any, inputs: list) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        self._summaries(inputs)
        self.rows.append((K_NSTART, thread, gt.id, node._uid, 0, 0, 0))

    def node_finished(self, gt: Any, node: Any, outputs: list) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        self._summaries(outputs)
        self.rows.append((K_NFINISH, thread, gt.id, node._uid, 0, 0, 0))

    def grad_captured(self, gt: Any, node: Any, output_index: int, grad: Any) -> None:
        self._summaries((grad,))
        self.rows.append((K_CAPTURED, self._thread(), gt.id, node._uid, output_index, 0, 0))

    def grad_accumulated(self, gt: Any, node: Any, variable: Any, grad: Any) -> None:
        self._summaries((grad,))
        self.rows.append((K_ACCUM, self._thread(), gt.id if gt is not None else 0, node._uid, 0, 0, 0))

    def error_raised(self, gt: Any, node: Any, error: BaseException) -> None:
        self.rows.append((K_ERROR, self._thread(), gt.id, node._uid if node is not None else 0,
                          self._str(type(error).__name__), self._str(str(error)), 0))

    def graph_task_finished(self, gt: Any) -> None:
        self.rows.append((K_FINISHED, self._thread(), gt.id, 0, int(gt.has_error), 0, 0))


_inside: dict[Any, bool] = {}  # code object -> whether it belongs to engine/ or tracer/


def user_frame() -> Any:
    """The innermost frame outside engine/ and tracer/: the user's line that caused what is happening."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        inside = _inside.get(code)
        if inside is None:
            if len(_inside) > 100_000:  # code made by exec() keeps coming: do not keep all of it alive
                _inside.clear()
            inside = _inside[code] = code.co_filename.startswith(_AGDB_DIRS)
        if not inside:
            return f
        f = f.f_back
    return None


def _capture(t: Any) -> Any:
    """None, (a copy of a small array, device), or the summary of a large one."""
    data = getattr(t, "_data", None)
    if data is None:
        return None
    if data.size <= _SMALL:
        return (data.copy(), t._device)
    return summarize(data, t._device)


def _static(node: Any, frame: int, step: int) -> tuple:
    """(name, seq, topo, device, thread ident, edges as (child uid, input_nr), frame, step, num inputs)."""
    metadata = node._input_metadata
    device = "cpu"
    for meta in metadata:  # Node.device(), inlined: the first non-CPU input device
        if meta.device != "cpu" and meta.is_defined:
            device = meta.device
            break
    return (node._name or node.name(), node._seq, node._topo, device, node.thread_id,
            tuple([(c._uid if c is not None else 0, nr) for c, nr in node.next_edges]), frame, step, len(metadata))


def summarize(data: np.ndarray, device: str) -> tuple:
    """(shape, dtype, device, preview, has_nan, has_inf) of an array."""
    flat = data.reshape(-1)
    preview = tuple(float(v) for v in flat[:_PREVIEW])
    if data.dtype.kind == "f":
        finite = np.isfinite(flat)
        has_nan = bool(np.isnan(flat).any()) if not finite.all() else False
        has_inf = bool(np.isinf(flat).any()) if not finite.all() else False
    else:
        has_nan = has_inf = False
    return (tuple(data.shape), data.dtype.name, device, preview, has_nan, has_inf)


def source_line(filename: str, lineno: int) -> str:
    """The stripped source text of a line, or '' when it cannot be read."""
    return linecache.getline(filename, lineno).strip()


@contextmanager
def record() -> Iterator[Any]:
    """`with tracer.record() as rec:` records everything inside; `rec.trace` holds the Trace afterwards."""
    recorder = Recorder().attach()
    handle = _RecordingHandle(recorder)
    try:
        yield handle
    finally:
        handle.trace = recorder.finish()


class _RecordingHandle:
    """What `record()` yields: the live recorder, and the trace once the block has ended."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.trace: Any = None
