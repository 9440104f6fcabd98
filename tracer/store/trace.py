"""Trace: a finished recording held as numpy columns and a string table; events are decoded on demand.

Never imports the engine, textual or rich. A Trace is immutable (its arrays are read-only). Node
references in events are indices into the node table; `Trace.node(i)` gives a node's static facts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from agdb.tracer.store import events as ev
from agdb.tracer.store.indexes import TraceIndex
from agdb.tracer.store.printable import printable
from agdb.tracer.store.schema import (
    HOOK_KINDS,
    INT_MAX,
    SUMMARY_KINDS,
    WAKE_UP,
    WAKE_UP_PRIORITY,
    Kind,
    Provenance,
    seq_decode,
    short_name,
)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Static facts about a node of the trace."""

    index: int
    name: str
    seq_nr: int
    topological_nr: int
    device: str
    thread: int  # index into Trace.threads, or -1 for a thread that recorded no event
    next_edges: tuple[tuple[int | None, int], ...]
    created_at: int  # step of its NodeCreated (or of its first mention)
    num_inputs: int  # input slots (grads it receives): one per output of its forward op
    filename: str
    lineno: int
    function: str
    source: str
    forward_stack: str = ""  # the forward traceback, for nodes made under anomaly mode
    col: int = -1  # the expression of `source` that made it: source[col:end_col] (-1: unknown)
    end_col: int = -1
    module: str = ""  # the module call that made it, as the user reaches the module (`model.fc1`), or ""

    @property
    def forward_op(self) -> str:
        """The forward op that made this node, from its name (MulBackward0 -> mul)."""
        return forward_op(self.name)


def forward_op(name: str) -> str:
    """`MulBackward0` -> `mul`, `AddmmBackward0` -> `addmm`, a leaf's AccumulateGrad -> `leaf`."""
    if name.endswith("AccumulateGrad"):
        return "leaf"
    base = short_name(name)
    cut = base.find("Backward")
    return (base[:cut] if cut > 0 else base).lower()


