"""Freezing a TraceBuilder's buffers into a Trace's columns (see docs/trace-format.md for the columns).

Never imports the engine, textual or rich.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from agdb.tracer.recording.frames import absolute_file, read_source
from agdb.tracer.recording.node_table import FIELDS, Packed
from agdb.tracer.store.arrays import lookup_sorted
from agdb.tracer.store.schema import NODE_KINDS, SOURCE_CONTEXT, SUMMARY_KINDS, Kind, seq_code
from agdb.tracer.store.trace import Trace

ROW = 7  # ints per raw row (builder.ROW; freeze cannot import builder, which imports it)


def freeze(snap: Snapshot, progress: Callable[[int, int], None] | None = None) -> Trace:
    """The Trace of a builder's snapshot (TraceBuilder.finish takes one: other threads may still be adding events)."""
    strings = snap.strings

    def sid(text: str) -> int:
        index = strings.get(text)
        if index is None:
            index = strings[text] = len(strings)
        return index

    key_array, facts = _merge_bumps(snap)
    table = snap.table()
    if progress:
        progress(0, len(table))
    dense = _dense_nodes(table[:, 3], key_array)
    table, dense = snap.settle(table, dense)
    threads, queues, frames, tasks, deps, exec_infos = (snap.threads, snap.queues, snap.frames, snap.tasks,
                                                        snap.deps, snap.exec_infos)
    kinds = table[:, 0].astype(np.uint8)
    c_col = table[:, 6]
    pushes, pops = np.flatnonzero(kinds == Kind.TASK_PUSHED), np.flatnonzero(kinds == Kind.TASK_POPPED)
    origin = _match_pops(table, dense, pushes, pops)
    stale = c_col[pops] != 0
    columns: dict[str, np.ndarray] = dict(
        ev_kind=compact(kinds, np.uint8), ev_thread=compact(table[:, 1]),
        ev_task=compact(_number_tasks(table[:, 2])), ev_node=compact(dense),
        ev_a=compact(table[:, 4]), ev_b=compact(table[:, 5]),
        push_seq=compact(c_col[pushes]), pop_push=compact(np.where(stale, -origin - 2, origin)))
    _side_tables(snap, tasks, deps, exec_infos, key_array, sid, columns)
    _node_table(snap, facts, key_array, sid, columns)
    _frame_table(frames, snap.cwd, sid, columns)
    columns.update(thread_name=compact([sid(name) for name in threads]),
                   queue_name=compact([sid(q) for q in queues]))
    if progress:
        progress(len(table), len(table))
    ordered = sorted(strings, key=strings.__getitem__)
    return Trace(columns, ordered, snap.meta)


