"""Trace: a finished recording held as numpy columns and a string table; events are decoded on demand.

Imports numpy and the standard library only. A Trace is immutable (its arrays are read-only). Node
references in events are indices into the node table; `Trace.node(i)` gives a node's static facts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from . import events as ev
from .recorder import (
    K_ACCUM,
    K_BUMP,
    K_CAPTURED,
    K_CREATED,
    K_DEPS,
    K_ERROR,
    K_EXEC,
    K_FINISHED,
    K_NFINISH,
    K_NSTART,
    K_POP,
    K_PUSH,
    K_STARTED_TASK,
    seq_code,
    seq_decode,
    source_line,
    summarize,
)

EVENT_COLUMNS = ("ev_kind", "ev_thread", "ev_task", "ev_node", "ev_a", "ev_b", "ev_c")


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

    @property
    def forward_op(self) -> str:
        """The forward op that made this node, from its name (MulBackward0 -> mul)."""
        return forward_op(self.name)


def forward_op(name: str) -> str:
    """`MulBackward0` -> `mul`, `AddmmBackward0` -> `addmm`, a leaf's AccumulateGrad -> `leaf`."""
    if name.endswith("AccumulateGrad"):
        return "leaf"
    base = name.split("::")[-1]
    cut = base.find("Backward")
    return (base[:cut] if cut > 0 else base).lower()


def _compact(values: Any, dtype: Any = None) -> np.ndarray:
    """An integer column in the smallest dtype that holds it (keeps traces small on disk)."""
    arr = np.asarray(values, dtype=dtype or np.int64)
    if arr.dtype.kind in "iu" and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        for cand in (np.int8, np.int16, np.int32, np.int64):
            info = np.iinfo(cand)
            if info.min <= lo and hi <= info.max:
                arr = arr.astype(cand)
                break
    elif arr.dtype.kind in "iu":
        arr = arr.astype(np.int8)
    arr.flags.writeable = False
    return arr


def _ragged(rows: list) -> tuple[np.ndarray, list]:
    """Offsets (len n+1) and the flat items of a list of sequences."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    flat: list = []
    for i, row in enumerate(rows):
        flat.extend(row)
        offsets[i + 1] = len(flat)
    return offsets, flat


class Trace:
    """A recording of engine events, frozen: columns, a string table and side tables."""

    def __init__(self, columns: dict[str, np.ndarray], strings: list[str], meta: dict | None = None) -> None:
        self.columns = columns
        self.strings = tuple(strings)
        self.meta = dict(meta or {})
        for arr in columns.values():
            arr.flags.writeable = False
        c = columns
        self.threads = tuple((int(i), self.strings[n]) for i, n in zip(c["thread_ident"], c["thread_name"],
                                                                          strict=True))
        self.queues = tuple(self.strings[n] for n in c["queue_name"])
        self._node_cache: dict[int, NodeInfo] = {}

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
    def num_nodes(self) -> int:
        """How many nodes the node table holds."""
        return len(self.columns["node_uid"])

    def node(self, index: int) -> NodeInfo:
        """Static facts about node `index`."""
        info = self._node_cache.get(index)
        if info is None:
            info = self._node_cache[index] = _node_info(self, index)
        return info

    def node_name(self, index: int) -> str:
        """A node's name (fast path for displays)."""
        return self.strings[self.columns["node_name"][index]] if index >= 0 else ""

    def kinds(self) -> np.ndarray:
        """The kind code of every event (see events.KINDS)."""
        return self.columns["ev_kind"]


def _node_info(trace: Trace, i: int) -> NodeInfo:
    c, s = trace.columns, trace.strings
    start, end = int(c["node_edge_start"][i]), int(c["node_edge_start"][i + 1])
    edges = tuple((None if int(ch) < 0 else int(ch), int(nr))
                  for ch, nr in zip(c["edge_child"][start:end], c["edge_input_nr"][start:end], strict=True))
    frame = int(c["node_frame"][i])
    filename, lineno, function, source = _frame(trace, frame)
    return NodeInfo(i, s[c["node_name"][i]], seq_decode(int(c["node_seq"][i])), int(c["node_topo"][i]),
                    s[c["node_device"][i]], int(c["node_thread"][i]), edges, int(c["node_step"][i]),
                    int(c["node_inputs"][i]), filename, lineno, function, source)


