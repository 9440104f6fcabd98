"""The backward calls torch.compile made while it traced, on the command line: `agdb torch` says how many it left
out of the trace's views, `agdb show` notes them first and lists them on request (`--compile-time`), and no view
counts them as graph tasks."""
from __future__ import annotations

import json
import re

import pytest

from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb
from tests.tracer.test_torch_bridge_compile_time import TWO

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def two_compiles(tmp_path_factory):
    """`agdb torch` on a script with two compiled functions trained two steps: (its stderr, the trace's path)."""
    folder = tmp_path_factory.mktemp("two")
    script, trace = folder / "two.py", folder / "two.agdb"
    script.write_text(TWO)
    torch._dynamo.reset()
    try:
        code, _, err = _run(["torch", script, "-o", trace])
    finally:
        torch._dynamo.reset()
    assert code == 0, err
    return err, trace


def _run(argv):
    """`agdb ARGV` in this thread (a module fixture has no capsys): (exit code, "", stderr)."""
    import contextlib
    import io

    from agdb.app.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, "", err.getvalue()


def test_agdb_torch_says_how_many_compile_time_calls_it_left_out(two_compiles):
    """One line names the count (torch.compile traced two backwards) and the command that lists them."""
    err, trace = two_compiles
    assert f"agdb: 2 compile-time backward calls not shown (torch.compile's own: agdb show --compile-time {trace})" \
        in err.splitlines()


def test_show_notes_them_and_counts_only_the_program_s_graph_tasks(two_compiles, capsys, monkeypatch):
    """`agdb show` says first that they are left out; its graph tasks are the program's two (the last one nested
    nowhere), as the trace's own events have them."""
    _, trace = two_compiles
    code, out, _ = agdb(["show", trace, "--all"], capsys, monkeypatch)
    assert code == 0
    lines = [line.strip() for line in out.splitlines()]
    assert "note: 2 compile-time backward calls not shown (torch.compile's own: agdb show --compile-time)" in lines
    assert [line.split(":")[0] for line in lines if re.match(r"graph task \d+:", line)] == ["graph task 1",
                                                                                           "graph task 2"]
    assert len(load(trace).meta["graph_tasks"]) == 2


def test_show_compile_time_lists_each_call_with_its_compile(two_compiles, capsys, monkeypatch):
    """`--compile-time` lists both calls in order: compile id, the compiled function and its file, autograd.grad,
    roots and inputs; `--json` gives the entries as the trace holds them."""
    _, trace = two_compiles
    code, out, _ = agdb(["show", trace, "--compile-time"], capsys, monkeypatch)
    assert code == 0
    lines = [line.strip() for line in out.splitlines()]
    assert lines[0].startswith("2 compile-time backward calls: made by torch.compile while it traced")
    assert lines[1].startswith("1. compile 0/0 (f in ") and "two.py:4): autograd.grad from 1 root (SumBackward0)" \
        in lines[1]
    assert lines[2].startswith("2. compile 1/0 (g in ") and "autograd.grad from 1 root (SumBackward0) to 2 inputs" \
        in lines[2]
    code, out, _ = agdb(["show", trace, "--compile-time", "--json"], capsys)
    data = json.loads(out)
    assert data["count"] == 2 and data["compile_time_calls"] == load(trace).meta["compile_time_calls"]


def test_show_compile_time_on_traces_without_entries(tmp_path, capsys, monkeypatch):
    """A trace of no compiled program says there were none; an older torch trace that kept only the count says how
    many there were and that only the count was kept (and `agdb show` notes that many)."""
    from agdb import engine, tracer
    from agdb.tracer.store.tracefile import save

    with tracer.record() as rec:
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
    for name, meta, first in (("none", {}, "no compile-time backward calls"),
                              ("count", {"compile_time_calls": 3}, "3 compile-time backward calls: made by")):
        path = tmp_path / f"{name}.agdb"
        trace = rec.trace
        save(type(trace)(trace.columns, trace.strings, {**trace.meta, **meta}), path, durable=False)
        code, out, _ = agdb(["show", path, "--compile-time"], capsys, monkeypatch)
        assert code == 0 and out.splitlines()[0].startswith(first)
        if meta:
            assert out.splitlines()[1].strip() == "(this trace kept only their count)"
            _, shown, _ = agdb(["show", path], capsys, monkeypatch)
            assert "note: 3 compile-time backward calls not shown" in shown