class Trace:
    """A recording of engine events, frozen: columns, a string table and side tables."""

    def __init__(self, columns: dict[str, np.ndarray], strings: list[str], meta: dict | None = None) -> None:
        self.columns = columns
        self.strings = tuple(strings)
        self.meta = dict(meta or {})
        _derive(columns)
        for arr in columns.values():
            arr.flags.writeable = False
        c = columns
        self.threads = tuple((i, self.strings[n]) for i, n in enumerate(c["thread_name"].tolist()))
        """(row, name) of every thread that recorded an event; events name threads by row."""
        self.queues = tuple(self.strings[n] for n in c["queue_name"])
        self._node_cache: dict[int, NodeInfo] = {}
        self.index = TraceIndex(self)
        """The derived indexes (kind steps, runs, graph tasks, ...), built when first asked."""

    def __len__(self) -> int:
        return len(self.columns["ev_kind"])

    def __getitem__(self, step: int) -> ev.Event:
        if not -len(self) <= step < len(self):
            raise IndexError(f"step {step} is outside this trace of {len(self)} events")
        return _decode(self, step % len(self))

    def __iter__(self) -> Iterator[ev.Event]:
        for step in range(len(self)):
            yield _decode(self, step)

    @property
    def source(self) -> str:
        """What wrote this trace: `engine` (agdb's engine), `torch` (the bridge), or a tool's or test's name."""
        return str(self.meta.get("source", "engine"))

    def provenance(self, kind: Kind) -> Provenance:
        """Whether this trace's source observed events of `kind`, reconstructed them with agdb's model of the
        engine, or cannot provide them at all (then their absence says nothing about what happened)."""
        known = self.meta.get("provenance")
        if not isinstance(known, dict):
            return "observed"  # a trace that does not say: the engine's own recorder sees everything
        found = known.get(kind.name.lower(), "missing")
        return found if found in ("observed", "reconstructed") else "missing"

    @property
    def num_nodes(self) -> int:
        """How many nodes the node table holds."""
        return len(self.columns["node_name"])

    def node(self, index: int) -> NodeInfo:
        """Static facts about node `index`."""
        info = self._node_cache.get(index)
        if info is None:
            info = self._node_cache[index] = _node_info(self, index)
        return info

    def queue_label(self, name: str) -> str:
        """A queue's name for people: `cpu (MainThread)` for the CPU queue of thread row 0 (`cpu:0`)."""
        kind, _, row = name.partition(":")
        if kind == "cpu" and row.isdigit() and int(row) < len(self.threads):
            return f"cpu ({self.threads[int(row)][1]})"
        return name

    def node_name(self, index: int) -> str:
        """A node's name (fast path for displays)."""
        return self.strings[self.columns["node_name"][index]] if index >= 0 else ""

    @property
    def has_source(self) -> bool:
        """Whether the trace stores the source lines around its frames (recorded with format version 3 or later)."""
        return "source_file" in self.columns

    def source_lines(self, filename: str, first: int, last: int) -> dict[int, str]:
        """The stored text of lines `first`..`last` of `filename`, by line number: only the lines around a
        frame's line are stored, and none in a trace without source (`has_source`). Never reads a file."""
        c = self.columns
        if not self.has_source:
            return {}
        files = c["source_file"]
        ids = [i for i in np.unique(files).tolist() if self.strings[i] == filename]
        lines = c["source_line"]
        rows = np.flatnonzero(np.isin(files, ids) & (lines >= first) & (lines <= last))
        return {int(lines[r]): self.strings[int(c["source_text"][r])] for r in rows.tolist()}

    def for_display(self) -> Trace:
        """This trace with every string made safe to show (tracer.store.printable): what the TUI, `agdb show` and
        `agdb culprits` read. An error's message and a forward traceback keep their line breaks."""
        c = self.columns
        errors = np.flatnonzero(c["ev_kind"] == Kind.ERROR_RAISED)
        several_lines = set(c["ev_b"][errors].tolist())
        if "node_stack" in c:
            several_lines.update(c["node_stack"][c["node_stack"] >= 0].tolist())
        strings = [printable(s, keep_newlines=i in several_lines) for i, s in enumerate(self.strings)]
        meta = {**self.meta, "source": printable(self.source)}
        if meta["source"] == self.source and all(a is b for a, b in zip(strings, self.strings, strict=True)):
            return self
        return Trace(dict(c), strings, meta)

    def column_sizes(self) -> dict[str, tuple[int, str]]:
        """(bytes, dtype name) of every column held in memory: what the format costs, column by column."""
        return {name: (int(arr.nbytes), arr.dtype.name) for name, arr in self.columns.items()}

    def event_node(self, step: int) -> int:
        """The node event `step` names, or -1 (cheaper than decoding the whole event)."""
        return int(self.columns["ev_node"][step])

    def node_brief(self, index: int) -> tuple[str, int, int]:
        """(name, seq_nr, topological_nr) of a node, read from the columns: for a list's rows, where
        building the whole NodeInfo (edges, frame, creation step) would cost ~20 us a row."""
        c = self.columns
        return self.strings[c["node_name"][index]], seq_decode(int(c["node_seq"][index])), int(c["node_topo"][index])

    def distinct_names(self) -> list[int]:
        """The string ids of the node names in this trace, ascending (see TraceIndex.distinct_names)."""
        return self.index.distinct_names

    def nodes_named(self, wanted: Callable[[str], bool]) -> np.ndarray:
        """Per node, whether `wanted(its name)`: asked once per distinct name (a few dozen), not per node."""
        table = np.zeros(len(self.strings), dtype=bool)
        table[[i for i in self.distinct_names() if wanted(self.strings[i])]] = True
        return table[self.columns["node_name"]]

    def created_steps(self) -> np.ndarray:
        """The step each node was made at: its NodeCreated, or its first mention."""
        return self.index.created_steps

    def kinds(self) -> np.ndarray:
        """The kind code of every event (see schema.Kind)."""
        return self.columns["ev_kind"]

    def steps_of(self, *kinds: Kind) -> np.ndarray:
        """The steps of every event of these kinds, in order."""
        return self.index.steps_of(*kinds)

    def rank(self, step: int, *kinds: Kind) -> int:
        """Which event of these kinds `step` is (0 for the first): the row of its side data."""
        return self.index.rank(step, *kinds)


def _node_info(trace: Trace, i: int) -> NodeInfo:
    c, s = trace.columns, trace.strings
    start, end = int(c["node_edge_start"][i]), int(c["node_edge_start"][i + 1])
    edges = tuple((None if int(ch) < 0 else int(ch), int(nr))
                  for ch, nr in zip(c["edge_child"][start:end], c["edge_input_nr"][start:end], strict=True))
    frame = int(c["node_frame"][i])
    filename, lineno, function, source, col, end_col = _frame(trace, frame)
    created = trace.created_steps()
    stacks = c.get("node_stack")  # optional: only traces recorded under anomaly mode have it
    stack = s[stacks[i]] if stacks is not None and stacks[i] >= 0 else ""
    return NodeInfo(i, s[c["node_name"][i]], seq_decode(int(c["node_seq"][i])), int(c["node_topo"][i]),
                    s[c["node_device"][i]], int(c["node_thread"][i]), edges, int(created[i]),
                    int(c["node_inputs"][i]), filename, lineno, function, source, stack, col, end_col,
                    frame_module(trace, frame))


