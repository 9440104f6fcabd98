"""recording/freeze's _dense_nodes (each event's node key as its row of the node table) against a dict look-up, for
keys dense (a look-up table) and sparse (a binary search)."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agdb.tracer.recording.freeze import _dense_nodes

_KEYS = st.one_of(st.sets(st.integers(1, 300)), st.sets(st.integers(1, 10**12), max_size=20))


@given(_KEYS, st.data())
def test_each_row_gets_the_row_of_its_key_or_minus_one(keys, data):
    """A known key gets its position among the sorted keys; 0 (no node) and keys never seen get -1."""
    ordered = sorted(keys)
    candidates = st.one_of(st.sampled_from(ordered), st.integers(0, 10**12)) if ordered else st.integers(0, 10**12)
    node_keys = data.draw(st.lists(candidates, max_size=40))
    row_of = {k: i for i, k in enumerate(ordered)}
    got = _dense_nodes(np.asarray(node_keys, dtype=np.int64), np.asarray(ordered, dtype=np.int64))
    assert got.tolist() == [row_of.get(k, -1) for k in node_keys]
