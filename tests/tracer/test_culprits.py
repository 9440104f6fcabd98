"""Culprits: which line of a user's script bumped the sequence number, by trace, CLI table and logger.

The script below is run in a fresh thread, so its counter starts at 0. The expected increments are derived
by hand from docs/engine-semantics.md: §1.2/§1.4 (generated nodes, GraphRoot for several roots, Identity for
an unused `inputs=` leaf, a custom Function's ctx node even under no_grad), §1.7 and §5.1 (create_graph
nodes: two MulBackward0 and an AddBackward0 for the InputBuffer sum), §7.1 (a tensor hook runs before its
node, so its op is created between the accumulation and the node's own formula).
"""
from __future__ import annotations

import logging
import os
import runpy
import threading

import pytest

from agdb.app.cli import main
from agdb.app.run_script import run_recorded
from agdb.tracer.recording import culprits as culprits_mod
from agdb.tracer.store.schema import short_name
from tests.engine.helpers import run_in_thread

SCRIPT = '''\
from agdb import engine as torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def triple(g):
    return g * 3


def model(x, w):
    y = x * w
    return y.sin()


x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([0.5, -1.0], requires_grad=True)
unused = torch.tensor([3.0], requires_grad=True)
a = model(x, w).sum()
b = x.exp().sum()
torch.autograd.backward([a, b], retain_graph=True)
with torch.no_grad():
    c = Scale.apply(x)
ga = torch.autograd.grad(a, [x, unused], allow_unused=True)
q = (x * x).sum()
(g1,) = torch.autograd.grad(q, x, create_graph=True)
p = x * x
p.register_hook(triple)
(g2,) = torch.autograd.grad((p * p).sum(), x, create_graph=True)
'''
LINES = SCRIPT.splitlines()

# (old seq_nr, node name, line, function), by hand; the new value is old + 1.
EXPECTED = [
    (0, "MulBackward0", 19, "model"),                   # y = x * w
    (1, "SinBackward0", 20, "model"),                   # return y.sin()
    (2, "SumBackward0", 26, "<module>"),
    (3, "ExpBackward0", 27, "<module>"),
    (4, "SumBackward0", 27, "<module>"),
    (5, "GraphRoot", 28, "<module>"),                   # two roots: a GraphRoot (engine-semantics §1.4)
    (6, "ScaleBackward", 30, "<module>"),               # Function.apply under no_grad still bumps (§1.4)
    (7, "torch::autograd::Identity", 31, "<module>"),   # `unused` never fed an op: Identity (engine-semantics §3.3)
    (8, "MulBackward0", 32, "<module>"),
    (9, "SumBackward0", 32, "<module>"),
    (10, "MulBackward0", 33, "<module>"),               # create_graph: grad * other, grad * self (§1.7)
    (11, "MulBackward0", 33, "<module>"),
    (12, "AddBackward0", 33, "<module>"),               # both reach Acc(x) slot 0: summed (engine-semantics §5.1)
    (13, "MulBackward0", 34, "<module>"),               # p = x * x
    (14, "MulBackward0", 36, "<module>"),               # forward p * p
    (15, "SumBackward0", 36, "<module>"),               # forward .sum()
    (16, "MulBackward0", 36, "<module>"),               # backward of p * p under create_graph
    (17, "MulBackward0", 36, "<module>"),
    (18, "AddBackward0", 36, "<module>"),               # both grads into p's node slot 0
    (19, "MulBackward0", 15, "triple"),                 # p's tensor hook runs before p's node (engine-semantics §7.1)
    (20, "MulBackward0", 36, "<module>"),               # backward of x * x
    (21, "MulBackward0", 36, "<module>"),
    (22, "AddBackward0", 36, "<module>"),
]


def _source(line: int) -> str:
    return LINES[line - 1].strip()


def _expected_rows(lo: int = 0, hi: int | None = None) -> list[tuple]:
    return [(old, old + 1, name, "model.py", line, func, _source(line)) for old, name, line, func in EXPECTED
            if old >= lo and (hi is None or old < hi)]


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SCRIPT)
    return path


def _record(script):
    run = run_in_thread(lambda: run_recorded(str(script), []))
    assert run.error is None, run.error_text
    return run.trace


def _rows(trace) -> list[tuple]:
    return [(c.old, c.new, c.node_name, os.path.basename(c.filename), c.lineno, c.function, c.source)
            for c in culprits_mod.of_trace(trace)]


