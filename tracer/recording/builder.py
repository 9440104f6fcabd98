"""TraceBuilder: the one way to write a trace. Any source (the engine's Recorder, the PyTorch bridge, a test)
calls one method per event with named arguments, then `finish()` freezes a Trace.

Never imports the engine, textual or rich. The format it writes is set out in docs/trace-format.md and
`tracer.store.schema`.

Identities are the source's own:
- a node is an int key >= 1 (0 and None mean "no node"); the node table lists nodes by ascending key, so a
  source that numbers nodes as it makes them gets them in creation order;
- a graph task is an int id >= 1 (0 outside backward); the trace renumbers them 1, 2, ... in the order they
  first appear, so the same program recorded twice gives the same trace;
- threads, queues and frames are rows the builder hands out (`thread()`, `queue()`, `frame()`).

NOTE [builder fast path]: the engine's Recorder sees ~7 events per backward node and must stay cheap, so for its
hottest events it does not call a method per event: `raw_buffers()` hands it the buffers the named methods write
(`RawBuffers`: the flat rows, node facts, bumps, summaries, stacks), and it appends to them in exactly the layout
those methods use; so does the PyTorch bridge for the one increment of each forward op, its graph walks and the
replay's per-node events (its Emitter). Every other source should call the named methods.

NOTE [frozen chunks]: a raw row (7 ints, flat in `rows`: 56 B of list slots, plus the ints not cached) would add
up to GBs for a 1M-node backward's 7M events, and freezing them all at the end took 20 s; so once `rows` holds
CHUNK rows, `freeze_rows` moves them into 7 numpy columns of the smallest dtype each (~20 B a row). Flat rather
than a tuple a row: no tuple to make, to read back or to free per event (`list.extend` with a tuple is as cheap as
`append`, and as atomic under the GIL, so one event's 7 ints stay together whatever other threads add).
Appenders never check on every event: node_created and node_started (one per node, forward and
backward) check the length, so `rows` stays within a few CHUNKs. `finish` reads the chunks, then the rows.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from agdb.tracer.recording.freeze import Snapshot, compact, freeze, merge_summary_blocks, summary_block
from agdb.tracer.recording.node_table import NodeFacts, NodeTable
from agdb.tracer.store.events import TensorSummary
from agdb.tracer.store.schema import HOOK_KINDS, WAKE_UP, Kind, Provenance, seq_code
from agdb.tracer.store.trace import Trace

_PREVIEW = 3
SMALL = 16
"""Grads with at most this many elements may be kept as arrays and summarised at finish, in blocks."""
CHUNK = 1 << 14
"""Raw rows frozen into compact numpy columns at a time (NOTE [frozen chunks])."""
ROW = 7
"""Ints per raw row in `RawBuffers.rows`: kind, thread, graph task, node key or 0, a, b, c."""


_new = tuple.__new__  # a NamedTuple made without its class's Python-level __new__ (NodeFacts says why)


class Bump(NamedTuple):
    """A node's seq_nr increment, kept until the node's facts hold its name, number and line."""

    name: str
    seq_nr: int  # the number the node took (the counter's value before the increment)
    frame: int  # frame row of the line that bumped it, or -1


@dataclass(frozen=True)
class RawBuffers:
    """The buffers behind TraceBuilder's named methods, for a source whose hottest events cannot afford a method
    call each (NOTE [builder fast path]). Write them exactly as the named methods do: an event is ROW ints appended
    with one `rows.extend((kind, thread, graph task, node key or 0, a, b, c))` (atomic under the GIL); its side data
    (a node's facts, a bump, a summary group) goes in before its row. Every node key >= 1."""

    rows: list[int]
    """Raw events not frozen yet, flat; call `TraceBuilder.freeze_rows()` once they hold CHUNK rows or more."""
    node_facts: dict[int, NodeFacts]
    """Where a node's facts are written (`nodes.recent`). With `pack_nodes` it holds only those written since the last
    pack: read facts through `nodes` (NOTE [packed node facts] in node_table.py)."""
    bumps: dict[int, Bump]
    """Increments of nodes whose facts are not written yet (a node's facts, once written, win)."""
    summaries: list
    """One group per event of a SUMMARY_KINDS kind, in step order: a tuple of None, (small array, device), or
    (shape, dtype, device, preview, has_nan, has_inf) per tensor; or, for one small CPU tensor, the bare array."""
    stacks: dict[int, str]
    """Node key -> the forward traceback anomaly mode kept."""
    nodes: NodeTable
    """Every node's facts, for reading (and for `NodeTable.write`, which changes fields of many nodes at once)."""


class TraceBuilder:
    """Collects one trace's events from any source; `finish()` returns the frozen Trace.

    Args:
        source: what writes the trace: `engine`, `torch`, or a tool's or test's name (kept in the trace).
        provenance: per event kind, `observed` or `reconstructed`; kinds left out are ones the source cannot
            provide (`missing`), so a panel can say so. Default: every kind observed.
        pack_nodes: move the nodes' facts into columns each time rows are frozen (NOTE [packed node facts] in
            node_table.py), for a source whose graphs have millions of nodes; it then reads them through
            `RawBuffers.nodes`, not `RawBuffers.node_facts`.
    """

    def __init__(self, source: str = "engine", provenance: Mapping[Kind, Provenance] | None = None,
                 pack_nodes: bool = False) -> None:
        self.source = source
        kinds = provenance if provenance is not None else {k: "observed" for k in Kind}
        self.provenance = {Kind(k).name.lower(): v for k, v in kinds.items() if v != "missing"}
        self._rows: list[int] = []  # raw events not frozen yet (RawBuffers.rows); those before are in _chunks
        self._chunks: list[tuple[np.ndarray, ...]] = []  # frozen rows: 7 compact columns per chunk
        self._frozen = 0  # rows in _chunks
        self._summary_blocks: list[dict] = []  # frozen summaries (_freeze.summary_block), before `summaries`
        self._chunk_lock = threading.Lock()  # one freezer at a time; a snapshot sees chunks and rows together
        self._nodes = NodeTable()
        self._node_facts = self._nodes.recent  # where facts are written; packed into _nodes' columns if _pack_nodes
        self._pack_nodes = pack_nodes
        self._summaries: list = []
        self._bumps: dict[int, Bump] = {}
        self._stacks: dict[int, str] = {}
        self._leaf_names: dict[int, str] = {}  # AccumulateGrad key -> its leaf's name (leaf_name)
        self._strings: dict[str, int] = {}
        self._threads: list[str] = []
        self._queues: dict[str, int] = {}
        self._frames: dict[tuple, int] = {}
        self._frame_rows: list[tuple] = []  # (file, line, function, source, col, end_col[, module])
        self._tasks: list[tuple] = []
        self._deps: list[tuple] = []
        self._exec_infos: list[tuple] = []
        try:
            self.cwd: str | None = os.getcwd()
            """Where relative file names of frames point: the directory the recording started in (a script may
            chdir later). `finish()` stores frame files made absolute against it, and their source lines."""
        except OSError:  # the directory was removed under us: relative names stay relative
            self.cwd = None

    # -- tables ---------------------------------------------------------------------------------------------------
    def thread(self, name: str) -> int:
        """A new row of the thread table; events name threads by row. Two threads may share a name."""
        self._threads.append(name)
        return len(self._threads) - 1

    def queue(self, name: str) -> int:
        """The row of ready queue `name` (`cuda:0`, or `cpu:T` for the CPU queue of thread row T)."""
        row = self._queues.get(name)
        if row is None:
            row = self._queues.setdefault(name, len(self._queues))
        return row

    def frame(self, filename: str, lineno: int, function: str, source: str | None = None, *, col: int = -1,
              end_col: int = -1, module: str = "") -> int:
        """The row of a Python line in the frame table; `source` is read from the file at finish when None.

        `col`, `end_col`: which part of the line was running (the expression that made the node), as a range of
        characters of the line's stripped text, end excluded; -1 for unknown (tracer.recording.frames.columns).
        `module`: the path of the module call that made the node (`model.fc1`; NOTE [module paths] in
        module_calls.py), "" for none.

        At finish the trace also stores the lines around it (schema.SOURCE_CONTEXT either side) from the file,
        if it is a regular file then, so that no reader ever opens a path a trace names.
        """
        if not 0 <= col < end_col:
            col = end_col = -1
        key = (filename, lineno, function, col, end_col, module) if module else (filename, lineno, function, col,
                                                                                 end_col)
        row = self._frames.get(key)
        if row is None:
            row = self._frames[key] = len(self._frame_rows)
            self._frame_rows.append((filename, lineno, function, source, col, end_col, module) if module else
                                    (filename, lineno, function, source, col, end_col))
        return row

    def string(self, text: str) -> int:
        """The id of `text` in the string table."""
        index = self._strings.get(text)
        if index is None:
            index = self._strings.setdefault(text, len(self._strings))
        return index

    def node(self, node: int, *, name: str, seq_nr: int, topological_nr: int = 0, device: str = "cpu",
             thread: int = -1, next_edges: Sequence[tuple[int | None, int]] = (), num_inputs: int = 1,
             frame: int = -1, stack: str = "") -> None:
        """Static facts of a node, for nodes the trace mentions but did not see made (no NodeCreated event)."""
        _check_key(node)
        edges = tuple(x for child, nr in next_edges for x in (child or 0, int(nr)))
        self._node_facts[node] = _new(NodeFacts, (name, seq_nr, topological_nr, device, thread, edges, frame,
                                                  self.num_events, num_inputs))
        if stack:
            self._stacks[node] = stack

    def leaf_name(self, node: int, name: str) -> None:
        """The name the user knows the leaf of AccumulateGrad `node` by: a module's parameter path (`fc1.weight`) or
        the variable bound to it (`w`). Readers tell AccumulateGrads apart by it (NOTE [leaf names] in
        tracer/recording/leaf_names.py); a leaf with no name is `leaf N` to them."""
        _check_key(node)
        if name:
            self._leaf_names[node] = str(name)

    # -- events ---------------------------------------------------------------------------------------------------
    def seq_nr_bumped(self, *, thread: int, node: int, name: str, old: int, seq_nr: int, frame: int = -1) -> None:
        """`node` (named `name`) took sequence number `old` from `thread`'s counter, which is now `seq_nr`."""
        _check_key(node)
        if seq_nr != old + 1:
            raise ValueError(f"a bump takes one number: old={old} but seq_nr={seq_nr}")
        self._bumps[node] = _new(Bump, (name, old, frame))
        self._rows.extend((Kind.SEQ_NR_BUMPED, thread, 0, node, 0, 0, 0))

    def node_created(self, *, thread: int, node: int, name: str, seq_nr: int, topological_nr: int,
                     next_edges: Sequence[tuple[int | None, int]] = (), device: str = "cpu", num_inputs: int = 1,
                     frame: int = -1, stack: str = "") -> None:
        """A backward node was made, its next edges attached (child key or None, input_nr per output slot)."""
        self.node(node, name=name, seq_nr=seq_nr, topological_nr=topological_nr, device=device, thread=thread,
                  next_edges=next_edges, num_inputs=num_inputs, frame=frame, stack=stack)
        self._rows.extend((Kind.NODE_CREATED, thread, 0, node, 0, 0, 0))
        if len(self._rows) >= CHUNK * ROW:
            self.freeze_rows()

    def graph_task_started(self, *, thread: int, graph_task: int, graph_root: int,
                           roots: Iterable[tuple[int, int]] = (), inputs: Iterable[tuple[int, int]] = (),
                           keep_graph: bool = False, create_graph: bool = False, accumulate_grad: bool = True,
                           reentrant_depth: int = 0) -> None:
        """backward() or autograd.grad() built `graph_task`; `inputs` are its `inputs=` as (node, input_nr)."""
        _check_task(graph_task)
        _check_key(graph_root)
        self._tasks.append((graph_root, tuple(roots), tuple(inputs), keep_graph, create_graph, accumulate_grad,
                            reentrant_depth))
        self._rows.extend((Kind.GRAPH_TASK_STARTED, thread, graph_task, graph_root, 0, 0, 0))

    def dependencies_computed(self, *, thread: int, graph_task: int, min_topo_nr: int,
                              dependencies: Iterable[tuple[int, int]], pruned: Iterable[int] = ()) -> None:
        """Each node's dependency count as (node, count) (or an (n, 2) int array of them), and the nodes not
        expanded because topo < min."""
        # An array, not pairs of ints: one per node of the graph (~60 B each as tuples); 32-bit where they fit.
        pairs = dependencies if isinstance(dependencies, np.ndarray) else list(dependencies)
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        if pairs.size and -2**31 <= pairs.min() and pairs.max() < 2**31:
            pairs = pairs.astype(np.int32)
        self._deps.append((pairs, tuple(pruned)))
        self._rows.extend((Kind.DEPENDENCIES_COMPUTED, thread, graph_task, 0, 0, min_topo_nr, 0))

    def exec_info_computed(self, *, thread: int, graph_task: int, needed: Iterable[int] = (),
                           captured: Iterable[tuple[int, int, int]] = ()) -> None:
        """exec_info: nodes marked needed, and captures as (node, input index, result index)."""
        self._exec_infos.append((tuple(needed), tuple(captured)))
        self._rows.extend((Kind.EXEC_INFO_COMPUTED, thread, graph_task, 0, 0, 0, 0))

    def task_pushed(self, *, thread: int, graph_task: int, node: int | None, queue: int, seq_nr: int,
                    queue_length: int) -> None:
        """A task for `node` (None: a wake-up task) entered ready queue row `queue`, now `queue_length` long."""
        code = WAKE_UP if node is None else seq_code(seq_nr)
        self._rows.extend((Kind.TASK_PUSHED, thread, graph_task, node or 0, queue, queue_length, code))

    def task_popped(self, *, thread: int, graph_task: int, node: int | None, queue: int, queue_length: int,
                    stale: bool = False) -> None:
        """A task left queue row `queue`; `stale` when its graph task was already gone (it is discarded).

        Which push it undoes is worked out at finish: the k-th pop of a (graph task, node, queue) undoes the
        k-th push of the same.
        """
        self._rows.extend((Kind.TASK_POPPED, thread, graph_task, node or 0, queue, queue_length, int(stale)))

    def buffer_written(self, *, thread: int, graph_task: int, node: int, slot: int, is_accumulation: bool) -> None:
        """A grad reached input slot `slot` of `node`: the first write, or added to the grad already there."""
        self._rows.extend((Kind.BUFFER_WRITTEN, thread, graph_task, node, slot, int(is_accumulation), 0))

    def hook_ran(self, *, thread: int, graph_task: int, node: int, hook_kind: str, hook_name: str) -> None:
        """A hook of `hook_kind` (one of schema.HOOK_KINDS) on `node` returned."""
        self._rows.extend((Kind.HOOK_RAN, thread, graph_task, node, HOOK_KINDS.index(hook_kind),
                          self.string(hook_name), 0))

    def node_started(self, *, thread: int, graph_task: int, node: int, inputs: Sequence[Any]) -> None:
        """`node`'s apply is about to run on `inputs` (TensorSummary, numpy array or None each)."""
        self._summaries.append(tuple(summary_item(t) for t in inputs))
        self._rows.extend((Kind.NODE_STARTED, thread, graph_task, node, 0, 0, 0))
        if len(self._rows) >= CHUNK * ROW:
            self.freeze_rows()

    def node_finished(self, *, thread: int, graph_task: int, node: int, outputs: Sequence[Any]) -> None:
        """`node`'s apply returned `outputs` (TensorSummary, numpy array or None each)."""
        self._summaries.append(tuple(summary_item(t) for t in outputs))
        self._rows.extend((Kind.NODE_FINISHED, thread, graph_task, node, 0, 0, 0))

    def grad_captured(self, *, thread: int, graph_task: int, node: int, output_index: int, grad: Any) -> None:
        """autograd.grad captured the grad flowing into `node` as its result `output_index`."""
        self._summaries.append((summary_item(grad),))
        self._rows.extend((Kind.GRAD_CAPTURED, thread, graph_task, node, output_index, 0, 0))

    def grad_accumulated(self, *, thread: int, graph_task: int, node: int, grad: Any) -> None:
        """AccumulateGrad `node` wrote its leaf's `.grad`."""
        self._summaries.append((summary_item(grad),))
        self._rows.extend((Kind.GRAD_ACCUMULATED, thread, graph_task, node, 0, 0, 0))

    def error_raised(self, *, thread: int, graph_task: int, node: int | None, error_type: str, message: str) -> None:
        """The first error of `graph_task`, raised in `node` (None: after the last node)."""
        self._rows.extend((Kind.ERROR_RAISED, thread, graph_task, node or 0, self.string(error_type),
                          self.string(message), 0))

    def graph_task_finished(self, *, thread: int, graph_task: int, has_error: bool = False) -> None:
        """`graph_task` is over; tasks of it still queued are stale from now on."""
        self._rows.extend((Kind.GRAPH_TASK_FINISHED, thread, graph_task, 0, int(has_error), 0, 0))

    # -- freezing -------------------------------------------------------------------------------------------------
    def finish(self, progress: Callable[[int, int], None] | None = None) -> Trace:
        """Freeze everything added so far into a Trace (the builder may be dropped afterwards)."""
        return freeze(self._snapshot(), progress)

    def raw_buffers(self) -> RawBuffers:
        """The buffers behind the named methods, for a source's hottest events (NOTE [builder fast path])."""
        return RawBuffers(self._rows, self._node_facts, self._bumps, self._summaries, self._stacks, self._nodes)

    @property
    def num_events(self) -> int:
        """How many events were added so far."""
        return self._frozen + len(self._rows) // ROW

    def freeze_rows(self) -> None:
        """Move the raw rows into a frozen chunk of compact columns (NOTE [frozen chunks]).

        Only called when `rows` is long: a raw row costs 56 B and more (its list slots and boxed ints), a frozen
        one ~20. Other threads may add rows while this runs: only the rows counted at the start move, and
        `del rows[:k]` (one C call, atomic under the GIL) removes exactly those, leaving later rows in order.
        """
        if not self._chunk_lock.acquire(blocking=False):
            return  # another thread is freezing: it will do
        try:
            rows = self._rows
            n = len(rows) // ROW
            if not n:
                return
            # The list itself, not a slice of it: fromiter reads the first `count` ints and stops (no copy of the
            # list's pointers; rows other threads append meanwhile go after them and stay).
            block = np.fromiter(rows, dtype=np.int64, count=n * ROW).reshape(n, ROW)
            self._chunks.append(tuple(compact(block[:, j]) for j in range(ROW)))
            del rows[:n * ROW]
            self._frozen += n
            summaries = self._summaries
            k = len(summaries)
            self._summary_blocks.append(summary_block(summaries[:k]))
            del summaries[:k]
        finally:
            self._chunk_lock.release()
        if self._pack_nodes:
            self._nodes.pack()

    def _snapshot(self) -> Snapshot:
        """Everything held, copied at one moment (Snapshot says in which order, and why)."""
        with self._chunk_lock:  # the frozen chunks and the raw rows after them together: no freeze in between
            chunks, rows = list(self._chunks), list(self._rows)
            summary_blocks, raw_summaries = list(self._summary_blocks), list(self._summaries)
        bumps = dict(self._bumps)  # before node_facts: the Recorder drops a node's bump once its facts are in
        return Snapshot(
            chunks=chunks, rows=rows, bumps=bumps, node_facts=self._nodes.snapshot(), stacks=dict(self._stacks),
            leaf_names=dict(self._leaf_names), strings=dict(self._strings),
            summaries=merge_summary_blocks([*summary_blocks, summary_block(raw_summaries)]),
            threads=list(self._threads), queues=dict(self._queues), frames=list(self._frame_rows),
            tasks=list(self._tasks), deps=list(self._deps), exec_infos=list(self._exec_infos),
            meta={"source": self.source, "provenance": dict(self.provenance)}, cwd=self.cwd)


def _check_key(node: int) -> None:
    if not isinstance(node, (int, np.integer)) or node < 1:
        raise ValueError(f"node keys are ints >= 1 (0 and None mean no node), not {node!r}")


def _check_task(task: int) -> None:
    if not isinstance(task, (int, np.integer)) or task < 1:
        raise ValueError(f"graph task ids are ints >= 1 (0 means outside backward), not {task!r}")


def summary_item(t: Any) -> Any:
    """What `summaries` keeps of one tensor (None, a TensorSummary or an array): None, (a copy of a small array,
    device) or a summary tuple."""
    if t is None:
        return None
    if isinstance(t, TensorSummary):
        return (t.shape, t.dtype, t.device, t.preview[:_PREVIEW], t.has_nan, t.has_inf)
    return summary_of(np.asarray(t), "cpu")


def summary_of(data: np.ndarray, device: str) -> tuple:
    """A small array is copied, to be summarised at finish with others of its shape; a large one summarised now,
    so a trace never keeps a big tensor alive."""
    if data.size <= SMALL:
        return (data.copy(), device)
    return summarize(data, device)


def summarize(data: np.ndarray, device: str) -> tuple:
    """(shape, dtype, device, preview, has_nan, has_inf) of an array.

    Once per large grad of a recording (the bridge's reconstruction of an MLP makes one per Linear layer's node):
    numpy's `dtype.name` is Python code (a few µs, hence `_DTYPE_NAMES`), a float array's `tolist()` gives the floats
    `float()` would, and one reduction of `isfinite` tells whether the nan and inf checks are needed at all.
    """
    flat = data.reshape(-1)
    head = flat[:_PREVIEW]
    dtype = data.dtype
    kind = dtype.kind
    if kind == "f":
        preview = tuple(head.tolist())
        if _all(_isfinite(flat)):
            has_nan = has_inf = False
        else:
            has_nan, has_inf = bool(np.isnan(flat).any()), bool(np.isinf(flat).any())
    else:
        preview = tuple(float(v) for v in (head.real if kind == "c" else head))  # a complex grad: its real part
        has_nan = has_inf = False
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return (tuple(data.shape), name, device, preview, has_nan, has_inf)


_DTYPE_NAMES: dict[np.dtype, str] = {}
_isfinite = np.isfinite
_all = np.logical_and.reduce