def _frame(trace: Trace, frame: int) -> tuple[str, int, str, str]:
    if frame < 0:
        return ("", 0, "", "")
    c, s = trace.columns, trace.strings
    return (s[c["frame_file"][frame]], int(c["frame_line"][frame]), s[c["frame_func"][frame]],
            s[c["frame_source"][frame]])


# -- building a Trace from a Recorder -----------------------------------------------------------------------
def build_trace(rec: Any, progress: Any = None) -> Trace:
    """Freeze a Recorder's buffers into a Trace."""
    strings = dict(rec.strings)

    def sid(text: str) -> int:
        index = strings.get(text)
        if index is None:
            index = strings[text] = len(strings)
        return index

    uids = sorted(rec.nodes)
    index_of = {uid: i for i, uid in enumerate(uids)}
    rows = rec.rows
    if progress:
        progress(0, len(rows))
    cols = list(zip(*rows, strict=True)) if rows else [()] * 7
    columns: dict[str, np.ndarray] = {}
    node_uids = np.asarray(cols[3], dtype=np.int64)
    dense = np.array([index_of.get(u, -1) for u in node_uids.tolist()], dtype=np.int64) if rows else node_uids
    kinds = np.asarray(cols[0], dtype=np.uint8)
    a = np.asarray(cols[4], dtype=np.int64)
    b = np.asarray(cols[5], dtype=np.int64)
    c = np.asarray(cols[6], dtype=np.int64)
    _regroup(rec, kinds, a, b, index_of, sid, columns)
    columns.update(ev_kind=_compact(kinds, np.uint8), ev_thread=_compact(cols[1]), ev_task=_compact(cols[2]),
                   ev_node=_compact(dense), ev_a=_compact(a), ev_b=_compact(b), ev_c=_compact(c))
    _node_table(rec, uids, index_of, sid, columns)
    frames = rec.frame_rows
    columns.update(frame_file=_compact([sid(f[0]) for f in frames]), frame_line=_compact([f[1] for f in frames]),
                   frame_func=_compact([sid(f[2]) for f in frames]),
                   frame_source=_compact([sid(source_line(f[0], f[1])) for f in frames]))
    columns.update(thread_ident=np.asarray([t[0] for t in rec.thread_rows], dtype=np.int64),
                   thread_name=_compact([sid(t[1]) for t in rec.thread_rows]),
                   queue_name=_compact([sid(q) for q in rec.queues]))
    if progress:
        progress(len(rows), len(rows))
    ordered = sorted(strings, key=strings.__getitem__)
    return Trace(columns, ordered, {"source": "agdb.engine"})


def _node_table(rec: Any, uids: list, index_of: dict, sid: Any, columns: dict) -> None:
    thread_index = {ident: i for i, (ident, _) in enumerate(rec.thread_rows)}
    infos = [rec.nodes[u] for u in uids]
    offsets, flat = _ragged([info[5] for info in infos])
    columns.update(
        node_uid=np.asarray(uids, dtype=np.int64),
        node_name=_compact([sid(i[0]) for i in infos]),
        node_seq=_compact([seq_code(i[1]) for i in infos]),
        node_topo=_compact([i[2] for i in infos]),
        node_device=_compact([sid(i[3]) for i in infos]),
        node_thread=_compact([thread_index.get(i[4], -1) for i in infos]),
        node_frame=_compact([i[6] for i in infos]),
        node_step=_compact([i[7] for i in infos]),
        node_inputs=_compact([i[8] for i in infos]),
        node_edge_start=_compact(offsets),
        edge_child=_compact([index_of.get(u, -1) if u else -1 for u, _ in flat]),
        edge_input_nr=_compact([nr for _, nr in flat]),
    )


