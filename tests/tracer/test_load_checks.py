"""The loader's checks of every event's fields and of the input slots, done in bulk over whole columns, against a
reference that applies docs/trace-format.md's rules one event at a time: the same verdict, the same message, the
same step, for every field of the first event of each kind set to values on both sides of each bound.

The files are written with agdb's own `save`, so every checksum is right and only the structure checks can object.
"""
from __future__ import annotations

import numpy as np
import pytest

from agdb.tracer.store.schema import DERIVED_COLUMNS, HOOK_KINDS, NODE_KINDS, Kind
from agdb.tracer.store.tracefile import TraceFormatError, load, save
from tests.tracer.loader_fuzz import _Raw, seeds


def _columns(trace) -> dict:
    return {k: np.array(v, dtype=np.int64) if k.startswith("ev_") else np.array(v)
            for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}


def _verdict(tmp_path, trace, columns: dict) -> str | None:
    """None if the file loads, else its TraceFormatError's message without the file's name."""
    path = tmp_path / "t.agdb"
    save(_Raw(columns, list(trace.strings), trace.meta, len(trace)), path, durable=False)
    try:
        load(path)
    except TraceFormatError as e:
        assert str(e).startswith(f"{path}: "), str(e)
        return str(e)[len(f"{path}: "):]
    return None


def _reference(c: dict, nodes: int, queues: int, strings: int) -> str | None:
    """What is wrong with the event columns, one event at a time, by the rules of docs/trace-format.md (section 2's
    table, section 3's columns), each rule over all events before the next; None if nothing."""
    kinds, node, a, b, task = ([int(v) for v in c[k]] for k in ("ev_kind", "ev_node", "ev_a", "ev_b", "ev_task"))
    n = len(kinds)
    if min(task) < 0:
        return "column ev_task holds values below 0"
    if min(node) < -1:
        return "column ev_node holds values below -1"
    if max(node) >= nodes:
        return "column ev_node names a node that does not exist"
    rules = [
        (lambda i: kinds[i] in NODE_KINDS and node[i] < 0, "an event that needs a node has none"),
        (lambda i: kinds[i] in (Kind.TASK_PUSHED, Kind.TASK_POPPED) and not 0 <= a[i] < queues,
         "a queue index is out of range"),
        (lambda i: kinds[i] == Kind.HOOK_RAN and not (0 <= a[i] < len(HOOK_KINDS) and 0 <= b[i] < strings),
         "a hook event is out of range"),
        (lambda i: kinds[i] == Kind.ERROR_RAISED and not (0 <= a[i] < strings and 0 <= b[i] < strings),
         "an error event names no string"),
        (lambda i: kinds[i] in (Kind.BUFFER_WRITTEN, Kind.GRAD_CAPTURED) and a[i] < 0, "a slot index is negative"),
        (lambda i: task[i] > n, "a graph task number is larger than the number of events"),
    ]
    for wrong, what in rules:
        steps = [i for i in range(n) if wrong(i)]
        if steps:
            return f"{what} (step {steps[0]})"
    return None


@pytest.mark.parametrize("seed", range(len(seeds())))
def test_event_field_checks_agree_with_a_check_of_each_event(seed, tmp_path):
    """ev_node, ev_a, ev_b and ev_task of the first event of each kind, set in turn to -2, -1, 0, 1, 4, 5, and
    one below, at and above the number of queues, strings, nodes and events: the loader says what the reference
    says (accepts, or refuses with its message and step)."""
    trace = seeds()[seed][0]
    base = _columns(trace)
    n, nodes, queues, strings = len(trace), len(base["node_name"]), len(base["queue_name"]), len(trace.strings)
    values = sorted({-2, -1, 0, 1, 4, 5} | {v + d for v in (queues, strings, nodes, n) for d in (-1, 0, 1)})
    firsts = sorted({int(np.flatnonzero(base["ev_kind"] == k)[0]) for k in set(base["ev_kind"].tolist())})
    checked = refused = 0
    for step in firsts:
        for col in ("ev_node", "ev_a", "ev_b", "ev_task"):
            for value in values:
                columns = dict(base)
                columns[col] = base[col].copy()
                columns[col][step] = value
                want = _reference(columns, nodes, queues, strings)
                assert _verdict(tmp_path, trace, columns) == want, (Kind(base["ev_kind"][step]).name, col, value)
                checked += 1
                refused += want is not None
    assert checked > 300 and 0 < refused < checked


def _slots_case(trace, node_inputs_total: int, write_slot: int | None) -> dict:
    """The trace's columns with node_inputs summing to `node_inputs_total` (the last node takes the rest), and the
    first BufferWritten's slot set to `write_slot`."""
    columns = _columns(trace)
    inputs = np.ones(len(columns["node_name"]), dtype=np.int64)
    inputs[-1] = node_inputs_total - (len(inputs) - 1)
    columns["node_inputs"] = inputs
    if write_slot is not None:
        columns["ev_a"][int(np.flatnonzero(columns["ev_kind"] == Kind.BUFFER_WRITTEN)[0])] = write_slot
    return columns


def _allowed(trace) -> int:
    """65,536 slots plus 4 per event, edge and summary (docs/trace-format.md, section 4)."""
    c = trace.columns
    return 65_536 + 4 * (len(trace) + int(c["node_nedges"].sum()) + int(c["s_count"].sum()))


def test_input_slots_up_to_the_bound_load_and_one_more_is_refused(tmp_path):
    """node_inputs summing to exactly the bound loads; one slot more is refused; so is a BufferWritten reaching one
    slot past what its node and the bound leave, while one reaching exactly to the bound loads."""
    trace = seeds()[1][0]
    allowed = _allowed(trace)
    assert _verdict(tmp_path, trace, _slots_case(trace, allowed, None)) is None
    assert "input slots" in _verdict(tmp_path, trace, _slots_case(trace, allowed + 1, None))
    columns = _columns(trace)
    step = int(np.flatnonzero(columns["ev_kind"] == Kind.BUFFER_WRITTEN)[0])
    node = int(columns["ev_node"][step])
    limits = np.maximum(_slots_case(trace, allowed - 1000, None)["node_inputs"], 1)
    writes = np.flatnonzero(columns["ev_kind"] == Kind.BUFFER_WRITTEN)
    others = sum(max(int(columns["ev_a"][w]) + 1 - int(limits[columns["ev_node"][w]]), 0) for w in writes if w != step)
    room = allowed - int(limits.sum()) - others  # slots this write may add past its node's
    fits = int(limits[node]) + room - 1  # a slot index reaching exactly to the bound
    assert _verdict(tmp_path, trace, _slots_case(trace, allowed - 1000, fits)) is None
    assert "input slots" in _verdict(tmp_path, trace, _slots_case(trace, allowed - 1000, fits + 1))
