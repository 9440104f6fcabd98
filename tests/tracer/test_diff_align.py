"""`agdb diff` of an edited script aligns the two traces as a diff tool aligns two files: an added line with no
grad op changes nothing but line numbers, and one added op is one inserted row, not a difference at every later
row. The scripts are written here; what each records is read from the scripts themselves."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agdb.app.cli import main
from agdb.tracer.replay.diff import align, compare, side_of
from agdb.tracer.store.tracefile import load
from agdb.tracer.views.labels import NodeLabels

BASE = textwrap.dedent("""\
    import torch
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 2, requires_grad=True)
    y = (x @ w).tanh()
    loss = y.sum()
    loss.backward()
""")
PRINTED = BASE.replace("import torch\n", "import torch\nprint('hello')\n")  # every later line one lower
EXTRA_OP = BASE.replace("loss = y.sum()", "y = y * 2\nloss = y.sum()")  # MulBackward0 between Tanh and Sum


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Each version recorded on agdb's engine: name -> trace path."""
    where = tmp_path_factory.mktemp("versions")
    paths = {}
    for name, text in (("base", BASE), ("printed", PRINTED), ("extra", EXTRA_OP)):
        (where / f"{name}.py").write_text(text)
        paths[name] = where / f"{name}.agdb"
        assert main(["record", str(where / f"{name}.py"), "-o", str(paths[name])]) == 0
    return paths


def _diff(a, b, capsys, *flags) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["diff", str(a), str(b), *flags])
    return code, capsys.readouterr().out


def test_align_pairs_the_common_subsequence_and_leaves_the_rest_on_one_side():
    """Rows present on one side only are paired with None; the others keep their order."""
    assert align(list("abcd"), list("abXcd"), key=str) == [(0, 0), (1, 1), (None, 2), (2, 3), (3, 4)]
    assert align(list("abcd"), list("acd"), key=str) == [(0, 0), (1, None), (2, 1), (3, 2)]
    assert align([], list("ab"), key=str) == [(None, 0), (None, 1)]


def test_a_line_without_grad_ops_shifts_line_numbers_only(traces, capsys):
    """A print added at the top: the traces agree, and the culprit lines are said to be shifted by 1."""
    code, out = _diff(traces["base"], traces["printed"], capsys)
    assert code == 0, out
    assert "the traces agree" in out and "shifted by +1" in out, out
    assert "≠" not in out


def test_one_added_op_is_one_inserted_row(traces, capsys):
    """`y = y * 2` added: the assignment names B's one extra seq_nr and its line; the node names and culprit
    lines of the other rows agree; the runs differ by that one extra MulBackward0."""
    code, out = _diff(traces["base"], traces["extra"], capsys, "--json")
    report = json.loads(out)["aspects"]
    assert code == 1
    assignment = report["seq_nr assignment"]
    assert not assignment["equal"]
    assert [(b["seq_nr"], b["node"], b["source"]) for b in assignment["first"]["inserted"]] == \
        [(2, "MulBackward0", "y = y * 2")]
    assert assignment["first"]["removed"] == []
    assert report["node names"]["equal"], report["node names"]
    assert report["culprit lines"]["equal"], report["culprit lines"]
    order = report["execution order"]
    assert not order["equal"] and [r["node"] for r in order["first"]["inserted"]] == ["MulBackward0"]
    code, out = _diff(traces["base"], traces["extra"], capsys)
    assert "B took 1 more seq_nr(s) at relative 2 (MulBackward0" in out, out
    assert "SumBackward0" not in out.split("node names:")[1].split("\n")[0]


async def test_the_side_by_side_screen_marks_only_the_inserted_rows(traces):
    """`agdb diff --tui`: one row for B's extra seq_nr and one for its extra run are marked; the rows around them
    pair the same nodes."""
    from textual.widgets import DataTable

    from agdb.app.diff_app import DiffApp

    a, b = (side_of(load(traces[n]), n, NodeLabels(load(traces[n]))) for n in ("base", "extra"))
    app = DiffApp(a, b, compare(a, b))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bumps, runs = app.query_one("#bumps", DataTable), app.query_one("#runs", DataTable)
        assert bumps.row_count == 4 and app.differences["bumps"] == [2]
        assert runs.row_count == 6 and app.differences["runs"] == [1]
        assert str(runs.get_row_at(1)[1]) == "" and str(runs.get_row_at(1)[2]).startswith("MulBackward0")