def _regroup(rec: Any, kinds: np.ndarray, a: np.ndarray, b: np.ndarray, index_of: dict, sid: Any,
             columns: dict) -> None:
    """Turn the recorder's ragged payloads into per-family tables, and point `a`/`b` at their rows."""
    groups = rec.groups

    def node(uid: int) -> int:
        return index_of.get(uid, -1)

    tasks, deps, pruned, needed, captured, summaries = [], [], [], [], [], []
    for step in np.flatnonzero(kinds == K_STARTED_TASK).tolist():
        tasks.append(groups[a[step]])
        a[step] = len(tasks) - 1
    for step in np.flatnonzero(kinds == K_DEPS).tolist():
        d, p = groups[a[step]]
        deps.append([(node(u), n) for u, n in d])
        pruned.append([node(u) for u in p])
        a[step] = len(deps) - 1
    for step in np.flatnonzero(kinds == K_EXEC).tolist():
        n, cap = groups[a[step]]
        needed.append([node(u) for u in n])
        captured.append([(node(u), i, o) for u, i, o in cap])
        a[step] = len(needed) - 1
    for kind, col in ((K_NSTART, a), (K_NFINISH, a), (K_ACCUM, a), (K_CAPTURED, b)):
        for step in np.flatnonzero(kinds == kind).tolist():
            summaries.append(groups[col[step]])
            col[step] = len(summaries) - 1

    columns["task_root"] = _compact([node(t[0]) for t in tasks])
    columns["task_flags"] = _compact([int(t[3]) | int(t[4]) << 1 | int(t[5]) << 2 for t in tasks])
    columns["task_depth"] = _compact([t[6] for t in tasks])
    _ragged_columns(columns, "task_roots", [[(node(u), nr) for u, nr in t[1]] for t in tasks], ("node", "nr"))
    _ragged_columns(columns, "task_inputs", [[(node(u), nr) for u, nr in t[2]] for t in tasks], ("node", "nr"))
    _ragged_columns(columns, "deps", deps, ("node", "count"))
    _ragged_columns(columns, "pruned", [[(n,) for n in p] for p in pruned], ("node",))
    _ragged_columns(columns, "needed", [[(n,) for n in x] for x in needed], ("node",))
    _ragged_columns(columns, "captured", captured, ("node", "input", "output"))
    _summary_columns(columns, summaries, sid)


def _ragged_columns(columns: dict, name: str, rows: list, fields: tuple[str, ...]) -> None:
    offsets, flat = _ragged(rows)
    columns[f"{name}_start"] = _compact(offsets)
    for i, field in enumerate(fields):
        columns[f"{name}_{field}"] = _compact([item[i] for item in flat])


def _summary_columns(columns: dict, groups: list, sid: Any) -> None:
    offsets, flat = _ragged(groups)
    summaries = [None if item is None else (summarize(*item) if len(item) == 2 else item) for item in flat]
    present = [s is not None for s in summaries]
    real = [s if s is not None else ((), "float32", "cpu", (), False, False) for s in summaries]
    shape_offsets, dims = _ragged([s[0] for s in real])
    preview = np.full((len(real), 3), np.nan)
    for i, s in enumerate(real):
        preview[i, :len(s[3])] = s[3]
    columns.update(
        sgroup_start=_compact(offsets),
        s_present=_compact(present),
        s_dtype=_compact([sid(s[1]) for s in real]),
        s_device=_compact([sid(s[2]) for s in real]),
        s_shape_start=_compact(shape_offsets),
        s_dims=_compact(dims),
        s_preview=preview,
        s_preview_len=_compact([len(s[3]) for s in real]),
        s_flags=_compact([int(s[4]) | int(s[5]) << 1 for s in real]),
    )


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
        if not c["s_present"][i]:
            out.append(None)
            continue
        d0, d1 = int(c["s_shape_start"][i]), int(c["s_shape_start"][i + 1])
        n = int(c["s_preview_len"][i])
        flags = int(c["s_flags"][i])
        out.append(ev.TensorSummary(tuple(c["s_dims"][d0:d1].tolist()), s[c["s_dtype"][i]], s[c["s_device"][i]],
                                    tuple(float(v) for v in c["s_preview"][i, :n]), bool(flags & 1),
                                    bool(flags & 2)))
    return tuple(out)


def _node_ref(trace: Trace, index: int) -> tuple[int | None, str]:
    return (None, "") if index < 0 else (index, trace.node_name(index))


def _decode(trace: Trace, step: int) -> ev.Event:
    c = trace.columns
    kind = int(c["ev_kind"][step])
    thread, task, node = int(c["ev_thread"][step]), int(c["ev_task"][step]), int(c["ev_node"][step])
    a, b, cc = int(c["ev_a"][step]), int(c["ev_b"][step]), int(c["ev_c"][step])
    return _DECODERS[kind](trace, step, thread, task, node, a, b, cc)


def _d_bump(t, step, thread, task, node, a, b, c):
    filename, lineno, function, source = _frame(t, a)
    return ev.SeqNrBumped(step, thread, node, t.node_name(node), b, b + 1, filename, lineno, function, source)


def _d_created(t, step, thread, task, node, a, b, c):
    info = t.node(node)
    filename, lineno, function, source = _frame(t, a)
    return ev.NodeCreated(step, thread, node, info.name, info.seq_nr, info.topological_nr, info.next_edges,
                          info.device, info.forward_op, filename, lineno, function, source)


