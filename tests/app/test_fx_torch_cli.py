"""`agdb fx SCRIPT --torch`: the same script as the engine path, run on real torch; the report, JSON, the saved
trace (drawn, and shown in the TUI's joint panel), torch.compile's note, and plain errors (torch missing included)."""
from __future__ import annotations

import json
import re

import pytest

from agdb.app.cli import main
from agdb.tracer.sources import torch as torch_bridge

from .test_fx_cli import SCRIPT

MLP = '''import torch

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(4, 8)
        self.lin2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.lin2(self.lin1(x).relu()).sum()

agdb_fx = (MLP(), (torch.randn(5, 4),))
'''
COMPILED = SCRIPT.replace("return f, (", "return torch.compile(f), (")
DATA_DEPENDENT = '''import torch

def f(x):
    if x.sum() > 0:
        return x.sin().sum()
    return x.cos().sum()

agdb_fx = (f, (torch.randn(3, requires_grad=True),))
'''
needs_torch = pytest.mark.skipif(not torch_bridge.available(), reason="torch is not installed")


def _script(tmp_path, text, name="model.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@needs_torch
def test_fx_torch_prints_the_joint_graph_descriptors_map_and_partition(tmp_path, capsys):
    """The engine path's script on real torch: aten targets with torch's seq_nr and tags, the descriptors, the map,
    the grad-acc anomaly, and what aot_function's forward graph saves for its backward graph."""
    assert main(["fx", _script(tmp_path, SCRIPT), "--torch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("real PyTorch: the joint graph of aot_function\n")
    assert re.search(r'add_1: "f32\[4\]" = aten\.add\.Tensor\(expand, mul_1\)  # seq_nr=\d+, '
                     r"partitioner_tag='is_backward', is_gradient_acc", out)
    assert "tangents_1: TangentAOTInput(output=PlainAOTOutput(idx=0))  __output_tangent(output[0])" in out
    assert "output mul_2: GradAOTOutput(grad_of=PlainAOTInput(idx=1))  __grad(args[1])" in out
    assert re.search(r"\d+  sin -> cos, mul_1\n", out) and "[gradient_acc] add_1: a gradient sum" in out
    assert "saves primals_1, primals_2, mul for the backward graph" in out
    assert "class backward(" not in out


@needs_torch
def test_fx_torch_partitions_prints_both_graphs(tmp_path, capsys):
    """--partitions adds aot_function's forward and backward graphs."""
    assert main(["fx", _script(tmp_path, SCRIPT), "--torch", "--partitions"]) == 0
    out = capsys.readouterr().out
    assert "class forward(" in out and "class backward(" in out
    assert re.search(r"def forward\(self, primals_1, primals_2, mul, tangents_1\)", out)


@needs_torch
def test_fx_torch_json_matches_the_engines_map(tmp_path, capsys):
    """--json on a marked target: the same map and anomaly kinds as the engine path on the same script (aten names
    its sum `sum_1`), in the JSON contract of the run's own graphs (joint, forward and backward of one compile);
    the lines agdb's mode added sit under meta["agdb"], not where torch's own would."""
    script = _script(tmp_path, SCRIPT)
    assert main(["fx", script, "--json"]) == 0
    engine = json.loads(capsys.readouterr().out)
    assert main(["fx", script, "--torch", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    renamed = {("sum_1" if k == "sum" else k): v for k, v in engine["map"].items()}
    (joint_map,) = data["maps"]
    torch_map = {p["forward"][1]: [b[1] for b in p["backward"]] for p in joint_map["pairs"]}
    assert torch_map == renamed == {"mul": ["mul_2", "mul_3"], "sin": ["cos", "mul_1"], "add": [],
                                    "sum_1": ["expand"]}
    assert [a["kind"] for a in data["anomalies"]] == [a["kind"] for a in engine["anomalies"]] == ["gradient_acc"]
    assert (data["source"], data["api"]) == ("torch", "aot_function")
    assert [(g["id"], g["kind"], g["parent"]) for g in data["graphs"]] == [
        ("c0.joint", "joint", None), ("c0.forward", "forward", None), ("c0.backward", "backward", None)]
    sin = next(n for n in data["graphs"][0]["nodes"] if n["name"] == "sin")
    assert "stack_trace" not in sin["meta"] and "File" in sin["meta"]["agdb"]["stack_trace"]


@needs_torch
async def test_fx_torch_module_output_file_draws_and_opens_in_the_joint_panel(tmp_path, capsys):
    """A module goes through aot_export_joint_with_descriptors; -o saves the bridge's trace of an eager run with
    the joint graph, which `export --view joint` draws and the TUI's joint panel shows with its partners."""
    from agdb.app.app import AgdbApp
    from agdb.tracer.store.tracefile import load
    from agdb.widgets.joint_graph import JointGraphView

    saved = str(tmp_path / "mlp.agdb")
    assert main(["fx", _script(tmp_path, MLP), "--torch", "-o", saved]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("real PyTorch: the joint graph of aot_export_joint_with_descriptors\n")
    assert "primals_1: ParamAOTInput(target='lin1.weight')  self.get_parameter('lin1.weight')" in captured.out
    assert "the bridge's trace of one eager run" in captured.err
    assert main(["export", saved, "--view", "joint", "-o", str(tmp_path / "j.dot")]) == 0
    dot = (tmp_path / "j.dot").read_text()
    assert "cluster_backward" in dot and "aten.threshold_backward.default" in dot
    trace = load(saved)
    assert trace.source == "torch"
    app = AgdbApp(trace=trace, title="mlp")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("9")
        await pilot.pause()
        view = app.screen.query_one(JointGraphView)
        names = [n.name for n in view.nodes]
        view.cursor = names.index("relu")
        await pilot.pause()
        assert {names[i] for i in range(len(names)) if view.is_partner(i)} == {"detach_1", "threshold_backward"}
        assert "relu = relu(addmm)" in view.row_text(names.index("relu")).plain


@needs_torch
def test_fx_torch_on_a_compiled_target_says_dynamos_graph_has_no_seq_nr(tmp_path, capsys):
    """A torch.compile result: the report says whose graphs these are and that Dynamo's own graph carries no
    seq_nr, and still shows AOTAutograd's numbers."""
    assert main(["fx", _script(tmp_path, COMPILED), "--torch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("real PyTorch: the joint graph of torch.compile\nnote: the target is a torch.compile "
                          "result")
    assert "Dynamo's own graph, which a torch.compile backend receives, carries no seq_nr" in out
    assert re.search(r"\d+  sin -> cos, mul_1\n", out)


@needs_torch
def test_fx_torch_errors_are_one_line(tmp_path, capsys):
    """Data-dependent control flow torch cannot trace, --python-op, --partitions without --torch, nothing that
    needs a gradient: one `agdb:` line each, exit 1, no traceback."""
    no_grad = SCRIPT.replace("requires_grad=True", "requires_grad=False")
    cases = [(["fx", _script(tmp_path, DATA_DEPENDENT, "dd.py"), "--torch"], "torch could not trace"),
             (["fx", _script(tmp_path, SCRIPT), "--torch", "--python-op"], "--python-op on real torch shows the custom autograd.Functions of a script's own compiled graphs"),
             (["fx", _script(tmp_path, SCRIPT), "--partitions"], "use it with --torch"),
             (["fx", _script(tmp_path, no_grad, "ng.py"), "--torch"], "requires_grad=True")]
    for argv, expected in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("agdb: ") and expected in err and "Traceback" not in err and err.count("\n") == 1


def test_fx_torch_without_torch_says_how_to_install(tmp_path, capsys, monkeypatch):
    """With torch missing, --torch exits 1 with the install hint (runs whether or not torch is installed)."""
    monkeypatch.setattr(torch_bridge, "available", lambda: False)
    assert main(["fx", _script(tmp_path, SCRIPT), "--torch"]) == 1
    err = capsys.readouterr().err
    assert "not installed" in err and "pip install 'agdb[torch]'" in err


def test_the_torch_fx_command_imports_torch_only_when_run():
    """Loading the `--torch` command's module pulls in neither torch nor the converter (torch stays optional)."""
    import subprocess
    import sys

    code = "import sys, agdb.app.cli, agdb.app.fx_torch; print('\\n'.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = set(run.stdout.split())
    assert "agdb.app.fx_torch" in loaded
    assert "torch" not in loaded and "agdb.tracer.sources.torch.fx" not in loaded


@needs_torch
def test_fx_torch_output_file_takes_the_mark_from_the_recorded_runs_globals(tmp_path, capsys):
    """-o records the run with the bridge and reads the script's `agdb_fx` mark from the globals the recorder's run
    hands back: the script sees the standard library's runpy.run_path, not a stand-in, and the mark is found."""
    script = MLP.replace("import torch\n", "import runpy\nimport torch\n") + (
        'print("run_path:", runpy.run_path.__module__, runpy.run_path.__qualname__)\n')
    assert main(["fx", _script(tmp_path, script), "--torch", "-o", str(tmp_path / "m.agdb")]) == 0
    captured = capsys.readouterr()
    assert "run_path: runpy run_path\n" in captured.out
    assert captured.out.startswith("run_path: runpy run_path\nreal PyTorch: the joint graph of "
                                   "aot_export_joint_with_descriptors\n"), captured.out
