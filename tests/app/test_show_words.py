"""`agdb show` names each node one way, the way every command takes it back: no node-table ids, no Python list
reprs, no table of headers only."""
from __future__ import annotations

import re
import textwrap

import pytest

from agdb.tracer.store import events as ev
from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb

MLP = textwrap.dedent("""\
    import torch
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    loss = m(torch.randn(2, 3)).sum()
    loss.backward()
""")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """A small module's run on agdb's engine, its leaves named m[0].weight and so on."""
    from agdb.app.cli import main

    where = tmp_path_factory.mktemp("mlp")
    (where / "mlp.py").write_text(MLP)
    assert main(["record", str(where / "mlp.py"), "-o", str(where / "mlp.agdb")]) == 0
    return where / "mlp.agdb"


def _tables(out: str) -> list[tuple[list[str], list[str]]]:
    """Each table show printed: (its headers, its body lines)."""
    lines, found = out.splitlines(), []
    for i, line in enumerate(lines):
        if line.startswith("┃"):
            headers = [c.strip() for c in line.strip("┃").split("┃")]
            body = []
            for row in lines[i + 2:]:
                if not row.startswith("│"):
                    break
                body.append(row)
            found.append((headers, body))
    return found


def _every_step(path, capsys) -> list[str]:
    outs = []
    for step in range(len(load(path))):
        code, out, err = agdb(["show", path, "--step", step], capsys)
        assert code == 0, err
        outs.append(out)
    return outs


def test_show_prints_no_node_ids_lists_or_empty_tables(mlp, capsys, monkeypatch):
    """At every step: no table has an id column or no rows, and no line holds a Python list or tuple repr."""
    monkeypatch.setenv("COLUMNS", "200")
    for out in _every_step(mlp, capsys):
        for headers, body in _tables(out):
            assert "id" not in headers, out
            assert body, out
        assert not re.search(r"\[\]|\['|\[\d+(, \d+)+\]|\(\d+,\)", out), out


def test_every_name_show_prints_is_taken_back_by_node(mlp, capsys, monkeypatch):
    """Each node name in show's tables, given to --node, picks that node: the inspector's title names it alike."""
    monkeypatch.setenv("COLUMNS", "200")
    trace = load(mlp)
    step = next(i for i, e in enumerate(trace) if isinstance(e, ev.TaskPushed) and e.queue_length == 2)
    _, out, _ = agdb(["show", mlp, "--step", step], capsys)
    names = {row.split("│")[1 if "depth" not in row else 2].strip() for headers, body in _tables(out)
             for row in body}
    names = {n for n in names if not n.isdigit()}
    assert any(n.startswith("AccumulateGrad m[") for n in names), names
    for name in names:
        code, shown, err = agdb(["show", mlp, "--node", name], capsys)
        assert code == 0, err
        assert shown.splitlines()[2].startswith(name), (name, shown.splitlines()[:3])
