"""Trace: a finished recording held as numpy columns and a string table; events are decoded on demand.

Imports numpy and the standard library only. A Trace is immutable (its arrays are read-only). Node
references in events are indices into the node table; `Trace.node(i)` gives a node's static facts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

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
)
from .schema import Kind, Provenance

SUMMARY_KINDS = (K_NSTART, K_NFINISH, K_CAPTURED, K_ACCUM)
"""Kinds whose events own a group of tensor summaries, in step order."""

EVENT_COLUMNS = ("ev_kind", "ev_thread", "ev_task", "ev_node", "ev_a", "ev_b")
DERIVED_COLUMNS = ("node_edge_start", "sgroup_start", "s_shape_start")
"""Columns a Trace computes from stored ones when it is made; never written to a file."""


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
        _derive(columns)
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
        """A queue's name for people: `cpu (MainThread)` for a thread's CPU queue, else the name."""
        kind, _, ident = name.partition(":")
        if kind == "cpu" and ident.isdigit():
            # Python reuses a finished thread's ident, so threads run one after another can share a queue name.
            names = [n for i, n in self.threads if i == int(ident)]
            return f"cpu ({', then '.join(names) if names else 'thread ' + ident})"
        return name

    def node_name(self, index: int) -> str:
        """A node's name (fast path for displays)."""
        return self.strings[self.columns["node_name"][index]] if index >= 0 else ""

    def event_node(self, step: int) -> int:
        """The node event `step` names, or -1 (cheaper than decoding the whole event)."""
        return int(self.columns["ev_node"][step])

    def node_brief(self, index: int) -> tuple[str, int, int]:
        """(name, seq_nr, topological_nr) of a node, read from the columns: for a list's rows, where
        building the whole NodeInfo (edges, frame, creation step) would cost ~20 us a row."""
        c = self.columns
        return self.strings[c["node_name"][index]], seq_decode(int(c["node_seq"][index])), int(c["node_topo"][index])

    def distinct_names(self) -> list[int]:
        """The string ids of the node names in this trace, ascending (cached): a few dozen, even for 100k nodes."""
        distinct = self.__dict__.get("_distinct_names")
        if distinct is None:
            # Ids index `strings`, so a bincount finds them in one pass (np.unique would sort or hash: ~70 us
            # for 1k nodes, a tenth of drawing them).
            ids = self.columns["node_name"]
            present = np.bincount(ids, minlength=len(self.strings)) if len(ids) else np.zeros(0, np.int64)
            distinct = self.__dict__["_distinct_names"] = np.flatnonzero(present).tolist()
        return distinct

    def nodes_named(self, wanted: Callable[[str], bool]) -> np.ndarray:
        """Per node, whether `wanted(its name)`: asked once per distinct name (a few dozen), not per node."""
        table = np.zeros(len(self.strings), dtype=bool)
        table[[i for i in self.distinct_names() if wanted(self.strings[i])]] = True
        return table[self.columns["node_name"]]

    def created_steps(self) -> np.ndarray:
        """The step each node was made at: its NodeCreated, or its first mention (cached)."""
        created = self.__dict__.get("_created")
        if created is None:
            created = self.__dict__["_created"] = _first_mentions(self.columns)
        return created

    def kinds(self) -> np.ndarray:
        """The kind code of every event (see events.KINDS)."""
        return self.columns["ev_kind"]

    def steps_of(self, *kinds: int) -> np.ndarray:
        """The steps of every event of these kind codes, in order (cached)."""
        cache = self.__dict__.setdefault("_steps_of", {})
        found = cache.get(kinds)
        if found is None:
            k = self.columns["ev_kind"]
            mask = k == kinds[0]
            for other in kinds[1:]:
                mask |= k == other
            found = cache[kinds] = np.flatnonzero(mask)
        return found

    def rank(self, step: int, *kinds: int) -> int:
        """Which event of these kinds `step` is (0 for the first): the row of its side data."""
        return int(np.searchsorted(self.steps_of(*kinds), step))