def test_the_printed_diff_keeps_its_words(traces, capsys):
    """The text `agdb diff` prints, whole, for lines that moved, an added op, and a trace against itself."""
    def head(x, y):
        return f"A: {traces[x]} (engine, {len(load(traces[x])):,} events)\nB: {traces[y]} (engine, " \
               f"{len(load(traces[y])):,} events)\n"

    same = ("= node names:        equal: 3 seq_nrs on 1 thread(s)\n"
            "= seq_nr assignment: equal: 3 seq_nrs, same numbers for the same nodes\n")
    tail = ("= graph edges:       equal: the edges of 3 node(s) both traces know, 2 AccumulateGrad(s) run\n"
            "= execution order:   equal: 5 node runs in 1 graph task(s)\n")
    moved = "B's line numbers shifted by +1"
    assert _diff(traces["base"], traces["printed"], capsys) == (0, head("base", "printed") + same + (
        f"= culprit lines:     equal by source text: every seq_nr blamed on the same line, {moved}\n") + tail + (
        f"the traces agree: the same graph, {moved}\n"))
    assert _diff(traces["printed"], traces["base"], capsys)[1].endswith(
        "the traces agree: the same graph, B's line numbers shifted by -1\n")
    assert _diff(traces["base"], traces["base"], capsys) == (0, head("base", "base") + same + (
        "= culprit lines:     equal: every seq_nr blamed on the same line\n") + tail + "the traces agree\n")
    extra = load(traces["extra"])  # its numbers count every op this process ran before it: read, not assumed
    [mul] = np.flatnonzero(extra.nodes_named(lambda name: name == "MulBackward0"))
    seq = extra.node(int(mul)).seq_nr
    code, out = _diff(traces["base"], traces["extra"], capsys)
    assert code == 1 and out.endswith(
        f"= culprit lines:     equal by source text: every seq_nr blamed on the same line, {moved} where they moved\n"
        "= graph edges:       not compared: the seq_nr assignment differs\n"
        f"≠ execution order:   node run 1: B ran MulBackward0 seq {seq} (relative seq_nr 2) in graph task 1, "
        "which A did not run; the other 5 runs line up in order\n"
        "the traces differ\n"), out


def test_compare_says_how_the_line_numbers_moved_in_a_field(traces):
    """The shift of B's culprit line numbers is a field of the comparison, not only words in a summary."""
    from agdb.tracer.replay.diff import LineShift

    def shift(x, y):
        (ta, tb) = load(traces[x]), load(traces[y])
        return compare(side_of(ta, x, NodeLabels(ta)), side_of(tb, y, NodeLabels(tb))).line_shift

    assert shift("base", "printed") == LineShift((1,), partly=False) and str(shift("base", "printed")) == \
        "shifted by +1"
    assert shift("printed", "base") == LineShift((-1,), partly=False)
    assert shift("base", "extra") == LineShift((1,), partly=True)  # the lines above the added op did not move
    assert str(shift("base", "extra")) == "shifted by +1 where they moved"
    assert shift("base", "base") is None


def test_diff_tui_lines_the_two_traces_up_once(traces, capsys, monkeypatch):
    """`agdb diff --tui` lines the rows up once, in compare, and lays out those rows: as many `align` calls as
    `compare` alone makes."""
    from agdb.app.diff_app import DiffApp
    from agdb.tracer.replay import diff

    calls = []
    align = diff.align
    monkeypatch.setattr(diff, "align", lambda *args, **kwargs: calls.append(1) or align(*args, **kwargs))
    ta, tb = load(traces["base"]), load(traces["extra"])
    compare(side_of(ta, "a", NodeLabels(ta)), side_of(tb, "b", NodeLabels(tb)))
    by_compare = len(calls)
    assert by_compare == 2  # the one thread's seq_nrs, and the node runs
    calls.clear()
    shown = {}

    async def look(pilot):
        await pilot.pause()
        shown["differences"] = dict(pilot.app.differences)
        pilot.app.exit()

    run = DiffApp.run
    monkeypatch.setattr(DiffApp, "run", lambda self: run(self, headless=True, size=(120, 40), auto_pilot=look))
    code, _ = _diff(traces["base"], traces["extra"], capsys, "--tui")
    assert code == 1 and shown["differences"] == {"bumps": [2], "runs": [1]}
    assert len(calls) == by_compare


def _lcs_length(xs: list, ys: list) -> int:
    """The longest common subsequence's length, by the textbook table: the truth `align` is checked against."""
    table = [[0] * (len(ys) + 1) for _ in range(len(xs) + 1)]
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


@given(st.lists(st.sampled_from("abc"), max_size=14), st.lists(st.sampled_from("abc"), max_size=14))
def test_align_is_a_longest_common_subsequence(xs, ys):
    """Every row appears once, in order on both sides; the rows paired have equal keys, as many as the longest
    common subsequence has."""
    pairs = align(xs, ys, key=str)
    assert [i for i, _ in pairs if i is not None] == list(range(len(xs)))
    assert [j for _, j in pairs if j is not None] == list(range(len(ys)))
    both = [(i, j) for i, j in pairs if i is not None and j is not None]
    assert all(xs[i] == ys[j] for i, j in both)
    assert len(both) == _lcs_length(xs, ys)


@given(st.lists(st.sampled_from("abAB"), max_size=12), st.lists(st.sampled_from("abAB"), max_size=12))
def test_alike_rows_pair_in_order_on_both_sides(xs, ys):
    """With `alike` (same letter, either case), changed rows pair up and both sides stay in order."""
    pairs = align(xs, ys, key=str, alike=lambda x, y: x.lower() == y.lower())
    assert [i for i, _ in pairs if i is not None] == list(range(len(xs)))
    assert [j for _, j in pairs if j is not None] == list(range(len(ys)))
    assert all(xs[i].lower() == ys[j].lower() for i, j in pairs if i is not None and j is not None)