def frame_module(trace: Trace, frame: int) -> str:
    """The module path of frame row `frame` (NOTE [module paths] in tracer/recording/module_calls.py), or ""."""
    modules = trace.columns.get("frame_module")  # optional: only traces of programs that called modules have it
    return trace.strings[modules[frame]] if modules is not None and frame >= 0 and modules[frame] >= 0 else ""


def _frame(trace: Trace, frame: int) -> tuple[str, int, str, str, int, int]:
    if frame < 0:
        return ("", 0, "", "", -1, -1)
    c, s = trace.columns, trace.strings
    source = s[c["frame_source"][frame]]
    col, end_col = -1, -1
    if "frame_col" in c and "frame_end_col" in c:  # format version 4 on
        col, end_col = int(c["frame_col"][frame]), int(c["frame_end_col"][frame])
        if not 0 <= col < end_col <= len(source):  # a crafted or re-escaped line: no range rather than a wrong one
            col, end_col = -1, -1
    return (s[c["frame_file"][frame]], int(c["frame_line"][frame]), s[c["frame_func"][frame]], source, col,
            end_col)


def _derive(c: dict) -> None:
    """Offsets that are cheaper to recompute than to store."""
    for derived, counts in (("node_edge_start", "node_nedges"), ("sgroup_start", "s_count"),
                            ("s_shape_start", "s_ndim")):
        if counts in c and derived not in c:
            offsets = np.zeros(len(c[counts]) + 1, dtype=np.int64)
            np.cumsum(c[counts], out=offsets[1:])
            offsets.flags.writeable = False
            c[derived] = offsets


# -- decoding ---------------------------------------------------------------------------------------------------
def _rows(trace: Trace, name: str, row: int, fields: tuple[str, ...]) -> list[tuple]:
    c = trace.columns
    start, end = int(c[f"{name}_start"][row]), int(c[f"{name}_start"][row + 1])
    cols = [c[f"{name}_{f}"][start:end].tolist() for f in fields]
    return list(zip(*cols, strict=True)) if cols else []


def summary_group(trace: Trace, group: int) -> tuple[ev.TensorSummary | None, ...]:
    """The tensor summaries of one NodeStarted/NodeFinished/GradCaptured/GradAccumulated event."""
    c, s = trace.columns, trace.strings
    start, end = int(c["sgroup_start"][group]), int(c["sgroup_start"][group + 1])
    out = []
    for i in range(start, end):
        info = int(c["s_info"][i])
        if not info & 1:
            out.append(None)
            continue
        d0, d1 = int(c["s_shape_start"][i]), int(c["s_shape_start"][i + 1])
        n = (info >> 3) & 3
        out.append(ev.TensorSummary(tuple(c["s_dims"][d0:d1].tolist()), s[c["s_dtype"][i]], s[c["s_device"][i]],
                                    tuple(float(v) for v in c["s_preview"][i, :n]), bool(info & 2),
                                    bool(info & 4)))
    return tuple(out)


def _summaries_of(trace: Trace, step: int) -> tuple[ev.TensorSummary | None, ...]:
    return summary_group(trace, trace.rank(step, *SUMMARY_KINDS))


def _node_ref(trace: Trace, index: int) -> tuple[int | None, str]:
    return (None, "") if index < 0 else (index, trace.node_name(index))


def _decode(trace: Trace, step: int) -> ev.Event:
    c = trace.columns
    kind = int(c["ev_kind"][step])
    thread, task, node = int(c["ev_thread"][step]), int(c["ev_task"][step]), int(c["ev_node"][step])
    return _DECODERS[kind](trace, step, thread, task, node, int(c["ev_a"][step]), int(c["ev_b"][step]))


def _d_bump(t, step, thread, task, node, a, b):
    info = t.node(node)
    return ev.SeqNrBumped(step, thread, node, info.name, info.seq_nr, info.seq_nr + 1, info.filename, info.lineno,
                          info.function, info.source, info.col, info.end_col)


def _d_created(t, step, thread, task, node, a, b):
    info = t.node(node)
    return ev.NodeCreated(step, thread, node, info.name, info.seq_nr, info.topological_nr, info.next_edges,
                          info.device, info.forward_op, info.filename, info.lineno, info.function, info.source,
                          info.col, info.end_col)


