"""The Recorder: an engine observer that writes every event through a TraceBuilder, then freezes a Trace.

Imports the engine's observer hook; never textual or rich.

NOTE [recording hot path]
Each hot instrumentation point extends the builder's flat rows by one tuple (kind, thread, graph_task, node uid,
a, b, c) (NOTE [builder fast path], NOTE [frozen chunks]);
list.extend with a tuple is atomic under the GIL, so events from worker threads interleave in one global order with
no lock. Everything else (names, edges, frames, grad summaries) goes to side lists and is decoded when
the recording finishes. Small grads are copied and summarised at finish; large ones are summarised at
once, so the recorder never keeps a big tensor alive. The per-task methods read the thread's index
inline (`self._local.index`) rather than through `_thread()`: a call per event is measurable here.
"""
from __future__ import annotations

import logging
import sys
import threading
import weakref
from typing import Any, Callable

import numpy as np

from agdb.tracer.recording import culprits
from agdb.tracer.recording.builder import CHUNK, ROW, SMALL, Bump, NodeFacts, TraceBuilder, summary_of
from agdb.tracer.recording.frames import columns as frame_columns
from agdb.tracer.recording.frames import is_agdb_code, user_frame, user_frame_from
from agdb.tracer.recording.leaf_names import LeafNamer, drop_snapshots
from agdb.tracer.recording.module_calls import ModuleCalls
from agdb.tracer.store.schema import UINT64_MAX, WAKE_UP, Kind
from agdb.tracer.store.trace import Trace

_getframe = sys._getframe
_new = tuple.__new__  # NodeFacts and Bump made without their class's Python-level __new__ (NOTE [builder fast path])
# Plain ints: the hot path compares and stores them (an IntEnum member costs a little more).
_K_BUMP, _K_CREATED, _K_PUSH, _K_POP = int(Kind.SEQ_NR_BUMPED), int(Kind.NODE_CREATED), int(Kind.TASK_PUSHED), \
    int(Kind.TASK_POPPED)
_K_BUFFER, _K_NSTART, _K_NFINISH = int(Kind.BUFFER_WRITTEN), int(Kind.NODE_STARTED), int(Kind.NODE_FINISHED)
_K_ACCUM = int(Kind.GRAD_ACCUMULATED)
_STALE_DEPTH = -2**31 + 1  # a NodeTask's key[1] (-reentrant depth) once its graph task is gone: -INT_MAX
_FREEZE_AT = CHUNK * ROW  # the length of the flat rows list at which they are frozen (NOTE [frozen chunks])


