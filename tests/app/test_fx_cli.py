"""`agdb fx` and `agdb check-pass`: the printed report, JSON, the saved joint trace, and plain errors."""
from __future__ import annotations

import json
import re

from agdb.app.cli import main

SCRIPT = '''import torch

def f(x, w):
    a = x * w
    b = a.sin()
    return (b + a).sum()

def agdb_fx():
    return f, (torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True))
'''
PASSES = '''def stale(g):
    g.node("sin").target = "engine.sum"

def fine(g):
    pass
'''


def files(tmp_path):
    (tmp_path / "model.py").write_text(SCRIPT)
    (tmp_path / "passes.py").write_text(PASSES)
    return str(tmp_path / "model.py"), str(tmp_path / "passes.py")


def test_fx_prints_graph_map_and_anomalies(tmp_path, capsys):
    """The report shows seq_nr, descriptors, the map and the grad-acc anomaly; -o saves a drawable trace."""
    script, _ = files(tmp_path)
    assert main(["fx", script, "-o", str(tmp_path / "t.agdb")]) == 0
    out = capsys.readouterr().out
    assert re.search(r'add_1: "f32\[4\]" = engine.add\(expand, mul_1\)  # seq_nr=\d+', out)
    assert "__output_tangent(output[0])" in out and re.search(r"\d+  sin -> cos, mul_1", out)
    assert "[gradient_acc]" in out
    assert main(["export", str(tmp_path / "t.agdb"), "--view", "joint", "-o", str(tmp_path / "j.dot")]) == 0
    assert "cluster_backward" in (tmp_path / "j.dot").read_text()
    capsys.readouterr()
    saved = str(tmp_path / "t.agdb")
    assert main(["export", saved, "--view", "joint", "--collapse", "-o", str(tmp_path / "k.dot")]) == 1
    assert "--collapse does not apply to --view joint" in capsys.readouterr().err


def test_fx_json(tmp_path, capsys):
    """--json gives the graph as plain data, the map and the anomalies."""
    script, _ = files(tmp_path)
    assert main(["fx", script, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["map"] == {"mul": ["mul_2", "mul_3"], "sin": ["cos", "mul_1"], "add": [], "sum": ["expand"]}
    assert [a["kind"] for a in data["anomalies"]] == ["gradient_acc"]


def test_check_pass_exit_status(tmp_path, capsys):
    """A pass breaking an invariant exits 1 naming the node; a correct one exits 0."""
    script, passes = files(tmp_path)
    assert main(["check-pass", script, f"{passes}:stale"]) == 1
    assert "[stale_val] sin:" in capsys.readouterr().out
    assert main(["check-pass", script, f"{passes}:fine"]) == 0


LINEAR = '''import torch
from torch import nn

def agdb_fx():
    return nn.Linear(4, 2), (torch.randn(3, 4, requires_grad=True),)
'''
MORE_PASSES = '''def drop_seq_nr(g):
    del g.node("addmm").meta["seq_nr"]

def fine(g):
    pass
'''


def test_check_pass_on_a_linear_module(tmp_path, capsys):
    """A no-op pass on nn.Linear's graph is clean (the weight's transpose is a node, not a constant); a pass that
    drops addmm's seq_nr is named in --json with the Violation shape."""
    (tmp_path / "lin.py").write_text(LINEAR)
    (tmp_path / "p.py").write_text(MORE_PASSES)
    script, passes = str(tmp_path / "lin.py"), str(tmp_path / "p.py")
    assert main(["check-pass", script, f"{passes}:fine"]) == 0
    assert "no invariant broken" in capsys.readouterr().out
    assert main(["check-pass", script, f"{passes}:drop_seq_nr", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)["violations"]
    assert [(v["kind"], v["node"]) for v in found] == [("lost_meta", "addmm")]
    assert set(found[0]) == {"kind", "node", "message"}


def test_plain_errors(tmp_path, capsys):
    """No mark, a missing file, a malformed pass name: one agdb: line each, no traceback."""
    script, passes = files(tmp_path)
    for argv in (["fx", passes], ["fx", str(tmp_path / "nope.py")], ["check-pass", script, "nocolon"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("agdb: ") and "Traceback" not in err