def test_every_increment_of_the_script_has_its_line(script):
    """of_trace gives every increment with old/new, node name, file, line, function and source, as derived by hand."""
    trace = _record(script)
    assert _rows(trace) == _expected_rows()
    assert {c.filename for c in culprits_mod.of_trace(trace)} == {str(script)}


def test_graph_root_culprit_is_the_two_root_backward_line(script):
    """A backward with two roots bumps once, by GraphRoot, at the backward([a, b]) line."""
    rows = [r for r in _rows(_record(script)) if r[2] == "GraphRoot"]
    assert rows == [(5, 6, "GraphRoot", "model.py", 28, "<module>",
                     "torch.autograd.backward([a, b], retain_graph=True)")]


def test_identity_culprit_is_the_grad_line_with_the_unused_leaf(script):
    """grad(a, [x, unused], allow_unused=True) bumps once, by Identity, at the grad line."""
    rows = [r for r in _rows(_record(script)) if r[4] == 31]
    assert rows == [(7, 8, "torch::autograd::Identity", "model.py", 31, "<module>",
                     "ga = torch.autograd.grad(a, [x, unused], allow_unused=True)")]


def test_custom_function_under_no_grad_bumps_by_its_ctx_node(script):
    """Scale.apply under no_grad bumps once, by ScaleBackward, at the apply line."""
    rows = [r for r in _rows(_record(script)) if r[2] == "ScaleBackward"]
    assert rows == [(6, 7, "ScaleBackward", "model.py", 30, "<module>", "c = Scale.apply(x)")]


def test_create_graph_nodes_blame_the_grad_call(script):
    """Nodes made while a create_graph grad runs are blamed on the grad line: Mul, Mul, Add for (x*x).sum()."""
    rows = [(r[0], r[2]) for r in _rows(_record(script)) if r[4] == 33]
    assert rows == [(10, "MulBackward0"), (11, "MulBackward0"), (12, "AddBackward0")]


def test_tensor_hook_op_blames_the_hook_line(script):
    """An op run by a tensor hook during a create_graph backward is blamed on the hook's own line and function."""
    rows = [r for r in _rows(_record(script)) if r[5] == "triple"]
    assert rows == [(19, 20, "MulBackward0", "model.py", 15, "triple", "return g * 3")]


def _table(argv: list[str], monkeypatch, capsys) -> tuple[int, str, list[tuple]]:
    """Run `agdb ARGV` in a fresh thread; (exit code, thread name, parsed table rows)."""
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    name, code = run_in_thread(lambda: (threading.current_thread().name, main(argv)))
    out = capsys.readouterr().out
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 6 and "→" in cells[0]:
            old, new = (int(v) for v in cells[0].split("→"))
            file, lineno = cells[3].rsplit(":", 1)
            rows.append((old, new, cells[1], cells[2], file, int(lineno), cells[4], cells[5]))
    return code, name, rows


def _with_thread(rows: list[tuple], thread: str) -> list[tuple]:
    """Expected table rows: the thread added, and names as the table (and every panel) writes them."""
    return [(r[0], r[1], short_name(r[2]), thread, *r[3:]) for r in rows]


def test_cli_culprits_table_lists_every_increment(script, monkeypatch, capsys):
    """`agdb culprits SCRIPT` prints one row per increment: old → new, node, thread, file:line, function, source."""
    code, thread, rows = _table(["culprits", str(script)], monkeypatch, capsys)
    assert code == 0
    assert rows == _with_thread(_expected_rows(), thread)


@pytest.mark.parametrize("bounds, lo, hi", [
    (["--from", "5", "--to", "8"], 5, 8),   # 5 → 6, 6 → 7, 7 → 8
    (["--from", "20"], 20, None),           # 20 → 21 .. 22 → 23
    (["--to", "2"], 0, 2),                  # 0 → 1, 1 → 2
    (["--from", "23"], 23, None),           # the counter never moves past 23: nothing
])
def test_cli_culprits_from_to_selects_the_increments_between(script, monkeypatch, capsys, bounds, lo, hi):
    """--from X --to Y lists exactly the increments that move the counter from X up to Y."""
    code, thread, rows = _table(["culprits", str(script), *bounds], monkeypatch, capsys)
    assert code == 0
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [(r[0], r[1], short_name(r[2]), r[4])
                                                        for r in _expected_rows(lo, hi)]