class Recorder:
    """Records engine events while attached, through a TraceBuilder; `finish()` returns the frozen Trace."""

    def __init__(self) -> None:
        self.builder = TraceBuilder(source="engine")
        raw = self.builder.raw_buffers()  # NOTE [builder fast path]
        self.rows, self.nodes, self.summaries, self.bumps, self._stacks = (raw.rows, raw.node_facts, raw.summaries,
                                                                           raw.bumps, raw.stacks)
        self._row_of_ident: dict[int, int] = {}  # the latest thread row with each ident
        self._queues: dict[str, int] = {}  # engine queue name -> queue row
        self._frames: dict[tuple, int] = {}  # (id of a code, bytecode offset) -> frame row
        self._frame_codes: list = []  # the codes of _frames' keys, kept alive
        self._local = threading.local()  # this thread's row
        self._lock = threading.Lock()
        self._handle = None
        self._log_culprits = False
        self._namer = LeafNamer()
        self._leaves: dict[int, Any] = {}  # uid -> weak ref to an AccumulateGrad with a leaf, while it lives
        self._node_init: Any = None  # the code of the engine's Node.__init__, once attached (NOTE [bump frames])
        self._calls: ModuleCalls | None = None  # the module calls running, while attached (NOTE [module paths])
        self._restore_call: Any = None

    # -- attaching -------------------------------------------------------------------------------------------
    def attach(self) -> Recorder:
        """Start recording (attaches to the engine's observer points)."""
        from agdb.engine import add_observer
        from agdb.engine._node import Node

        if self._handle is None:
            self._node_init = Node.__init__.__code__
            self._log_culprits = logging.getLogger("agdb.seq_nr").isEnabledFor(logging.INFO)
            self._attach_module_calls()
            self._handle = add_observer(self)
        return self

    def _attach_module_calls(self) -> None:
        """Wrap the engine's Module.__call__ while attached, so that each op knows the module call that made it (NOTE
        [module paths] in tracer/recording/module_calls.py). A recording nested in another keeps the outer one's."""
        from agdb.engine.nn.module import Module

        original = Module.__dict__["__call__"]
        if getattr(original, "__wrapped__", None) is not None:
            return
        self._calls = ModuleCalls(Module, lambda code: not is_agdb_code(code), drop_snapshots)
        Module.__call__ = self._calls.wrap(original)
        self._restore_call = lambda: setattr(Module, "__call__", original)

    def detach(self) -> None:
        """Stop recording; the events so far stay."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
            if self._restore_call is not None:
                self._restore_call()
                self._restore_call = self._calls = None

    @property
    def num_events(self) -> int:
        """How many events were recorded so far (TraceSource)."""
        return self.builder.num_events

    def finish(self, progress: Callable[[int, int], None] | None = None) -> Trace:
        """Detach and freeze what was recorded into a Trace."""
        self.detach()
        return self.builder.finish(progress)

    # -- small helpers (hot path) ---------------------------------------------------------------------------
    def _thread(self) -> int:
        try:
            return self._local.index
        except AttributeError:
            pass
        # A thread's first event: it gets a row of its own. Not looked up by ident: Python hands a finished
        # thread's ident to the next thread it starts, and two threads must not become one.
        ident = threading.get_ident()
        with self._lock:
            index = self.builder.thread(threading.current_thread().name)
            self._row_of_ident[ident] = index
            self._queues.pop(f"cpu:{ident}", None)  # that name now means this thread's queue
        self._local.index = index
        return index

    def _frame_index(self, f: Any, module: str = "") -> int:
        """The frame table row of frame `f` (the user's line and the columns of the expression running in it) in the
        module call `module` (NOTE [module paths]), or -1 for none."""
        if f is None:
            return -1
        # f_lasti: cheaper than f_lineno, and it tells `x * w` from `.sum()`. The code by id: hashing a code object
        # costs ~0.3 us (frames._inside); _frame_codes keeps each code alive, so its id is not reused.
        key = (id(f.f_code), f.f_lasti, module)
        index = self._frames.get(key)
        if index is None:
            code = f.f_code
            self._frame_codes.append(code)
            col, end_col = frame_columns(f)
            index = self._frames[key] = self.builder.frame(code.co_filename, f.f_lineno, code.co_name,
                                                           col=col, end_col=end_col, module=module)
        return index

    def _queue(self, queue: Any) -> int:
        """The queue row of an engine ReadyQueue. A thread's CPU queue (`cpu:<ident>` in the engine) is saved
        as `cpu:<thread row>`: idents differ from run to run, and the trace must not."""
        name = queue.name
        kind, _, ident = name.partition(":")
        if kind == "cpu" and ident.isdigit():
            row = self._row_of_ident.get(int(ident))
            name = f"cpu:{row}" if row is not None else "cpu"
        with self._lock:
            index = self._queues[queue.name] = self.builder.queue(name)
        return index

    def _register(self, node: Any) -> int:
        """Remember a node's static facts the first time it is seen; returns its uid."""
        uid = node._uid
        if uid not in self.nodes:
            self.nodes[uid] = _static(node, -1, self.builder.num_events, self._row_of_ident.get(node.thread_id, -1))
            if node._seq == UINT64_MAX:  # an AccumulateGrad made before recording began: named at backward start
                self._name_leaf(node)
            for child, _ in node.next_edges:
                if child is not None and child._uid not in self.nodes:
                    self._register(child)
        return uid

    def _name_leaf(self, node: Any) -> None:
        """Store the name of an AccumulateGrad's leaf where it is made (NOTE [leaf names] in leaf_names); a backward
        call that counts it names it again from its own frames (_name_leaves_at_call)."""
        variable = getattr(node, "variable", None)  # None: an Error node, which has seq_nr max too
        if variable is None:
            return
        uid = node._uid
        leaves = self._leaves
        leaves[uid] = weakref.ref(node, lambda _, uid=uid: leaves.pop(uid, None))
        try:
            name = self._namer.name_of(variable)
        except Exception:  # a look-up must never break a recording: the leaf stays `leaf N`
            name = None
        if name:
            self.builder.leaf_name(uid, name)

    def _name_leaves_at_call(self, counted: Any) -> None:
        """Name the leaves of the AccumulateGrads a graph task counts from the backward call's frames, as the bridge
        does (NOTE [leaf names]): one name for a leaf whichever source records it. Where the call's frames give none
        (a leaf bound only in a function that has returned), the name it got where it was made stays."""
        leaves = [(uid, n) for uid, ref in list(self._leaves.items()) if (n := ref()) is not None and n in counted]
        if not leaves:
            return
        names = self._namer.at_call()
        try:
            for uid, node in leaves:
                name = names.name(node.variable)
                if name:
                    self.builder.leaf_name(uid, name)
        except Exception:  # a look-up must never break a recording: the names made with the nodes stay
            pass
        finally:
            drop_snapshots(names.touched)

    def _summaries(self, tensors: Any) -> None:
        # Tuples, not lists: the gc stops tracking tuples of untracked objects, so a long recording does not make
        # every full collection walk its buffers. A small CPU tensor is kept as a bare array copy (builder.summaries'
        # layout), with no (array, device) tuple to make and freeze; node_started and node_finished handle the
        # commonest group, one such tensor, inline, and keep it as the bare array itself.
        group = []
        for t in tensors:  # None, a copy of a small CPU array, or summary_of's (copy, device) or summary
            data = getattr(t, "_data", None)
            if data is None:
                group.append(None)
            elif data.size <= SMALL and t._device == "cpu":
                group.append(data.copy())
            else:
                group.append(summary_of(data, t._device))
        self.summaries.append(tuple(group))

    # -- observer points ------------------------------------------------------------------------------------
    def seq_nr_bumped(self, node: Any, seq_nr: int) -> None:
        # The node is not finished yet: keep its name, number and line (node_created adds the rest; a
        # custom Function's node that never gets edges keeps just these).
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        uid = node._uid
        # NOTE [bump frames]: the engine bumps a node's seq_nr in Node.__init__, which calls this through notify; the
        # walk for the user's line starts past those frames when the frame two up is Node.__init__ (three fewer steps
        # of the walk per op), and at the caller otherwise (a direct call, a test).
        try:
            f = _getframe(2)
        except ValueError:  # called from a script's top level
            f = None
        frame = user_frame_from(f.f_back if f is not None and f.f_code is self._node_init else _getframe(1))
        calls = self._calls
        module = calls.current() if calls is not None else ""
        index = self._frames.get((id(frame.f_code), frame.f_lasti, module)) if frame is not None else -1
        if index is None:  # first look-up, inline: its call costs more than the look-up
            index = self._frame_index(frame, module)
        self.bumps[uid] = _new(Bump, (node._name or node.name(), seq_nr, index))
        self.rows.extend((_K_BUMP, thread, 0, uid, 0, 0, 0))
        if self._log_culprits:
            culprits.log_bump(node, seq_nr, frame, module)

    def node_created(self, node: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        uid = node._uid
        bump = self.bumps.get(uid)
        frame = bump[2] if bump is not None else self._frame_index(
            user_frame(), self._calls.current() if self._calls is not None else "")
        rows = self.rows
        metadata = node._input_metadata
        edges = node.next_edges
        if len(metadata) == 1 and metadata[0].device == "cpu" and len(edges) <= 2:
            # An op's node (one output on the CPU, one or two inputs): _static's facts, made inline (a call and a
            # list comprehension per op are measurable in the forward).
            if not edges:
                flat = ()
            elif len(edges) == 1:
                c, nr = edges[0]
                flat = (c._uid if c is not None else 0, nr)
            else:
                (c, nr), (c2, nr2) = edges
                flat = (c._uid if c is not None else 0, nr, c2._uid if c2 is not None else 0, nr2)
            self.nodes[uid] = _new(NodeFacts, (node._name or node.name(), node._seq, node._topo, "cpu", thread, flat,
                                               frame, self.builder.num_events, 1))
        else:
            self.nodes[uid] = _static(node, frame, self.builder.num_events, thread)
        if bump is not None:  # its facts are in the node's now; the snapshot copies bumps before node_facts
            del self.bumps[uid]
        rows.extend((_K_CREATED, thread, 0, uid, 0, 0, 0))
        if len(rows) >= _FREEZE_AT:  # NOTE [frozen chunks]
            self.builder.freeze_rows()
        if node._metadata is not None and "traceback_" in node._metadata:  # made under anomaly mode
            self._stacks[uid] = "".join(node._metadata["traceback_"])
        if node._seq == UINT64_MAX:  # AccumulateGrad (or an Error node): NOTE [leaf names]
            self._name_leaf(node)

    def graph_task_started(self, gt: Any) -> None:
        thread = self._thread()
        self._register(gt.graph_root)
        roots = tuple((self._register(r), 0) for r in gt.graph_roots if r is not None)
        inputs = tuple((self._register(n), nr) for n, nr in gt.outputs)
        self.builder.graph_task_started(thread=thread, graph_task=gt.id, graph_root=gt.graph_root._uid,
                                        roots=roots, inputs=inputs, keep_graph=gt.keep_graph,
                                        create_graph=gt.create_graph, accumulate_grad=gt.accumulate_grad,
                                        reentrant_depth=gt.reentrant_depth)

    def dependencies_computed(self, gt: Any, min_topo_nr: int, pruned: list) -> None:
        # One per node of the graph, during the backward: list passes and one array, not a pair and a call a node.
        counted = gt.dependencies
        uids = [n._uid for n in counted]
        known = self.nodes
        for n, uid in zip(counted, uids, strict=True):
            if uid not in known:
                self._register(n)
        self._name_leaves_at_call(counted)
        deps = np.column_stack((np.array(uids, dtype=np.int64), np.fromiter(counted.values(), np.int64, len(uids))))
        self.builder.dependencies_computed(thread=self._thread(), graph_task=gt.id, min_topo_nr=min_topo_nr,
                                           dependencies=deps, pruned=tuple(self._register(n) for n in pruned))

    def exec_info_computed(self, gt: Any) -> None:
        needed = tuple(self._register(n) for n, info in gt.exec_info.items() if info.needed)
        captured = tuple((self._register(n), i, o) for n, info in gt.exec_info.items()
                         for i, o in (info.captures or ()))
        self.builder.exec_info_computed(thread=self._thread(), graph_task=gt.id, needed=needed, captured=captured)

    # The queue points append rows in TraceBuilder.task_pushed/task_popped's layout (NOTE [builder fast path]). A
    # NodeTask is its own key ([kind, -reentrant depth, -seq_nr]): indexed directly, not through its `key` property.
    def task_pushed(self, gt: Any, task: Any, queue: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        q = self._queues.get(queue.name)
        if q is None:
            q = self._queue(queue)
        fn = task.fn
        if fn is None:
            self.rows.extend((_K_PUSH, thread, gt.id if gt is not None else 0, 0, q, len(queue.heap), WAKE_UP))
            return
        seq = -task[2]
        self.rows.extend((_K_PUSH, thread, gt.id if gt is not None else 0, fn._uid, q, len(queue.heap),
                          seq if seq < 2**63 else -1))

    def task_popped(self, gt: Any, task: Any, queue: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        q = self._queues.get(queue.name)
        if q is None:
            q = self._queue(queue)
        fn = task.fn
        owner = task.owner  # not `gt`, which is None once the task's graph task is gone
        if fn is None:
            self.rows.extend((_K_POP, thread, owner.id if owner is not None else 0, 0, q, len(queue.heap), 0))
            return
        # stale (a bool: 0 or 1): its graph task is gone, and set the task's depth to INT_MAX (GraphTask.mark_gone)
        self.rows.extend((_K_POP, thread, owner.id if owner is not None else 0, fn._uid, q, len(queue.heap),
                          task[1] == _STALE_DEPTH))

    # The fused points (NOTE [fused points] in engine/_observer.py): the two events' rows in one extend, as the two
    # points would write them.
    def task_popped_and_started(self, gt: Any, task: Any, queue: Any, inputs: list) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        q = self._queues.get(queue.name)
        if q is None:
            q = self._queue(queue)
        if len(inputs) == 1 and (t := inputs[0]) is not None and (data := t._data) is not None \
                and data.size <= SMALL and t._device == "cpu":
            self.summaries.append(data.copy())  # as in node_started
        else:
            self._summaries(inputs)
        task_id, uid = gt.id, task.fn._uid  # gt is task.owner: only a live graph task's node task is fused
        rows = self.rows
        rows.extend((_K_POP, thread, task_id, uid, q, len(queue.heap), task[1] == _STALE_DEPTH,
                     _K_NSTART, thread, task_id, uid, 0, 0, 0))
        if len(rows) >= _FREEZE_AT:  # NOTE [frozen chunks]
            self.builder.freeze_rows()

    def buffer_written_and_task_pushed(self, gt: Any, node: Any, slot: int, is_accumulation: bool, buffer: Any,
                                       task: Any, queue: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        q = self._queues.get(queue.name)
        if q is None:
            q = self._queue(queue)
        seq = -task[2]
        uid = node._uid
        self.rows.extend((_K_BUFFER, thread, gt.id, uid, slot, is_accumulation, 0,
                          _K_PUSH, thread, 0 if gt.gone else gt.id, task.fn._uid, q, len(queue.heap),
                          seq if seq < 2**63 else -1))

    def buffer_written(self, gt: Any, node: Any, slot: int, is_accumulation: bool, buffer: Any) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        self.rows.extend((_K_BUFFER, thread, gt.id, node._uid, slot, is_accumulation, 0))  # a bool is a 0 or 1

    def hook_ran(self, gt: Any, node: Any, kind: str, hook: Any) -> None:
        # a retains_grad hook is the engine's (it hands a weak reference to the tensor): named as the bridge does
        name = "retain_grad" if kind == "retains_grad" else getattr(hook, "__qualname__", None) or type(hook).__name__
        self.builder.hook_ran(thread=self._thread(), graph_task=gt.id if gt is not None else 0, node=node._uid,
                              hook_kind=kind, hook_name=name)

    # Summary groups are appended in step order, so the n-th summary-bearing event owns the n-th group.
    def node_started(self, gt: Any, node: Any, inputs: list) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        if len(inputs) == 1 and (t := inputs[0]) is not None and (data := t._data) is not None \
                and data.size <= SMALL and t._device == "cpu":
            self.summaries.append(data.copy())  # one small CPU tensor: the bare array (_summaries)
        else:
            self._summaries(inputs)
        rows = self.rows
        rows.extend((_K_NSTART, thread, gt.id, node._uid, 0, 0, 0))
        if len(rows) >= _FREEZE_AT:  # NOTE [frozen chunks]
            self.builder.freeze_rows()

    def node_finished(self, gt: Any, node: Any, outputs: list) -> None:
        try:
            thread = self._local.index
        except AttributeError:
            thread = self._thread()
        if len(outputs) == 1 and (t := outputs[0]) is not None and (data := t._data) is not None \
                and data.size <= SMALL and t._device == "cpu":
            self.summaries.append(data.copy())  # as in node_started
        elif len(outputs) == 2 and (outputs[1] is None or outputs[0] is None):
            # A binary op with one operand that needs no grad (`y * 1.0001`, `y + 0.5`: a third and more of a
            # backward's nodes): _summaries' group, (copy, None) or (None, copy), made inline when the other is a
            # small CPU tensor.
            t = outputs[0] if outputs[1] is None else outputs[1]
            if t is not None and (data := t._data) is not None and data.size <= SMALL and t._device == "cpu":
                self.summaries.append((data.copy(), None) if outputs[1] is None else (None, data.copy()))
            else:
                self._summaries(outputs)
        else:
            self._summaries(outputs)
        self.rows.extend((_K_NFINISH, thread, gt.id, node._uid, 0, 0, 0))

    def grad_captured(self, gt: Any, node: Any, output_index: int, grad: Any) -> None:
        self._summaries((grad,))
        self.rows.extend((int(Kind.GRAD_CAPTURED), self._thread(), gt.id, node._uid, output_index, 0, 0))

    def grad_accumulated(self, gt: Any, node: Any, variable: Any, grad: Any) -> None:
        self._summaries((grad,))
        self.rows.extend((_K_ACCUM, self._thread(), gt.id if gt is not None else 0, node._uid, 0, 0, 0))

    def error_raised(self, gt: Any, node: Any, error: BaseException) -> None:
        self.builder.error_raised(thread=self._thread(), graph_task=gt.id, node=node._uid if node is not None else None,
                                  error_type=type(error).__name__, message=str(error))

    def graph_task_finished(self, gt: Any) -> None:
        self.builder.graph_task_finished(thread=self._thread(), graph_task=gt.id, has_error=bool(gt.has_error))


def _static(node: Any, frame: int, step: int, thread: int) -> NodeFacts:
    """The node's facts (NOTE [builder fast path])."""
    metadata = node._input_metadata
    device = "cpu"
    for meta in metadata:  # Node.device(), inlined: the first non-CPU input device
        if meta.device != "cpu" and meta.is_defined:
            device = meta.device
            break
    return _new(NodeFacts, (node._name or node.name(), node._seq, node._topo, device, thread,
                            tuple([x for c, nr in node.next_edges for x in (c._uid if c is not None else 0, nr)]),
                            frame, step, len(metadata)))