def _node_info(trace: Trace, i: int) -> NodeInfo:
    c, s = trace.columns, trace.strings
    start, end = int(c["node_edge_start"][i]), int(c["node_edge_start"][i + 1])
    edges = tuple((None if int(ch) < 0 else int(ch), int(nr))
                  for ch, nr in zip(c["edge_child"][start:end], c["edge_input_nr"][start:end], strict=True))
    frame = int(c["node_frame"][i])
    filename, lineno, function, source = _frame(trace, frame)
    created = trace.created_steps()
    stacks = c.get("node_stack")  # optional: only traces recorded under anomaly mode have it
    stack = s[stacks[i]] if stacks is not None and stacks[i] >= 0 else ""
    return NodeInfo(i, s[c["node_name"][i]], seq_decode(int(c["node_seq"][i])), int(c["node_topo"][i]),
                    s[c["node_device"][i]], int(c["node_thread"][i]), edges, int(created[i]),
                    int(c["node_inputs"][i]), filename, lineno, function, source, stack)


def _frame(trace: Trace, frame: int) -> tuple[str, int, str, str]:
    if frame < 0:
        return ("", 0, "", "")
    c, s = trace.columns, trace.strings
    return (s[c["frame_file"][frame]], int(c["frame_line"][frame]), s[c["frame_func"][frame]],
            s[c["frame_source"][frame]])


# -- building a Trace from a Recorder -----------------------------------------------------------------------
def _derive(c: dict) -> None:
    """Offsets and steps that are cheaper to recompute than to store."""
    for derived, counts in (("node_edge_start", "node_nedges"), ("sgroup_start", "s_count"),
                            ("s_shape_start", "s_ndim")):
        if counts in c and derived not in c:
            offsets = np.zeros(len(c[counts]) + 1, dtype=np.int64)
            np.cumsum(c[counts], out=offsets[1:])
            offsets.flags.writeable = False
            c[derived] = offsets


def _first_mentions(c: dict) -> np.ndarray:
    """The step of the first event naming each node (its NodeCreated when it was recorded)."""
    steps = first_positions(c["ev_node"], len(c["node_name"]))
    steps.flags.writeable = False
    return steps


def first_positions(keys: np.ndarray, size: int) -> np.ndarray:
    """For each key 0..size-1, the first position in `keys` that holds it, or -1 (keys < size; negative keys are
    skipped).

    np.minimum.at visits every position once with no sort: 5 ms for 1M events, where
    np.unique(return_index=True) sorted them in 20-170 ms.
    """
    keys = np.asarray(keys)
    where = np.flatnonzero(keys >= 0)
    none = np.iinfo(np.int64).max
    first = np.full(size, none, dtype=np.int64)
    np.minimum.at(first, keys[where], where)
    first[first == none] = -1
    return first


def build_trace(rec: Any, progress: Any = None) -> Trace:
    """Freeze a Recorder's buffers into a Trace."""
    strings = dict(rec.strings)

    def sid(text: str) -> int:
        index = strings.get(text)
        if index is None:
            index = strings[text] = len(strings)
        return index

    nodes = _merge_bumps(rec)
    uids = sorted(nodes)
    rows = rec.rows
    if progress:
        progress(0, len(rows))
    columns: dict[str, np.ndarray] = {}
    if rows:
        table = np.array(rows, dtype=np.int64)
    else:
        table = np.zeros((0, 7), dtype=np.int64)
    kinds = table[:, 0].astype(np.uint8)
    uid_array = np.asarray(uids, dtype=np.int64)
    pos = np.searchsorted(uid_array, table[:, 3])
    pos_ok = np.minimum(pos, max(len(uid_array) - 1, 0))
    dense = np.where((table[:, 3] > 0) & (pos < len(uid_array)) & (uid_array[pos_ok] == table[:, 3]) if len(uid_array)
                     else np.zeros(len(table), bool), pos, -1)
    c_col = table[:, 6]
    pushes, pops = np.flatnonzero(kinds == K_PUSH), np.flatnonzero(kinds == K_POP)
    origin = _match_pops(table, dense, pushes, pops)
    stale = c_col[pops] != 0
    columns.update(ev_kind=_compact(kinds, np.uint8), ev_thread=_compact(table[:, 1]),
                   ev_task=_compact(_number_tasks(table[:, 2])), ev_node=_compact(dense),
                   ev_a=_compact(table[:, 4]), ev_b=_compact(table[:, 5]),
                   push_seq=_compact(c_col[pushes]), pop_push=_compact(np.where(stale, -origin - 2, origin)))
    index_of = {uid: i for i, uid in enumerate(uids)}
    _side_tables(rec, index_of, sid, columns)
    _node_table(rec, nodes, uids, index_of, sid, columns)
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