@dataclass
class Snapshot:
    """A builder's buffers copied at one moment (TraceBuilder._snapshot), so that freezing never iterates a dict or
    list that a thread still recording changes ("dictionary changed size during iteration").

    Every writer adds an event's side data (node facts, bump, summaries, task, strings) before its row, so the rows
    (frozen chunks and raw rows, together: NOTE [frozen chunks] in builder) are copied first and everything else
    after: each copied row then finds its side data, and `settle` cuts the side lists to the copied rows. Each copy
    (list(), dict()) runs in C without releasing the GIL, so it is atomic.
    """

    chunks: list  # frozen rows: ROW compact columns a chunk
    rows: list[int]  # raw rows after them, flat
    bumps: dict  # node key -> builder.Bump
    node_facts: Packed  # the builder's NodeTable, copied (NodeTable.snapshot)
    stacks: dict[int, str]
    leaf_names: dict[int, str]
    strings: dict[str, int]
    summaries: dict  # one merged summary block (merge_summary_blocks)
    threads: list[str]
    queues: dict[str, int]
    frames: list[tuple]
    tasks: list[tuple]
    deps: list[tuple]
    exec_infos: list[tuple]
    meta: dict
    cwd: str | None  # where relative file names of frames point

    def table(self) -> np.ndarray:
        """All copied rows as one (n, 7) int64 table: the frozen chunks, then the raw rows."""
        raw = np.array(self.rows, dtype=np.int64).reshape(-1, ROW)  # flat: ROW ints a row
        n = sum(len(c[0]) for c in self.chunks) + len(raw)
        columns = np.empty((7, n), dtype=np.int64)  # a column at a time into contiguous memory: the table is its
        for j in range(7):  # transpose (column-major), so that table[:, j] is contiguous too
            np.concatenate([c[j] for c in self.chunks] + [raw[:, j]], out=columns[j], casting="unsafe")
        self.rows = []
        return columns.T

    def settle(self, table: np.ndarray, dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cut the side lists to the copied rows; drop the events of graph tasks that were already running
        when recording began, and events naming a node the recording never saw (counted in `meta`).

        A Recorder attached in the middle of a backward (from a hook, or from another thread) sees that graph
        task's later events but not its start, its dependencies or the making of its nodes: they cannot be
        replayed, so the trace leaves them out and says so in `meta["omitted"]`.
        """
        kinds, task = table[:, 0], table[:, 2]
        has_summaries = _KIND_HAS_SUMMARIES[kinds]
        owners = {"tasks": kinds == Kind.GRAPH_TASK_STARTED,
                  "deps": kinds == Kind.DEPENDENCIES_COMPUTED, "exec_infos": kinds == Kind.EXEC_INFO_COMPUTED}
        foreign = (task != 0) & ~np.isin(task, task[owners["tasks"]])
        drop = foreign | (_KIND_HAS_NODE[kinds] & (dense < 0))
        keep = ~drop
        self.summaries = cut_summaries(self.summaries, int(has_summaries.sum()),
                                       keep[has_summaries] if drop.any() else None)
        for name, owned in owners.items():
            items = getattr(self, name)[:int(owned.sum())]
            if drop.any():
                items = [item for item, k in zip(items, keep[owned].tolist(), strict=True) if k]
            setattr(self, name, items)
        if not drop.any():
            return table, dense
        self.meta["omitted"] = {"graph_tasks": len(np.unique(task[foreign])), "events": int(drop.sum())}
        return table[keep], dense[keep]


def _kind_flags(kinds: Any) -> np.ndarray:
    """A look-up table by event kind: whether it is one of `kinds` (np.isin of a million kinds costs ~50 ms)."""
    flags = np.zeros(max(Kind) + 1, dtype=bool)
    flags[list(kinds)] = True
    return flags


_KIND_HAS_SUMMARIES = _kind_flags(SUMMARY_KINDS)
_KIND_HAS_NODE = _kind_flags(NODE_KINDS)


def compact(values: Any, dtype: Any = None) -> np.ndarray:
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


def _dense_nodes(node_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each row's node key as its index in the node table (ascending keys, all >= 1), or -1 for none."""
    if len(keys) and keys[-1] - keys[0] < 4 * len(keys) + 4096:
        # Keys a source numbers as it makes nodes (the engine's) are fairly dense from the first the recording saw:
        # a look-up table by key less that first, one gather, rather than a binary search a row. Keys out of its
        # range (0 for no node) read its last slot, -1.
        first, span = int(keys[0]), int(keys[-1] - keys[0]) + 1
        table = np.full(span + 1, -1, dtype=np.int64)
        table[keys - first] = np.arange(len(keys))
        offset = node_keys - first
        return table[np.where((offset >= 0) & (offset < span), offset, span)]
    pos, found = lookup_sorted(keys, node_keys)
    return np.where(found & (node_keys > 0), pos, -1)


def _number_tasks(ids: np.ndarray) -> np.ndarray:
    """The source's graph task ids renumbered 1, 2, ... in order of first appearance (0 stays 0).

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
    order per key is exact; wake-up tasks (no node) are interchangeable. Pops with no push (recording
    began mid-backward) get -1.
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


def _merge_bumps(b: Snapshot) -> tuple[np.ndarray, dict[str, Any]]:
    """Every node's static facts as columns in ascending key order (the packed ones, with the table's `recent` over
    them: NOTE [packed node facts] in node_table.py), with the name, number and line kept at the bump for nodes never
    completed. The ints as int64 (seq_nr as its seq_code), the rest as object arrays; a node's next edges as the
    packed columns hold them (`edge_child`, `edge_nr`, `next_edges`: node_table._DTYPES)."""
    packed = b.node_facts
    extra = dict(packed.recent)
    pkeys = packed.keys
    pcols = {name: col.astype(np.int64) if col.dtype != object and name != "seq_nr" else col
             for name, col in packed.columns.items()}
    for key, (name, seq, frame) in b.bumps.items():
        info = extra.get(key)
        if info is not None:
            if info[6] < 0:
                extra[key] = info[:6] + (frame,) + info[7:]
            continue
        pos = int(np.searchsorted(pkeys, key)) if len(pkeys) else 0
        if pos < len(pkeys) and pkeys[pos] == key:
            if pcols["frame"][pos] < 0:
                pcols["frame"][pos] = frame
        else:
            extra[key] = (name, seq, 0, "cpu", -1, (), frame, 0, 0)
    ekeys = sorted(extra)
    infos = list(map(extra.__getitem__, ekeys))
    ecols = dict(zip(FIELDS, zip(*infos, strict=True), strict=True)) if infos else dict.fromkeys(FIELDS, ())
    keep = ~np.isin(pkeys, np.asarray(ekeys, dtype=np.int64)) if ekeys else np.ones(len(pkeys), dtype=bool)
    keys = np.concatenate([pkeys[keep], np.asarray(ekeys, dtype=np.int64)])
    order = np.argsort(keys, kind="stable")
    seq = pcols["seq_nr"][keep]
    parts = {"seq_nr": (np.where(seq >= np.uint64(2**63), -1, seq.astype(np.int64)), _seq_codes(ecols["seq_nr"]))}
    for name in ("name", "device", "next_edges"):
        parts[name] = (pcols[name][keep], np.fromiter(ecols[name], dtype=object, count=len(ekeys)))
    for name in ("topological_nr", "thread", "frame", "num_inputs"):
        parts[name] = (pcols[name][keep], np.array(ecols[name], dtype=np.int64))
    parts["edge_child"] = (pcols["edge_child"][keep], np.full(len(ekeys), -1, dtype=np.int64))  # all in next_edges
    parts["edge_nr"] = (pcols["edge_nr"][keep], np.zeros(len(ekeys), dtype=np.int64))
    return keys[order], {name: np.concatenate(pair)[order] for name, pair in parts.items()}


def _frame_table(frames: list, cwd: str | None, sid: Any, columns: dict) -> None:
    """The frame table, with files made absolute, and the `source` table: the lines around each frame's line,
    read now (the only time agdb reads a file a trace names; NOTE in frames.read_source)."""
    files = [absolute_file(f[0], cwd) for f in frames]
    texts: dict[str, list[str] | None] = {}
    wanted: dict[str, set[int]] = {}
    for file, (_, line, *_) in zip(files, frames, strict=True):
        if file not in texts:
            texts[file] = read_source(file)
        last = min(len(texts[file] or ()), line + SOURCE_CONTEXT)
        wanted.setdefault(file, set()).update(range(max(1, line - SOURCE_CONTEXT), last + 1))

    def own_line(file: str, line: int) -> str:
        lines = texts[file] or ()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""

    source = [(file, line) for file in sorted(wanted) for line in sorted(wanted[file])]
    columns.update(
        frame_file=compact([sid(file) for file in files]), frame_line=compact([f[1] for f in frames]),
        frame_func=compact([sid(f[2]) for f in frames]),
        frame_source=compact([sid(own_line(file, f[1]) if f[3] is None else f[3])
                              for file, f in zip(files, frames, strict=True)]),
        frame_col=compact([f[4] for f in frames]), frame_end_col=compact([f[5] for f in frames]),
        **({"frame_module": compact([sid(f[6]) if len(f) > 6 else -1 for f in frames])}  # optional: module paths
           if any(len(f) > 6 for f in frames) else {}),
        source_file=compact([sid(file) for file, _ in source]), source_line=compact([line for _, line in source]),
        source_text=compact([sid(texts[file][line - 1]) for file, line in source]))


def _node_table(b: Snapshot, facts: dict[str, Any], key_array: np.ndarray, sid: Any, columns: dict) -> None:
    """The node and edge columns, from `_merge_bumps`' columns. A trace can have a million nodes: each column is made
    by numpy, not by a Python loop a node (NOTE [strings in first-use order])."""
    flat, nedges = _flat_edges(facts["edge_child"], facts["edge_nr"], facts["next_edges"])
    children = flat[:, 0]
    pos, found = lookup_sorted(key_array, children)
    columns.update(
        node_name=compact(_string_ids(facts["name"], sid)),
        node_seq=compact(facts["seq_nr"]),
        node_topo=compact(facts["topological_nr"]),
        node_device=compact(_string_ids(facts["device"], sid)),
        node_thread=compact(facts["thread"]),
        node_frame=compact(facts["frame"]),
        node_inputs=compact(facts["num_inputs"]),
        node_nedges=compact(nedges),
        edge_child=compact(np.where(found & (children != 0), pos, -1)),
        edge_input_nr=compact(flat[:, 1]),
    )
    if b.stacks or b.leaf_names:
        keys = key_array.tolist()
    if b.stacks:
        columns["node_stack"] = compact([sid(b.stacks[k]) if k in b.stacks else -1 for k in keys])
    if b.leaf_names:
        names = b.leaf_names
        columns["node_leaf_name"] = compact([sid(names[k]) if k in names else -1 for k in keys])


def _flat_edges(child: np.ndarray, nr: np.ndarray, objects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(every node's next edges back to back as (child key or 0, input_nr) rows, each node's number of edges): a
    node's one edge from the int columns where `child` >= 0, else from its flat tuple in `objects`."""
    one = child >= 0
    others = np.flatnonzero(~one)
    tuples = objects[others]
    sizes = np.fromiter(map(len, tuples), dtype=np.int64, count=len(tuples))
    lengths = np.full(len(child), 2, dtype=np.int64)
    lengths[others] = sizes
    starts = np.zeros(len(child) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    flat = np.empty(int(starts[-1]), dtype=np.int64)
    at = starts[:-1][one]
    flat[at], flat[at + 1] = child[one], nr[one]
    values = np.fromiter(itertools.chain.from_iterable(tuples), dtype=np.int64)
    within = np.arange(len(values)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    flat[np.repeat(starts[:-1][others], sizes) + within] = values
    return flat.reshape(-1, 2), lengths // 2


def _string_ids(texts: Any, sid: Any) -> np.ndarray:
    """The string ids of `texts`. NOTE [strings in first-use order]: a string's id is the order in which freeze
    first asks for it, and the trace's bytes depend on it; asking once per distinct text in order of first
    appearance gives the ids a call per item would."""
    ids = {text: sid(text) for text in dict.fromkeys(texts)}
    return np.fromiter(map(ids.__getitem__, texts), dtype=np.int64, count=len(texts))


def _seq_codes(seqs: Any) -> np.ndarray:
    """seq_code of each seq_nr, vectorised: 2**64-1 and anything from 2**63 on is -1."""
    try:
        raw = np.array(seqs, dtype=np.uint64)
    except (OverflowError, TypeError, ValueError):  # a negative number (a hand-made trace): one at a time
        return np.array([seq_code(s) for s in seqs], dtype=np.int64)
    return np.where(raw >= np.uint64(2**63), -1, raw.astype(np.int64))


def _side_tables(b: Snapshot, tasks: list, deps: list, exec_infos: list, key_array: np.ndarray, sid: Any,
                 columns: dict) -> None:
    """Graph tasks, dependencies, exec_info and tensor summaries, each in its events' step order."""
    def rows(node_keys: Any) -> np.ndarray:  # node keys -> node table rows (-1: a key not in the table)
        k = np.asarray(node_keys, dtype=np.int64).reshape(-1)
        pos, found = lookup_sorted(key_array, k)
        return np.where(found, pos, -1)

    def ragged(name: str, items: list, fields: tuple[str, ...], known_only: bool = False) -> None:
        """The first field of each item is a node key; `known_only` leaves out items whose node is not in the table."""
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        flat = (np.concatenate([np.asarray(row, dtype=np.int64).reshape(-1, len(fields)) for row in items])
                if items else np.zeros((0, len(fields)), dtype=np.int64))
        values = {f: rows(flat[:, 0]) if i == 0 else flat[:, i] for i, f in enumerate(fields)}
        if known_only:
            keep = values[fields[0]] >= 0
            lengths = np.bincount(np.repeat(np.arange(len(items)), lengths)[keep], minlength=len(items))
            values = {f: v[keep] for f, v in values.items()}
        _ragged_arrays(columns, name, lengths, values)

    columns["task_root"] = compact(rows([t[0] for t in tasks]))
    columns["task_flags"] = compact([int(t[3]) | int(t[4]) << 1 | int(t[5]) << 2 for t in tasks])
    columns["task_depth"] = compact([t[6] for t in tasks])
    ragged("task_roots", [t[1] for t in tasks], ("node", "nr"))
    ragged("task_inputs", [t[2] for t in tasks], ("node", "nr"))
    # A node never seen is left out of the counted, pruned and needed nodes (they always name a node); a capture
    # keeps -1: a grad captured for an input with no node of its own.
    pairs = [d[0] for d in deps]  # one dependency count per node of each graph: arrays throughout
    ragged("deps", [p.reshape(-1, 2) for p in pairs], ("node", "count"), known_only=True)
    ragged("pruned", [[(u,) for u in d[1]] for d in deps], ("node",), known_only=True)
    ragged("needed", [[(u,) for u in x[0]] for x in exec_infos], ("node",), known_only=True)
    ragged("captured", [x[1] for x in exec_infos], ("node", "input", "output"))
    block = b.summaries
    remap = np.asarray([sid(name) for name in block["names"]] or [0], dtype=np.int64)
    present = block["s_info"] != 0  # an absent tensor keeps string 0, as in a block of its own
    for name, column in block.items():
        if name in ("s_dtype", "s_device"):
            column = compact(np.where(present, remap[column.astype(np.int64)], 0))
        if name != "names":
            columns[name] = column


def _ragged_arrays(columns: dict, name: str, lengths: list[int], fields: dict[str, np.ndarray]) -> None:
    """A ragged table as columns: `{name}_start` (offsets of each row's items) and `{name}_{field}` per field,
    from each field's values of all rows back to back."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    columns[f"{name}_start"] = compact(offsets)
    for field, values in fields.items():
        columns[f"{name}_{field}"] = compact(values)


def summary_block(groups: list) -> dict:
    """The summary columns (s_*) of a run of summary groups, with dtype and device as indexes into the block's
    own `names` (the trace's string ids are given when the blocks are merged at finish)."""
    names: dict[str, int] = {}

    def sid(text: str) -> int:
        return names.setdefault(text, len(names))

    columns: dict[str, Any] = {}
    _summary_columns(columns, groups, sid)
    columns["names"] = list(names)
    return columns


def merge_summary_blocks(blocks: list[dict]) -> dict:
    """One summary block of several in order (their names merged into one list)."""
    names: dict[str, int] = {}
    parts: dict[str, list] = {}
    for block in blocks:
        remap = np.asarray([names.setdefault(n, len(names)) for n in block["names"]] or [0], dtype=np.int64)
        present = block["s_info"] != 0
        for name, column in block.items():
            if name in ("s_dtype", "s_device"):
                column = np.where(present, remap[column.astype(np.int64)], 0)
            if name != "names":
                parts.setdefault(name, []).append(column)
    merged = {name: compact(np.concatenate(cols)) if name != "s_preview" else np.concatenate(cols)
              for name, cols in parts.items()}
    merged["names"] = list(names)
    return merged


def cut_summaries(block: dict, groups: int, keep: np.ndarray | None) -> dict:
    """The first `groups` groups of a summary block, then only those where `keep` (per group) holds."""
    count = block["s_count"].astype(np.int64)[:groups]
    group_mask = np.ones(groups, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    items = int(count.sum())
    item_mask = np.repeat(group_mask, count)
    ndim = block["s_ndim"].astype(np.int64)[:items]
    dims = int(ndim.sum())
    dim_mask = np.repeat(item_mask, ndim)
    out = {"names": block["names"], "s_count": compact(count[group_mask])}
    for name in ("s_info", "s_dtype", "s_device", "s_ndim"):
        out[name] = compact(block[name][:items][item_mask])
    out["s_preview"] = block["s_preview"][:items][item_mask]
    out["s_dims"] = compact(block["s_dims"][:dims][dim_mask])
    return out


def _summary_columns(columns: dict, groups: list, sid: Any) -> None:
    """Tensor summaries, computed block-wise: small grads of one dtype, shape and device are stacked.

    Runs during recording, once per chunk (NOTE [frozen chunks] in builder): a chunk of bare arrays of one dtype and
    shape is one block at once (NOTE [summary fast path]); otherwise each item is only sorted into its block. The
    rest is numpy over whole blocks (np.stack of 6,000 small arrays cost 1.6 us each, np.array
    0.5 us, joining their bytes 0.13 us).
    """
    # NOTE [quiet previews]: a preview is float32, so a float64 value past its range becomes +-inf there, and a
    # complex value shows its real part. numpy would warn about both on the user's stderr, for a cast that is
    # agdb's choice and not the user's problem: these casts run with the warnings off (np.errstate is per thread).
    flat, counts = _flatten(groups)
    n = len(flat)
    info = np.zeros(n, dtype=np.int64)
    dtype_id = np.zeros(n, dtype=np.int64)
    device_id = np.zeros(n, dtype=np.int64)
    ndim = np.zeros(n, dtype=np.int64)
    preview = np.full((n, 3), np.nan, dtype=np.float32)
    shaped: list[tuple[Any, tuple]] = []  # (item index or indices, shape)
    blocks = _one_block(flat) or _sort_items(flat, info, dtype_id, device_id, ndim, preview, shaped, sid)
    for (dtype, shape, device), (idx_list, arrays) in blocks.items():
        idx = np.asarray(idx_list, dtype=np.int64)
        try:  # each a C-contiguous copy (summary_of): their bytes back to back are the block, 0.13 us an array
            block = np.frombuffer(b"".join(arrays), dtype=dtype)
        except (BufferError, TypeError, ValueError):  # not contiguous, or not plain bytes (object)
            block = np.array(arrays, dtype=dtype)
        block = block.reshape(len(idx_list), -1)
        k = min(3, block.shape[1])
        head = block[:, :k].real if dtype.kind == "c" else block[:, :k]  # a complex grad previews its real part
        with np.errstate(over="ignore", invalid="ignore"):  # NOTE [quiet previews]
            preview[idx, :k] = head
        bits = np.full(len(idx), 1 | k << 3, dtype=np.int64)
        if dtype.kind == "f" and block.size and not _all(_isfinite(block), axis=None):  # one pass when all finite
            bits |= np.isnan(block).any(axis=1).astype(np.int64) << 1
            bits |= np.isinf(block).any(axis=1).astype(np.int64) << 2
        info[idx] = bits
        dtype_id[idx], device_id[idx], ndim[idx] = sid(dtype.name), sid(device), len(shape)
        shaped.append((idx, shape))
    width = int(ndim.max(initial=0))
    sizes = np.zeros((n, width), dtype=np.int64)
    for where, shape in shaped:
        if shape:
            sizes[where, :len(shape)] = shape
    columns.update(
        s_count=compact(counts),
        s_info=compact(info),
        s_dtype=compact(dtype_id),
        s_device=compact(device_id),
        s_ndim=compact(ndim),
        s_dims=compact(sizes[np.arange(width) < ndim[:, None]]),  # each item's sizes, items in order
        s_preview=preview,
    )


def _sort_items(flat: list, info: np.ndarray, dtype_id: np.ndarray, device_id: np.ndarray, ndim: np.ndarray,
                preview: np.ndarray, shaped: list, sid: Any) -> dict:
    """_summary_columns' items one by one: small arrays are sorted into blocks by (dtype, shape, device), returned as
    {key: (indices, arrays)}, to be summarised a block at a time; a summary tuple's fields are gathered in lists and
    written into the columns together after the loop (numpy's item assignment costs ~0.1 µs a field, and a preview's
    ~0.5 µs), its strings named in item order as before (`sid` numbers them as they come)."""
    ndarray = np.ndarray
    blocks: dict[tuple, tuple[list[int], list[np.ndarray]]] = {}
    last: tuple = (None, None, None)  # the key of the last small array, whose block is `found`
    found: tuple[list[int], list[np.ndarray]] = ([], [])
    where: list[int] = []  # the summary tuples: their items, and their columns' values in the same order
    bits: list[int] = []
    dtypes: list[int] = []
    devices: list[int] = []
    ndims: list[int] = []
    previews: list[tuple] = []
    by_shape: dict[tuple, list[int]] = {}
    for i, item in enumerate(flat):
        if item is None:
            continue
        if type(item) is ndarray:
            arr, device = item, "cpu"
        elif len(item) == 2:  # (small array, device)
            arr, device = item
        else:
            shape, dtype, device, values, has_nan, has_inf = item
            where.append(i)
            bits.append(1 | int(has_nan) << 1 | int(has_inf) << 2 | len(values) << 3)
            dtypes.append(sid(dtype))
            devices.append(sid(device))
            ndims.append(len(shape))
            previews.append(values)
            at = by_shape.get(shape)
            if at is None:
                by_shape[shape] = at = []
            at.append(i)
            continue
        # Small arrays are summarised below, a block at a time. Hashing a dtype costs ~0.3 us, and the arrays
        # of a chunk mostly share one dtype, shape and device: so first compare with the last array's.
        dtype, shape = arr.dtype, arr.shape
        if dtype is not last[0] or shape != last[1] or device != last[2]:
            last = (dtype, shape, device)
            found = blocks.get(last)
            if found is None:
                found = blocks[last] = ([], [])
        found[0].append(i)
        found[1].append(arr)
    if where:
        idx = np.array(where, dtype=np.int64)
        info[idx], dtype_id[idx], device_id[idx], ndim[idx] = bits, dtypes, devices, ndims
        lengths = np.array(list(map(len, previews)), dtype=np.int64)
        for k in range(1, 4):  # the previews of each length together (an item's preview has 0 to 3 values)
            rows = np.flatnonzero(lengths == k)
            if len(rows):
                with np.errstate(over="ignore"):  # NOTE [quiet previews]
                    preview[idx[rows], :k] = np.array([previews[r] for r in rows.tolist()], dtype=np.float32)
        shaped.extend((np.array(at, dtype=np.int64), shape) for shape, at in by_shape.items())
    return blocks


_NONE = type(None)


def _flatten(groups: list) -> tuple[list, Any]:
    """The items of summary groups in order, and the number of items of each group.

    NOTE [summary fast path]: a backward's groups are nearly all bare arrays (one small CPU grad each): then the
    groups are the items, with no Python step per group (type() mapped in C, then one count).
    """
    ndarray = np.ndarray
    if list(map(type, groups)).count(ndarray) == len(groups):
        return groups, np.ones(len(groups), dtype=np.int64)
    flat: list = []
    counts: list[int] = []
    for group in groups:
        if type(group) is ndarray:  # a bare array: one small CPU tensor (the Recorder's fast path)
            flat.append(group)
            counts.append(1)
        else:
            flat.extend(group)
            counts.append(len(group))
    return flat, counts


def _one_block(flat: list) -> dict:
    """The blocks of `_summary_columns` when every item is None or a bare array, all of one dtype and shape (CPU):
    found with map and count in C rather than a Python step per item (NOTE [summary fast path]); {} otherwise."""
    types = list(map(type, flat))
    arrays = types.count(np.ndarray)
    if not arrays or arrays + types.count(_NONE) != len(flat):
        return {}
    if arrays == len(flat):
        present, idx = flat, None
    else:
        # the items that are arrays, found in C: a numpy object array's `!= None` compares item by item through
        # Python (~300 ns an item, more than the rest of a summary), and a list comprehension is a Python step each
        keep = list(map(_IS_NOT, types, itertools.repeat(_NONE)))
        present, idx = list(itertools.compress(flat, keep)), keep
    dtypes = list(map(_DTYPE, present))
    shapes = list(map(_SHAPE, present))
    if dtypes.count(dtypes[0]) != arrays or shapes.count(shapes[0]) != arrays:
        return {}
    idx = np.arange(len(flat)) if idx is None else np.flatnonzero(np.array(idx, dtype=bool))
    return {(dtypes[0], shapes[0], "cpu"): (idx, present)}


_all = np.logical_and.reduce
_isfinite = np.isfinite
_DTYPE = operator.attrgetter("dtype")
_IS_NOT = operator.is_not
_SHAPE = operator.attrgetter("shape")
