"""The event log reads as sentences: a node by its label, seq_nr max as `max`, the seq_nr a node took."""
from __future__ import annotations

import re

from agdb.engine._state import UINT64_MAX
from agdb.tracer.store import events as ev
from agdb.widgets.event_log import EventLog


def _rows(trace) -> list[str]:
    log = EventLog(trace)
    return [log.row_text(i).plain for i in range(log.row_count())]


def test_event_log_rows_are_sentences_not_field_reprs(demo_trace):
    """No row shows a field=value repr or uint64's max; each names its step first and its kind last."""
    rows = _rows(demo_trace)
    assert len(rows) == len(demo_trace)
    for i, row in enumerate(rows):
        assert not re.search(r"\w=|='", row) and str(UINT64_MAX) not in row, row
        assert row.split()[0] == str(i) and row.split()[-1] == type(demo_trace[i]).__name__


def test_event_log_says_the_seq_nr_a_node_took(demo_trace):
    """A bump from 0 to 1 reads as the node taking seq_nr 0, and an AccumulateGrad's seq_nr as max."""
    rows = _rows(demo_trace)
    bumps = [i for i, e in enumerate(demo_trace) if isinstance(e, ev.SeqNrBumped)]
    first = demo_trace[bumps[0]]
    assert first.old == 0
    assert "took seq_nr 0" in rows[bumps[0]] and "counter 0 → 1" in rows[bumps[0]]
    made = [i for i, e in enumerate(demo_trace) if isinstance(e, ev.NodeCreated) and e.seq_nr == UINT64_MAX]
    assert made and all("seq_nr max" in rows[i] and "AccumulateGrad" in rows[i] for i in made)