def _number_tasks(ids: np.ndarray) -> np.ndarray:
    """The engine's graph task ids renumbered 1, 2, ... in order of first appearance (0 stays 0).

    The engine's ids come from a process-wide counter, so the same program recorded twice in one process
    would get different ids; a trace numbers its own graph tasks, and the same program gives the same trace.
    """
    dense = np.zeros_like(ids)
    inside = ids != 0
    uniq, first = np.unique(ids[inside], return_index=True)
    rank = np.empty(len(uniq), dtype=ids.dtype)
    rank[np.argsort(first, kind="stable")] = np.arange(1, len(uniq) + 1)
    dense[inside] = rank[np.searchsorted(uniq, ids[inside])]
    return dense


def _match_pops(table: np.ndarray, dense: np.ndarray, pushes: np.ndarray, pops: np.ndarray) -> np.ndarray:
    """The push step each pop undoes: the k-th pop of a (graph task, node, queue) undoes its k-th push.

    Each NodeTask is pushed once and popped once, and a graph task pushes a node at most once, so FIFO
    order per key is exact; dummy wake-up tasks (no node) are interchangeable. Pops with no push
    (recording began mid-backward) get -1.
    """
    if not len(pops):
        return np.zeros(0, dtype=np.int64)
    queues = int(table[:, 4].max(initial=0)) + 1
    nodes = int(dense.max(initial=0)) + 2

    def keys(steps: np.ndarray) -> np.ndarray:
        return (table[steps, 2] * nodes + dense[steps] + 1) * queues + table[steps, 4]

    def rank_within(k: np.ndarray) -> np.ndarray:
        order = np.argsort(k, kind="stable")  # stable: equal keys stay in step order
        sk = k[order]
        starts = np.r_[0, np.flatnonzero(sk[1:] != sk[:-1]) + 1]
        rank = np.empty(len(k), dtype=np.int64)
        rank[order] = np.arange(len(sk)) - np.repeat(starts, np.diff(np.r_[starts, len(sk)]))
        return rank

    push_key, pop_key = keys(pushes), keys(pops)
    width = max(len(pushes), len(pops)) + 1
    push_joint = push_key * width + rank_within(push_key)
    pop_joint = pop_key * width + rank_within(pop_key)
    order = np.argsort(push_joint)
    sorted_joint = push_joint[order]
    if not len(order):
        return np.full(len(pops), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_joint, pop_joint), len(order) - 1)
    return np.where(sorted_joint[pos] == pop_joint, pushes[order][pos], -1).astype(np.int64)


def _merge_bumps(rec: Any) -> dict:
    """Static node facts, with the name, number and line kept at the bump for nodes never completed."""
    nodes = dict(rec.nodes)
    for uid, (name, seq, frame) in rec.bumps.items():
        info = nodes.get(uid)
        if info is None:
            nodes[uid] = (name, seq, 0, "cpu", 0, (), frame, 0, 0)
        elif info[6] < 0:
            nodes[uid] = info[:6] + (frame,) + info[7:]
    return nodes


def _node_table(rec: Any, nodes: dict, uids: list, index_of: dict, sid: Any, columns: dict) -> None:
    # A node made while recording names the thread row its NodeCreated came from; one made before (seen
    # only later) has just its ident, which names the latest thread that had it.
    thread_index = {ident: i for i, (ident, _) in enumerate(rec.thread_rows)}
    made_on = rec.node_threads
    infos = [nodes[u] for u in uids]
    flat = [edge for info in infos for edge in info[5]]
    columns.update(
        node_name=_compact([sid(i[0]) for i in infos]),
        node_seq=_compact([seq_code(i[1]) for i in infos]),
        node_topo=_compact([i[2] for i in infos]),
        node_device=_compact([sid(i[3]) for i in infos]),
        node_thread=_compact([made_on.get(u, thread_index.get(i[4], -1)) for u, i in zip(uids, infos, strict=True)]),
        node_frame=_compact([i[6] for i in infos]),
        node_inputs=_compact([i[8] for i in infos]),
        node_nedges=_compact([len(i[5]) for i in infos]),
        edge_child=_compact([index_of.get(u, -1) if u else -1 for u, _ in flat]),
        edge_input_nr=_compact([nr for _, nr in flat]),
    )
    if rec.stacks:
        columns["node_stack"] = _compact([sid(rec.stacks[u]) if u in rec.stacks else -1 for u in uids])


