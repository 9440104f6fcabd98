"""`agdb check-pass --torch SCRIPT MODULE:FUNCTION`: the pass on each joint graph of the script's own torch.compile
run (or of its marked target), each violation named with its graph; plain one-line errors, never a traceback."""
from __future__ import annotations

import json

import pytest

from agdb.app.cli import main
from agdb.tracer.sources import torch as torch_bridge

pytestmark = pytest.mark.skipif(not torch_bridge.available(), reason="torch is not installed")

BROKEN = '''import torch

def f(x, w):
    y = x * 2
    torch._dynamo.graph_break()
    return (y @ w).sin().sum()

x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
torch.compile(f, backend="aot_eager")(x, w).backward()
print("script done")
'''
MARKED = '''import torch

def f(x, w):
    return ((x * 2) @ w).sin().sum()

agdb_fx = (f, (torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)))
'''
NESTED = '''import torch

torch._dynamo.config.inline_single_use_invoke_subgraph = False

@torch.compiler.nested_compile_region
def block(x):
    return x.sin() * 2

x = torch.randn(3, requires_grad=True)
torch.compile(lambda x: block(x).sum(), backend="aot_eager")(x).backward()
'''
PASSES = '''def fine(graph):
    return None

def sin_to_sum(graph):
    for n in graph.nodes:
        if n.target == "aten.sin.default":
            n.target = "aten.sum.default"

def drop_seq_nr(graph):
    for n in graph.nodes:
        if n.op == "call_function":
            del n.meta["seq_nr"]
            return
'''


@pytest.fixture
def files(tmp_path):
    for name, text in (("broken.py", BROKEN), ("marked.py", MARKED), ("nested.py", NESTED), ("passes.py", PASSES)):
        (tmp_path / name).write_text(text)
    return lambda name: str(tmp_path / name)


def test_each_compile_of_the_run_is_checked_and_the_graph_is_named(files, capsys):
    """A graph break makes two compiles: `mul` is in the first joint, `sin` in the second; the pass breaking sin's
    val is named in c1.joint only, the identity pass in neither."""
    passes = files("passes.py")
    assert main(["check-pass", "--torch", files("broken.py"), f"{passes}:sin_to_sum"]) == 1
    out = capsys.readouterr().out
    assert "script done" in out  # the script ran unchanged
    lines = [line for line in out.splitlines() if line.startswith(("c0.", "c1.", "  ["))]
    assert lines[0].startswith("c0.joint (compile 0 [0/0] (f in ") and lines[0].endswith(": no invariant broken")
    assert lines[1].startswith("c1.joint (compile 1 [1/0] (") and lines[1].endswith(":sin_to_sum: 1 violation")
    assert lines[2] == ("  [stale_val] sin: meta['val'] says shape [3, 5], stride [5, 1] but it computes shape [], "
                        "stride []")
    assert main(["check-pass", "--torch", files("broken.py"), f"{passes}:fine"]) == 0
    assert capsys.readouterr().out.count("no invariant broken") == 2


def test_json_names_the_graph_of_each_violation(files, capsys):
    assert main(["check-pass", "--torch", files("broken.py"), f"{files('passes.py')}:drop_seq_nr", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)  # the script's print went to stderr
    assert data["graphs"] == ["c0.joint", "c1.joint"] and data["not_checked"] == []
    assert [(v["graph"], v["kind"], v["node"]) for v in data["violations"]] == [
        ("c0.joint", "lost_meta", "mul"), ("c1.joint", "lost_meta", "mm")]


def test_a_script_compiling_nothing_is_checked_on_its_marked_target(files, capsys):
    passes = files("passes.py")
    assert main(["check-pass", "--torch", files("marked.py"), f"{passes}:fine"]) == 0
    assert "c0.joint (the joint graph of aot_function on the script's agdb_fx target)" in capsys.readouterr().out
    assert main(["check-pass", "--torch", files("marked.py"), f"{passes}:sin_to_sum"]) == 1
    assert "[stale_val] sin:" in capsys.readouterr().out


def test_a_nested_region_is_one_line_naming_the_node(files, capsys):
    assert main(["check-pass", "--torch", files("nested.py"), f"{files('passes.py')}:fine"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agdb: cannot check c0.joint: node invoke_subgraph") and err.count("\n") == 1


def test_errors_are_one_line(files, tmp_path, capsys):
    passes = files("passes.py")
    quiet = tmp_path / "quiet.py"
    quiet.write_text("import torch\nprint(torch.ones(2).sum())\n")
    cases = [(["check-pass", "--torch", str(quiet), f"{passes}:fine"], "quiet.py compiled nothing"),
             (["check-pass", "--torch", files("marked.py"), f"{passes}:nope"], "has no function 'nope'"),
             (["check-pass", files("marked.py"), f"{passes}:fine", "arg"], "use them with --torch")]
    for argv, expected in cases:
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("agdb: ") and expected in err and err.count("\n") == 1, err