def _d_task(t, step, thread, task, node, a, b, c):
    cols = t.columns
    flags = int(cols["task_flags"][a])
    return ev.GraphTaskStarted(step, thread, task, int(cols["task_root"][a]),
                               tuple(_rows(t, "task_roots", a, ("node", "nr"))),
                               tuple(_rows(t, "task_inputs", a, ("node", "nr"))),
                               bool(flags & 1), bool(flags & 2), bool(flags & 4), int(cols["task_depth"][a]))


def _d_deps(t, step, thread, task, node, a, b, c):
    return ev.DependenciesComputed(step, thread, task, b, tuple(_rows(t, "deps", a, ("node", "count"))),
                                   tuple(n for (n,) in _rows(t, "pruned", a, ("node",))))


def _d_exec(t, step, thread, task, node, a, b, c):
    return ev.ExecInfoComputed(step, thread, task, tuple(n for (n,) in _rows(t, "needed", a, ("node",))),
                               tuple(_rows(t, "captured", a, ("node", "input", "output"))))


def push_priority(trace: Trace, push_step: int) -> tuple[int, int]:
    """(reentrant depth, seq_nr) of the task pushed at `push_step`; (-1, -1) for a dummy task."""
    c = trace.columns
    code = int(c["ev_c"][push_step])
    if code == -2:
        return (-1, -1)
    return (_task_depth(trace, int(c["ev_task"][push_step])), seq_decode(code))


def _task_depth(trace: Trace, task_id: int) -> int:
    depths = trace.__dict__.setdefault("_depths", {})
    if not depths:
        cols = trace.columns
        steps = np.flatnonzero(cols["ev_kind"] == K_STARTED_TASK)
        for row, step in enumerate(steps.tolist()):
            depths[int(cols["ev_task"][step])] = int(cols["task_depth"][row])
    return depths.get(task_id, 0)


def _d_push(t, step, thread, task, node, a, b, c):
    n, name = _node_ref(t, node)
    return ev.TaskPushed(step, thread, task, n, name, t.queues[a], push_priority(t, step), b)


def _d_pop(t, step, thread, task, node, a, b, c):
    n, name = _node_ref(t, node)
    stale = c < -1
    pushed = -c - 2 if stale else c
    priority = push_priority(t, pushed) if pushed >= 0 else (-1, -1)
    if stale:
        priority = (2**31 - 1, priority[1])
    return ev.TaskPopped(step, thread, task, n, name, t.queues[a], priority, b, pushed, stale)


def _d_buffer(t, step, thread, task, node, a, b, c):
    return ev.BufferWritten(step, thread, task, node, t.node_name(node), a, bool(b))


def _d_hook(t, step, thread, task, node, a, b, c):
    return ev.HookRan(step, thread, task, node, t.node_name(node), ev.HOOK_KINDS[a], t.strings[b])


def _d_nstart(t, step, thread, task, node, a, b, c):
    return ev.NodeStarted(step, thread, task, node, t.node_name(node), summary_group(t, a))


def _d_nfinish(t, step, thread, task, node, a, b, c):
    return ev.NodeFinished(step, thread, task, node, t.node_name(node), summary_group(t, a))


def _d_captured(t, step, thread, task, node, a, b, c):
    return ev.GradCaptured(step, thread, task, node, t.node_name(node), a, summary_group(t, b)[0])


def _d_accum(t, step, thread, task, node, a, b, c):
    return ev.GradAccumulated(step, thread, task, node, t.node_name(node), summary_group(t, a)[0])


def _d_error(t, step, thread, task, node, a, b, c):
    n, name = _node_ref(t, node)
    return ev.ErrorRaised(step, thread, task, n, name, t.strings[a], t.strings[b])


def _d_finished(t, step, thread, task, node, a, b, c):
    return ev.GraphTaskFinished(step, thread, task, bool(a))


_DECODERS = {K_BUMP: _d_bump, K_CREATED: _d_created, K_STARTED_TASK: _d_task, K_DEPS: _d_deps, K_EXEC: _d_exec,
             K_PUSH: _d_push, K_POP: _d_pop, ev.KIND_CODES[ev.BufferWritten]: _d_buffer,
             ev.KIND_CODES[ev.HookRan]: _d_hook, K_NSTART: _d_nstart, K_NFINISH: _d_nfinish,
             K_CAPTURED: _d_captured, K_ACCUM: _d_accum, K_ERROR: _d_error, K_FINISHED: _d_finished}