def _side_tables(rec: Any, index_of: dict, sid: Any, columns: dict) -> None:
    """Graph tasks, dependencies, exec_info and tensor summaries, each in its events' step order."""
    def node(uid: int) -> int:
        return index_of.get(uid, -1)

    tasks = rec.tasks
    columns["task_root"] = _compact([node(t[0]) for t in tasks])
    columns["task_flags"] = _compact([int(t[3]) | int(t[4]) << 1 | int(t[5]) << 2 for t in tasks])
    columns["task_depth"] = _compact([t[6] for t in tasks])
    _ragged_columns(columns, "task_roots", [[(node(u), nr) for u, nr in t[1]] for t in tasks], ("node", "nr"))
    _ragged_columns(columns, "task_inputs", [[(node(u), nr) for u, nr in t[2]] for t in tasks], ("node", "nr"))
    _ragged_columns(columns, "deps", [[(node(u), n) for u, n in d[0]] for d in rec.deps], ("node", "count"))
    _ragged_columns(columns, "pruned", [[(node(u),) for u in d[1]] for d in rec.deps], ("node",))
    _ragged_columns(columns, "needed", [[(node(u),) for u in x[0]] for x in rec.exec_infos], ("node",))
    _ragged_columns(columns, "captured", [[(node(u), i, o) for u, i, o in x[1]] for x in rec.exec_infos],
                    ("node", "input", "output"))
    _summary_columns(columns, rec.summaries, sid)


def _ragged_columns(columns: dict, name: str, rows: list, fields: tuple[str, ...]) -> None:
    offsets, flat = _ragged(rows)
    columns[f"{name}_start"] = _compact(offsets)
    for i, field in enumerate(fields):
        columns[f"{name}_{field}"] = _compact([item[i] for item in flat])


def _summary_columns(columns: dict, groups: list, sid: Any) -> None:
    """Tensor summaries, computed block-wise: small grads of one dtype, shape and device are stacked."""
    flat = [item for group in groups for item in group]
    n = len(flat)
    info = np.zeros(n, dtype=np.int64)
    dtype_id = np.zeros(n, dtype=np.int64)
    device_id = np.zeros(n, dtype=np.int64)
    ndim = np.zeros(n, dtype=np.int64)
    preview = np.full((n, 3), np.nan, dtype=np.float32)
    shapes: dict[int, tuple] = {}
    blocks: dict[tuple, list[int]] = {}
    for i, item in enumerate(flat):
        if item is None:
            continue
        if len(item) == 2:  # (small array, device): summarised below, a block at a time
            arr = item[0]
            blocks.setdefault((arr.dtype, arr.shape, item[1]), []).append(i)
            continue
        shape, dtype, device, values, has_nan, has_inf = item
        info[i] = 1 | int(has_nan) << 1 | int(has_inf) << 2 | len(values) << 3
        dtype_id[i], device_id[i], ndim[i] = sid(dtype), sid(device), len(shape)
        preview[i, :len(values)] = values
        shapes[i] = shape
    for (dtype, shape, device), idx_list in blocks.items():
        idx = np.asarray(idx_list, dtype=np.int64)
        block = np.stack([flat[i][0] for i in idx_list]).reshape(len(idx_list), -1)
        k = min(3, block.shape[1])
        preview[idx, :k] = block[:, :k]
        bits = np.full(len(idx), 1 | k << 3, dtype=np.int64)
        if dtype.kind == "f" and block.size:
            bits |= np.isnan(block).any(axis=1).astype(np.int64) << 1
            bits |= np.isinf(block).any(axis=1).astype(np.int64) << 2
        info[idx] = bits
        dtype_id[idx], device_id[idx], ndim[idx] = sid(dtype.name), sid(device), len(shape)
        for i in idx_list:
            shapes[i] = shape
    dims = [d for i in range(n) for d in shapes.get(i, ())]
    columns.update(
        s_count=_compact([len(g) for g in groups]),
        s_info=_compact(info),
        s_dtype=_compact(dtype_id),
        s_device=_compact(device_id),
        s_ndim=_compact(ndim),
        s_dims=_compact(dims),
        s_preview=preview,
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
                          info.function, info.source)


