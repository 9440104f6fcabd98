"""Culprits to the column: which expression of a line made each node, from Python 3.11+'s co_positions.

The script's line 6 is `    z = (y.sin() * w).sum()`. Its stripped text, indexed by hand:
`z = (y.sin() * w).sum()` has `y` at 5, the `)` of `sin()` at 11, `*` at 13, `w` at 15, the `)` closing
the product at 16, `.sum()` at 17..22; the line is 23 characters long. CPython's positions are those of the
bytecode that called into the engine: the CALL of `y.sin()` (5..12), the BINARY_OP `y.sin() * w` (5..16) and
the CALL of `(y.sin() * w).sum()` (4..23).
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from agdb.app.cli import main
from agdb.app.run_script import run_recorded
from agdb.tracer.recording import culprits as culprits_mod
from agdb.tracer.recording.expression import anchor, carets
from agdb.tracer.store import tracefile
from agdb.tracer.store.trace import Trace
from agdb.tracer.store.tracefile import load, save
from tests.engine.helpers import run_in_thread

SCRIPT = Path(__file__).parent.parent / "snapshots" / "three_ops.py"
LINE = "z = (y.sin() * w).sum()"
# node name -> (col, end_col) of the expression that ran, by hand (module docstring)
RANGES = {"SinBackward0": (5, 12), "MulBackward0": (5, 16), "SumBackward0": (4, 23)}
# node name -> the caret line under LINE: `~` under the range, `^` under the op's own part
CARETS = {"SinBackward0": "     ^^^^^^^",             # `y.sin()`: a method of a name, all of it
          "MulBackward0": "     ~~~~~~~~^^^",         # `* w`: the operator and its right operand
          "SumBackward0": "    ~~~~~~~~~~~~~^^^^^^"}  # `.sum()`: the method called on the product


def _trace():
    run = run_in_thread(lambda: run_recorded(str(SCRIPT), []))
    assert run.error is None, run.error_text
    return run.trace


def test_each_node_of_the_line_has_its_own_column_range():
    """Sin, Mul and Sum, all made on line 6, each carry the column range of their own expression."""
    got = {c.node_name: (c.lineno, c.source, c.col, c.end_col) for c in culprits_mod.of_trace(_trace())}
    assert got == {name: (6, LINE, *cols) for name, cols in RANGES.items()}


def test_node_created_events_carry_the_same_range():
    """NodeCreated of each node names the same range as its SeqNrBumped; a leaf's AccumulateGrad, made when
    the leaf first feeds an op, names that op's expression (`y` in `y.sin()`, `w` in `y.sin() * w`)."""
    created = [(e.name, e.col, e.end_col) for e in _trace() if type(e).__name__ == "NodeCreated"]
    assert created == [("torch::autograd::AccumulateGrad", 5, 12), ("SinBackward0", 5, 12),
                       ("torch::autograd::AccumulateGrad", 5, 16), ("MulBackward0", 5, 16), ("SumBackward0", 4, 23)]


def test_carets_by_hand():
    """carets() draws `~` under the range and `^` under the op's own part, as derived in CARETS."""
    for name, (col, end_col) in RANGES.items():
        assert carets(LINE, col, end_col) == CARETS[name], name
    assert carets(LINE, -1, -1) == "" and carets(LINE, 3, 99) == ""


@pytest.mark.parametrize("line, col, end_col, part", [
    ("out = x[0] * 2", 6, 10, "[0]"),                    # a subscript: its brackets
    ("out = torch.exp(x)", 6, 18, "torch.exp(x)"),       # a function of a module: the whole call
    ("out = (a + b) * c", 6, 17, "* c"),                 # a parenthesised left operand is skipped
    ("é = (é.sin() * w).sum()", 4, 23, ".sum()"),        # characters, not UTF-8 bytes
    ("out = f(a,", 6, 10, "f(a,"),                       # cut at the line's end: no narrowing
])
def test_anchor_by_hand(line, col, end_col, part):
    """anchor() picks the op's own part of a range, by hand, for subscripts, calls, operators and cut lines."""
    start, end = anchor(line, col, end_col)
    assert line[start:end] == part


def test_columns_survive_save_and_load(tmp_path):
    """A saved and loaded trace keeps every culprit's column range."""
    path = tmp_path / "t.agdb"
    save(_trace(), path)
    got = {c.node_name: (c.col, c.end_col) for c in culprits_mod.of_trace(load(path))}
    assert got == RANGES


def test_a_version_3_file_loads_without_columns(tmp_path, monkeypatch):
    """A version 3 file (no frame_col, frame_end_col, nor version 5's leaf names) still loads: the same events,
    with unknown columns."""
    trace = _trace()
    columns = {k: v for k, v in trace.columns.items() if k not in ("frame_col", "frame_end_col", "node_leaf_name")}
    monkeypatch.setattr(tracefile, "FORMAT_VERSION", 3)
    save(Trace(columns, list(trace.strings), trace.meta), tmp_path / "v3.agdb")
    monkeypatch.undo()
    loaded = load(tmp_path / "v3.agdb")
    assert list(loaded) == [dataclasses.replace(e, col=-1, end_col=-1) if hasattr(e, "end_col") else e
                            for e in trace]
    assert all(c.carets() == "" for c in culprits_mod.of_trace(loaded))


def test_cli_culprits_draws_each_caret_range(monkeypatch, capsys):
    """`agdb culprits` prints, under each of the line's three culprits, the caret line derived by hand."""
    monkeypatch.setenv("COLUMNS", "200")
    code = run_in_thread(lambda: main(["culprits", str(SCRIPT)]))
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    got = {}
    for row, under in zip(lines, lines[1:], strict=False):
        if LINE in row:
            name = next(n for n in RANGES if n in row)
            start = row.index(LINE)
            got[name] = under[start:].rstrip(" │")
    assert got == CARETS


def test_seq_nr_log_line_has_carets(caplog):
    """Recording with agdb.seq_nr at INFO logs each culprit's line with its caret line under the source."""
    caplog.set_level(logging.INFO, logger="agdb.seq_nr")
    _trace()
    messages = [r.getMessage() for r in caplog.records if r.name == "agdb.seq_nr"]
    by_name = {m.split(" by ")[1].split()[0]: m.split("\n") for m in messages}
    for name, marks in CARETS.items():
        head, under = by_name[name]
        assert head.endswith(f": {LINE}")
        assert under == " " * (len(head) - len(LINE)) + marks