def test_select_bounds_by_hand():
    """select(start, stop) keeps increments with new > start and old < stop; None leaves a side open."""
    cs = [culprits_mod.Culprit(i, i + 1, "N", 0, "f.py", i, "f", "", i) for i in range(10)]
    assert [c.old for c in culprits_mod.select(cs, 3, 6)] == [3, 4, 5]
    assert [c.old for c in culprits_mod.select(cs, None, 2)] == [0, 1]
    assert [c.old for c in culprits_mod.select(cs, 8, None)] == [8, 9]
    assert culprits_mod.select(cs, 4, 4) == []


def test_cli_culprits_of_a_saved_trace_match_the_script(script, tmp_path, monkeypatch, capsys):
    """`agdb culprits TRACE.agdb` lists the same increments as running the script."""
    out = tmp_path / "model.agdb"
    assert run_in_thread(lambda: main(["record", str(script), "-o", str(out)])) == 0
    capsys.readouterr()
    code, _, rows = _table(["culprits", str(out), "--from", "12", "--to", "20"], monkeypatch, capsys)
    assert code == 0
    assert [(r[0], r[1], r[2], r[4], r[5], r[6], r[7]) for r in rows] == _expected_rows(12, 20)


def _log_line(old: int, name: str, line: int, func: str, file: str = "model.py", source: str | None = None) -> str:
    # The documented form: `seq_nr 41 -> 42 by MulBackward0 at model.py:17 in forward: y = x * w`
    text = _source(line) if source is None else source
    return f"seq_nr {old} -> {old + 1} by {name} at {file}:{line} in {func}: {text}"


def test_logger_emits_one_line_per_increment_while_recording(script, caplog):
    """With agdb.seq_nr at INFO, recording the script logs one line per increment, in the documented format."""
    caplog.set_level(logging.INFO, logger="agdb.seq_nr")
    _record(script)
    records = [r for r in caplog.records if r.name == "agdb.seq_nr"]
    assert all(r.levelno == logging.INFO for r in records)
    assert [r.getMessage().split("\n")[0] for r in records] == [_log_line(old, name, line, func)
                                                           for old, name, line, func in EXPECTED]


def test_logger_is_silent_unless_enabled(script, caplog):
    """At the default level (WARNING) recording logs nothing to agdb.seq_nr."""
    caplog.set_level(logging.WARNING, logger="agdb.seq_nr")
    _record(script)
    assert [r for r in caplog.records if r.name == "agdb.seq_nr"] == []


WATCHED = '''\
from agdb import engine
from agdb.tracer.recording.culprits import watch

x = engine.tensor([1.0, 2.0], requires_grad=True)
with watch():
    attached = [type(o).__name__ for o in engine._observer.observers]
    y = x * 3
    z = y.exp().sum()
after = list(engine._observer.observers)
k = x * 5
'''


def test_watch_logs_without_recording(tmp_path, caplog):
    """tracer.recording.culprits.watch() logs each increment inside the block, attaches no Recorder, and detaches after."""
    path = tmp_path / "watched.py"
    path.write_text(WATCHED)
    caplog.set_level(logging.INFO, logger="agdb.seq_nr")
    env = run_in_thread(lambda: runpy.run_path(str(path)))
    lines = WATCHED.splitlines()
    messages = [r.getMessage() for r in caplog.records if r.name == "agdb.seq_nr"]
    heads = ["seq_nr 0 -> 1 by MulBackward0 at watched.py:7 in <module>: ",
             "seq_nr 1 -> 2 by ExpBackward0 at watched.py:8 in <module>: ",
             "seq_nr 2 -> 3 by SumBackward0 at watched.py:8 in <module>: "]
    # Under each line, carets by hand: `~` under the expression that ran, `^` under the op's own part.
    marks = ["    ~~^^^",              # y = x * 3: the multiplication `x * 3`, its operator and right operand
             "    ^^^^^^^",            # z = y.exp().sum(): the call `y.exp()`
             "    ~~~~~~~^^^^^^"]      # the call `y.exp().sum()`, its own part `.sum()`
    assert messages == [f"{head}{lines[i].strip()}\n{' ' * len(head)}{m}"
                        for head, i, m in zip(heads, (6, 7, 7), marks, strict=True)]
    # line 10 (k = x * 5) runs after the block: not logged
    assert "Recorder" not in env["attached"] and len(env["attached"]) == 1
    assert env["after"] == []
