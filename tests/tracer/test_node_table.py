"""NodeTable (NOTE [packed node facts] in tracer/recording/node_table.py): node facts packed into columns read back
as the dict of the same writes would, and a builder that packs them writes the trace one that does not writes."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agdb.tracer import TraceBuilder
from agdb.tracer.recording.node_table import NodeFacts, NodeTable
from agdb.tracer.store.tracefile import save
from tests.tracer.builder_fuzz import _call

fuzz = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

KEYS = st.one_of(st.integers(min_value=1, max_value=40), st.sampled_from([1 << 17, 1 << 40, 2**63 + 5]))
"""Small keys, and keys past the columns' reach (or past int64), which stay in the dict."""
INTS = st.one_of(st.integers(min_value=-1, max_value=50), st.sampled_from([2**31, 2**40, 2**63, 2**64 - 1]))
EDGES = st.one_of(st.lists(st.integers(min_value=0, max_value=9), max_size=4).map(tuple), st.tuples(INTS, INTS))
"""Flat next edges; one edge (two ints) as often as not, some of which do not fit the edge columns."""
FACTS = st.builds(lambda *f: NodeFacts(*f), st.sampled_from(["MulBackward0", "GraphRoot", "名前", ""]), INTS, INTS,
                  st.sampled_from(["cpu", "cuda:0"]), INTS, EDGES, INTS, INTS, INTS)
OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), KEYS, FACTS),
    st.tuples(st.just("pack")),
    st.tuples(st.just("write"), st.lists(KEYS, max_size=5), st.sampled_from(["name", "seq_nr", "topological_nr",
                                                                           "next_edges", "num_inputs"]), st.data())),
    max_size=40)


def _value(field: str, data: st.DataObject):
    if field == "name":
        return data.draw(st.sampled_from(["AddBackward0", "名前"]))
    if field == "next_edges":
        return data.draw(EDGES)
    if field == "seq_nr":
        return data.draw(st.one_of(st.integers(min_value=-1, max_value=50), st.just(2**64 - 1)))
    return data.draw(st.one_of(st.integers(min_value=0, max_value=2**31 - 1), st.just(2**40)))


@fuzz
@given(OPS)
def test_a_node_table_reads_as_the_dict_of_the_same_writes(ops):
    """Random sets, packs and writes of many nodes: get, in, [], keys and a snapshot answer as a dict would."""
    table, truth = NodeTable(), {}
    for op in ops:
        if op[0] == "set":
            table[op[1]] = truth[op[1]] = op[2]
        elif op[0] == "pack":
            table.pack()
        else:
            _, keys, field, data = op
            keys = [k for k in keys if k < 2**63]
            values = [_value(field, data) for _ in keys]
            table.write(keys, **{field: values})
            for k, v in zip(keys, values, strict=True):
                if k in truth:
                    truth[k] = truth[k]._replace(**{field: v})
    for key in [*truth, 2, 41, 1 << 17, 1 << 20]:
        assert table.get(key) == truth.get(key) and (key in table) == (key in truth)
        if key in truth:
            assert table[key] == truth[key] and type(table[key].seq_nr) is int
    assert table.keys() == sorted(truth)
    snap = table.snapshot()
    got = dict(snap.recent)
    cols = snap.columns
    for i, key in enumerate(snap.keys.tolist()):
        if key not in got:  # one next edge as two ints, where next_edges holds None
            edges = cols["next_edges"][i] if cols["edge_child"][i] < 0 else (cols["edge_child"][i], cols["edge_nr"][i])
            got[key] = tuple(edges if f == "next_edges" else cols[f][i] for f in NodeFacts._fields)
    assert got == truth


def test_packing_moves_what_fits_and_keeps_what_does_not():
    """Facts that fit go to the columns (out of `recent`); a key past their reach, a negative seq_nr or a thread row
    past 32 bits stay in `recent`."""
    table = NodeTable()
    fits = NodeFacts("MulBackward0", 3, 1, "cpu", 0, (2, 0), -1, 5, 1)
    table[1] = fits
    table[2] = fits._replace(seq_nr=-1)
    table[3] = fits._replace(thread=2**40)
    table[1 << 30] = fits
    table.pack()
    assert set(table.recent) == {2, 3, 1 << 30} and table.present[1] == 1
    assert [table[k] for k in (1, 2, 3, 1 << 30)] == [fits, fits._replace(seq_nr=-1), fits._replace(thread=2**40),
                                                      fits]


def test_a_write_made_while_packing_is_kept():
    """A node's facts written on another thread while pack runs (between its copy of `recent` and its pop) are not
    lost: the pop finds them, and they go back (NOTE [packed node facts])."""
    old, new = (NodeFacts("MulBackward0", n, 0, "cpu", 0, (), -1, 0, 1) for n in (1, 2))

    class Racing(dict):
        def pop(self, key, *default):
            self[key] = new  # the other thread's write, just before this pop
            return super().pop(key, *default)

    table = NodeTable()
    table.recent = Racing({7: old})
    table.pack()
    assert table.recent == {7: new} and table[7] == new and table.present[7] == 1


@fuzz
@given(st.lists(_call(), min_size=3, max_size=40), st.lists(st.booleans(), min_size=40, max_size=40))
def test_a_builder_that_packs_its_nodes_writes_the_same_trace(calls, packs):
    """Random builder calls, replayed on a builder that packs its node facts and on one that never does, both freezing
    their rows after the calls `packs` says (where the first packs): the saved traces are the same bytes."""
    def build(pack: bool) -> bytes:
        b = TraceBuilder(source="torch", pack_nodes=pack)
        thread = b.thread("MainThread")
        queue = b.queue("cpu:0")
        for ((method, kwargs), _), now in zip(calls, packs, strict=False):
            kwargs = dict(kwargs)
            if method not in ("node", "leaf_name"):
                kwargs["thread"] = thread
            if method in ("task_pushed", "task_popped"):
                kwargs["queue"] = queue
            if method == "seq_nr_bumped":
                kwargs["seq_nr"] = kwargs["old"] + 1
            getattr(b, method)(**kwargs)
            if now:
                b.freeze_rows()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "t.agdb"
            save(b.finish(), path, durable=False)
            return path.read_bytes()

    assert build(True) == build(False)