def _d_created(t, step, thread, task, node, a, b):
    info = t.node(node)
    return ev.NodeCreated(step, thread, node, info.name, info.seq_nr, info.topological_nr, info.next_edges,
                          info.device, info.forward_op, info.filename, info.lineno, info.function, info.source)


def _d_task(t, step, thread, task, node, a, b):
    cols = t.columns
    row = t.rank(step, K_STARTED_TASK)
    flags = int(cols["task_flags"][row])
    return ev.GraphTaskStarted(step, thread, task, int(cols["task_root"][row]),
                               tuple(_rows(t, "task_roots", row, ("node", "nr"))),
                               tuple(_rows(t, "task_inputs", row, ("node", "nr"))),
                               bool(flags & 1), bool(flags & 2), bool(flags & 4), int(cols["task_depth"][row]))


def _d_deps(t, step, thread, task, node, a, b):
    row = t.rank(step, K_DEPS)
    return ev.DependenciesComputed(step, thread, task, b, tuple(_rows(t, "deps", row, ("node", "count"))),
                                   tuple(n for (n,) in _rows(t, "pruned", row, ("node",))))


def _d_exec(t, step, thread, task, node, a, b):
    row = t.rank(step, K_EXEC)
    return ev.ExecInfoComputed(step, thread, task, tuple(n for (n,) in _rows(t, "needed", row, ("node",))),
                               tuple(_rows(t, "captured", row, ("node", "input", "output"))))


def push_priority(trace: Trace, push_step: int) -> tuple[int, int]:
    """(reentrant depth, seq_nr) of the task pushed at `push_step`; (-1, -1) for a dummy task."""
    code = int(trace.columns["push_seq"][trace.rank(push_step, K_PUSH)])
    if code == -2:
        return (-1, -1)
    return (_task_depth(trace, int(trace.columns["ev_task"][push_step])), seq_decode(code))


def pop_origin(trace: Trace, pop_step: int) -> tuple[int, bool]:
    """(step of the matching push, whether the task was stale) for the pop at `pop_step`."""
    code = int(trace.columns["pop_push"][trace.rank(pop_step, K_POP)])
    return (-code - 2, True) if code < -1 else (code, False)


def _task_depth(trace: Trace, task_id: int) -> int:
    depths = trace.__dict__.setdefault("_depths", {})
    if not depths:
        cols = trace.columns
        for row, step in enumerate(trace.steps_of(K_STARTED_TASK).tolist()):
            depths[int(cols["ev_task"][step])] = int(cols["task_depth"][row])
    return depths.get(task_id, 0)


def _d_push(t, step, thread, task, node, a, b):
    n, name = _node_ref(t, node)
    return ev.TaskPushed(step, thread, task, n, name, t.queues[a], push_priority(t, step), b)


def _d_pop(t, step, thread, task, node, a, b):
    n, name = _node_ref(t, node)
    pushed, stale = pop_origin(t, step)
    priority = push_priority(t, pushed) if pushed >= 0 else (-1, -1)
    if stale:
        priority = (2**31 - 1, priority[1])
    return ev.TaskPopped(step, thread, task, n, name, t.queues[a], priority, b, pushed, stale)


def _d_buffer(t, step, thread, task, node, a, b):
    return ev.BufferWritten(step, thread, task, node, t.node_name(node), a, bool(b))


def _d_hook(t, step, thread, task, node, a, b):
    return ev.HookRan(step, thread, task, node, t.node_name(node), ev.HOOK_KINDS[a], t.strings[b])


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


_DECODERS = {K_BUMP: _d_bump, K_CREATED: _d_created, K_STARTED_TASK: _d_task, K_DEPS: _d_deps, K_EXEC: _d_exec,
             K_PUSH: _d_push, K_POP: _d_pop, ev.KIND_CODES[ev.BufferWritten]: _d_buffer,
             ev.KIND_CODES[ev.HookRan]: _d_hook, K_NSTART: _d_nstart, K_NFINISH: _d_nfinish,
             K_CAPTURED: _d_captured, K_ACCUM: _d_accum, K_ERROR: _d_error, K_FINISHED: _d_finished}