def _d_task(t, step, thread, task, node, a, b):
    cols = t.columns
    row = t.rank(step, Kind.GRAPH_TASK_STARTED)
    flags = int(cols["task_flags"][row])
    return ev.GraphTaskStarted(step, thread, task, int(cols["task_root"][row]),
                               tuple(_rows(t, "task_roots", row, ("node", "nr"))),
                               tuple(_rows(t, "task_inputs", row, ("node", "nr"))),
                               bool(flags & 1), bool(flags & 2), bool(flags & 4), int(cols["task_depth"][row]))


def _d_deps(t, step, thread, task, node, a, b):
    row = t.rank(step, Kind.DEPENDENCIES_COMPUTED)
    return ev.DependenciesComputed(step, thread, task, b, tuple(_rows(t, "deps", row, ("node", "count"))),
                                   tuple(n for (n,) in _rows(t, "pruned", row, ("node",))))


def _d_exec(t, step, thread, task, node, a, b):
    row = t.rank(step, Kind.EXEC_INFO_COMPUTED)
    return ev.ExecInfoComputed(step, thread, task, tuple(n for (n,) in _rows(t, "needed", row, ("node",))),
                               tuple(_rows(t, "captured", row, ("node", "input", "output"))))


def push_priority(trace: Trace, push_step: int) -> tuple[int, int]:
    """(reentrant depth, seq_nr) of the task pushed at `push_step`; WAKE_UP_PRIORITY for a wake-up task."""
    code = int(trace.columns["push_seq"][trace.rank(push_step, Kind.TASK_PUSHED)])
    if code == WAKE_UP:
        return WAKE_UP_PRIORITY
    return (trace.index.task_depths.get(int(trace.columns["ev_task"][push_step]), 0), seq_decode(code))


def pop_origin(trace: Trace, pop_step: int) -> tuple[int, bool]:
    """(step of the matching push, whether the task was stale) for the pop at `pop_step`."""
    code = int(trace.columns["pop_push"][trace.rank(pop_step, Kind.TASK_POPPED)])
    return (-code - 2, True) if code < -1 else (code, False)


def _d_push(t, step, thread, task, node, a, b):
    n, name = _node_ref(t, node)
    return ev.TaskPushed(step, thread, task, n, name, t.queues[a], push_priority(t, step), b)


def _d_pop(t, step, thread, task, node, a, b):
    n, name = _node_ref(t, node)
    pushed, stale = pop_origin(t, step)
    priority = push_priority(t, pushed) if pushed >= 0 else WAKE_UP_PRIORITY
    if stale:
        priority = (INT_MAX, priority[1])
    return ev.TaskPopped(step, thread, task, n, name, t.queues[a], priority, b, pushed, stale)


def _d_buffer(t, step, thread, task, node, a, b):
    return ev.BufferWritten(step, thread, task, node, t.node_name(node), a, bool(b))


def _d_hook(t, step, thread, task, node, a, b):
    return ev.HookRan(step, thread, task, node, t.node_name(node), HOOK_KINDS[a], t.strings[b])


def _d_nstart(t, step, thread, task, node, a, b):
    return ev.NodeStarted(step, thread, task, node, t.node_name(node), _summaries_of(t, step))


def _d_nfinish(t, step, thread, task, node, a, b):
    return ev.NodeFinished(step, thread, task, node, t.node_name(node), _summaries_of(t, step))


def _d_captured(t, step, thread, task, node, a, b):
    return ev.GradCaptured(step, thread, task, node, t.node_name(node), a, _summaries_of(t, step)[0])


def _d_accum(t, step, thread, task, node, a, b):
    return ev.GradAccumulated(step, thread, task, node, t.node_name(node), _summaries_of(t, step)[0])


def _d_error(t, step, thread, task, node, a, b):
    n, name = _node_ref(t, node)
    return ev.ErrorRaised(step, thread, task, n, name, t.strings[a], t.strings[b])


def _d_finished(t, step, thread, task, node, a, b):
    return ev.GraphTaskFinished(step, thread, task, bool(a))


_DECODERS = {
    Kind.SEQ_NR_BUMPED: _d_bump, Kind.NODE_CREATED: _d_created, Kind.GRAPH_TASK_STARTED: _d_task,
    Kind.DEPENDENCIES_COMPUTED: _d_deps, Kind.EXEC_INFO_COMPUTED: _d_exec, Kind.TASK_PUSHED: _d_push,
    Kind.TASK_POPPED: _d_pop, Kind.BUFFER_WRITTEN: _d_buffer, Kind.HOOK_RAN: _d_hook, Kind.NODE_STARTED: _d_nstart,
    Kind.NODE_FINISHED: _d_nfinish, Kind.GRAD_CAPTURED: _d_captured, Kind.GRAD_ACCUMULATED: _d_accum,
    Kind.ERROR_RAISED: _d_error, Kind.GRAPH_TASK_FINISHED: _d_finished}
