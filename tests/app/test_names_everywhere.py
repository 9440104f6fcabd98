"""One name per node everywhere (tracer/views/labels.py): the TUI (drawn graph, list, inspector, status line),
`agdb show`, `agdb export` (DOT and JSON) and `agdb diff` (text and side-by-side screen) name each node alike, for
traces of one program recorded with agdb's engine (`agdb record --as-torch`) and with real torch (`agdb torch`).

The expectations are written by hand from the programs:
- bare.py: `(x * w).sin().sum().backward()`, w a bare tensor: MulBackward0 seq 0, SinBackward0 seq 1,
  SumBackward0 seq 2, and w's AccumulateGrad, `AccumulateGrad w`.
- docs/examples/train_mlp.py: three steps of Linear(3, 4) -> Tanh -> Linear(4, 1) -> pow(2) -> mean. Each step makes
  7 numbered nodes in this order (F.linear on 2-D input is addmm(b, x, w.t())): TBackward0, AddmmBackward0,
  TanhBackward0, TBackward0, AddmmBackward0, PowBackward0, MeanBackward0, so step k's take seq_nrs 7k..7k+6; the
  four parameters' AccumulateGrads are named by the parameter's path.
Every script runs on a fresh thread, whose seq_nr counter starts at 0, in both sources.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from agdb.app.app import AgdbApp
from agdb.app.cli import main
from agdb.app.diff_app import DiffApp
from agdb.tracer.replay.diff import compare, side_of
from agdb.tracer.store.schema import Kind, short_name
from agdb.tracer.store.tracefile import load
from agdb.tracer.views.labels import NodeLabels
from agdb.widgets.graph_canvas import GraphCanvas
from agdb.widgets.node_inspector import NodeInspector
from agdb.widgets.timeline import Timeline
from tests.app.pilot import opened
from tests.engine.helpers import run_in_thread

ROOT = Path(__file__).resolve().parents[2]
BARE = """\
import torch

w = torch.ones(3, requires_grad=True)
x = torch.tensor([1.0, 2.0, 3.0])
y = (x * w).sin()
z = y.sum(){extra}
z.backward()
"""
BARE_NAMES = {"MulBackward0": "MulBackward0 seq 0", "SinBackward0": "SinBackward0 seq 1",
              "SumBackward0": "SumBackward0 seq 2", "AccumulateGrad": "AccumulateGrad w"}
"""bare.py's nodes, by their short name (each is unique there), as a list writes them."""
MLP_STEP = ("TBackward0", "AddmmBackward0", "TanhBackward0", "TBackward0", "AddmmBackward0", "PowBackward0",
            "MeanBackward0")
MLP_NUMBERED = {7 * k + i: f"{name} seq {7 * k + i}" for k in range(3) for i, name in enumerate(MLP_STEP)}
"""train_mlp.py's numbered nodes, by seq_nr, as a list writes them."""
PARAMETER = re.compile(r"AccumulateGrad model\[[02]\]\.(weight|bias)")
"""A parameter's AccumulateGrad, named by the path train_mlp.py writes to reach it (`model[0].weight`), whichever
source recorded it."""

pytest.importorskip("torch")


def _record(tmp: Path, script: Path, source: str) -> Path:
    out = tmp / f"{script.stem}.{source}.agdb"
    argv = ["record", "--as-torch", str(script), "-o", str(out)] if source == "engine" else \
        ["torch", str(script), "-o", str(out)]
    assert run_in_thread(lambda: main(argv)) == 0
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """(program, source) -> the trace file, for bare.py, a bare.py with one more op, and train_mlp.py."""
    tmp = tmp_path_factory.mktemp("names")
    bare = tmp / "bare.py"
    bare.write_text(BARE.format(extra=""))
    more = tmp / "more.py"
    more.write_text(BARE.format(extra=" * 2"))
    mlp = ROOT / "docs" / "examples" / "train_mlp.py"
    return {(name, source): _record(tmp, script, source) for name, script in (("bare", bare), ("more", more),
                                                                              ("mlp", mlp))
            for source in ("engine", "torch")}


# -- the names each surface writes, per node --------------------------------------------------------------------
def _run_order(trace) -> list[int]:
    """The nodes in the order they started running, read from the trace."""
    return [int(n) for n in trace.columns["ev_node"][trace.steps_of(Kind.NODE_STARTED)]]


def dot_names(path: Path, tmp: Path) -> dict[int, str]:
    """node -> the first line of its DOT label (`agdb export -o FILE.dot`)."""
    out = tmp / (path.stem + ".dot")
    assert main(["export", str(path), "-o", str(out)]) == 0
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'^\s+n(\d+) \[label="([^"\\]*)', out.read_text(), re.M)}


def json_names(path: Path, tmp: Path) -> tuple[dict[int, str], dict[int, str]]:
    """node -> (the first line of its label, its brief) in `agdb export -o FILE.json`."""
    out = tmp / (path.stem + ".json")
    assert main(["export", str(path), "-o", str(out)]) == 0
    boxes = [b for b in json.loads(out.read_text())["boxes"] if b["kind"] == "node"]
    return {b["node"]: b["label"][0] for b in boxes}, {b["node"]: b["brief"] for b in boxes}


def show_names(path: Path, capsys, monkeypatch) -> dict[int, str]:
    """node -> its name in `agdb show --all`'s nodes run by each graph task, at the last step."""
    monkeypatch.setenv("COLUMNS", "2000")  # one line per graph task
    capsys.readouterr()
    assert main(["show", str(path), "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ran: list[str] = []
    for line in lines[lines.index("executed, by graph task:") + 1:]:
        if not line.lstrip().startswith("graph task"):
            break
        ran.extend(line.split(": ", 1)[1].split(" → "))
    order = _run_order(load(path))
    assert len(ran) == len(order)
    return dict(zip(order, ran, strict=True))


async def tui_names(trace) -> dict[str, dict[int, str]]:
    """node -> its name in the TUI: its drawn box, its row of the graph list (name column), the node inspector's
    first line, and the status line's sentence when it starts running."""
    out: dict[str, dict[int, str]] = {"box": {}, "column": {}, "inspector": {}, "status": {}}
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = await opened(app, pilot)
        graph = screen.query_one("#graph", GraphCanvas)
        lay = graph.picture
        assert not lay.is_folded
        out["box"] = {int(lay.box_node[b]): lay.labels[b] for b in range(lay.num_boxes)}
        for row in range(graph.row_count()):
            out["column"][graph.node_at(row)] = graph.row_text(row).plain[4:4 + graph.name_width].rstrip()
        for node in range(trace.num_nodes):
            screen.selected_node = node
            await pilot.pause()
            title = screen.query_one(NodeInspector).lines[0].plain
            assert title.endswith(f"  (node {node})")
            out["inspector"][node] = title.removesuffix(f"  (node {node})")
        for step in trace.steps_of(Kind.NODE_STARTED).tolist():
            screen.step = step
            await pilot.pause()
            sentence = screen.query_one(Timeline).text.split(" · ", 1)[1]
            out["status"][trace.event_node(step)] = sentence.split(" started running")[0]
    return out


async def diff_screen_names(a, b) -> tuple[dict[int, str], dict[int, str]]:
    """node -> its name in `agdb diff --tui`'s table of node runs, for side A and side B."""
    from textual.widgets import DataTable

    sides = [side_of(t, "t", NodeLabels(t)) for t in (a, b)]
    app = DiffApp(*sides, compare(*sides))
    out: tuple[dict[int, str], dict[int, str]] = ({}, {})
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        runs = app.query_one("#runs", DataTable)
        for i in range(runs.row_count):
            row = runs.get_row_at(i)
            for side, (names, trace) in enumerate(zip(out, (a, b), strict=True)):
                names[_run_order(trace)[i]] = str(row[1 + side]).split(" (relative seq_nr")[0]
    return out


def _column(label: str) -> str:
    """A list label as a name column beside a seq_nr column writes it: a numbered node without its seq_nr."""
    return re.sub(r" seq \d+$", "", label)


def _box(label: str) -> str:
    """A list label at a box's width: `seq 8` as `s8`, `node 4` as `n4`."""
    return re.sub(r" (s)eq (\d+)$| (n)ode (\d+)$", lambda m: f" {m[1] or m[3]}{m[2] or m[4]}", label)


async def every_surface(path: Path, tmp: Path, capsys, monkeypatch) -> dict[str, dict[int, str]]:
    """Per surface, node -> the list-width name it writes (a box's and a column's turned back by the rule)."""
    trace = load(path)
    tui = await tui_names(trace)
    json_label, json_brief = json_names(path, tmp)
    return {"dot": dot_names(path, tmp), "json": json_label, "json brief": json_brief, "show": show_names(path, capsys, monkeypatch),
            "box": tui["box"], "column": tui["column"], "inspector": tui["inspector"], "status": tui["status"]}


def _check(surfaces: dict[str, dict[int, str]], expected: dict[int, str]) -> None:
    """Each surface names each node it shows as `expected` says, at its width."""
    for surface, names in surfaces.items():
        width = _box if surface in ("box", "json brief") else _column if surface == "column" else str
        for node, name in names.items():
            assert name == width(expected[node]), (surface, node, name, expected[node])
    assert set(surfaces["dot"]) == set(expected) == set(surfaces["inspector"])


# -- the tests --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["engine", "torch"])
async def test_bare_tensor_program_names_each_node_alike_everywhere(recorded, tmp_path, capsys, monkeypatch, source):
    """bare.py, from either source: every surface names the four nodes as written by hand above."""
    path = recorded["bare", source]
    trace = load(path)
    expected = {n: BARE_NAMES[short_name(trace.node(n).name)] for n in range(trace.num_nodes)}
    assert sorted(expected.values()) == sorted(BARE_NAMES.values())
    _check(await every_surface(path, tmp_path, capsys, monkeypatch), expected)


@pytest.mark.parametrize("source", ["engine", "torch"])
async def test_training_loop_names_each_node_alike_everywhere(recorded, tmp_path, capsys, monkeypatch, source):
    """train_mlp.py, from either source: the 21 numbered nodes as written by hand above; each parameter's
    AccumulateGrad by its path, the same on every surface."""
    path = recorded["mlp", source]
    trace = load(path)
    labels = NodeLabels(trace)
    expected = {}
    for n in range(trace.num_nodes):
        info = trace.node(n)
        if short_name(info.name) == "AccumulateGrad":
            assert PARAMETER.fullmatch(labels.label(n)), labels.label(n)
            expected[n] = labels.label(n)  # the source's own parameter names: checked against each other below
        else:
            expected[n] = MLP_NUMBERED[info.seq_nr]
    assert sorted(v for v in expected.values() if "seq" in v) == sorted(MLP_NUMBERED.values())
    assert len({v for v in expected.values() if "seq" not in v}) == 4
    _check(await every_surface(path, tmp_path, capsys, monkeypatch), expected)


def _numbered(trace) -> dict[int, str]:
    labels = NodeLabels(trace)
    return {trace.node(n).seq_nr: labels.label(n) for n in range(trace.num_nodes)
            if short_name(trace.node(n).name) != "AccumulateGrad"}


def _leaves(trace) -> list[str]:
    labels = NodeLabels(trace)
    return sorted(labels.label(n) for n in range(trace.num_nodes)
                  if short_name(trace.node(n).name) == "AccumulateGrad")


@pytest.mark.parametrize("program", ["bare", "mlp"])
async def test_both_sources_name_numbered_nodes_and_bare_leaves_alike(recorded, program):
    """The engine's trace and torch's name every numbered node alike (by seq_nr), bare.py's leaf alike (`w`), and
    `agdb diff --tui` writes each side's runs with those names."""
    engine, real = (load(recorded[program, s]) for s in ("engine", "torch"))
    assert _numbered(engine) == _numbered(real)
    if program == "bare":
        assert _leaves(engine) == _leaves(real) == ["AccumulateGrad w"]
    a, b = await diff_screen_names(engine, real)
    assert a == {n: NodeLabels(engine).label(n) for n in a} and b == {n: NodeLabels(real).label(n) for n in b}
    assert set(a) == set(_run_order(engine)) and set(b) == set(_run_order(real))


def test_both_sources_name_parameter_leaves_alike(recorded):
    """train_mlp.py's four parameters' AccumulateGrads have one name whichever source recorded them."""
    engine, real = (load(recorded["mlp", s]) for s in ("engine", "torch"))
    assert _leaves(engine) == _leaves(real)


@pytest.mark.parametrize("source", ["engine", "torch"])
def test_diff_text_names_nodes_as_the_views_do(recorded, capsys, source):
    """`agdb diff` of bare.py against bare.py with `* 2` after the sum: B's extra MulBackward0 takes seq_nr 3 and
    runs first; the text names the extra run, and the sum whose line changed, as every view does."""
    a, b = recorded["bare", source], recorded["more", source]
    capsys.readouterr()
    assert main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "B ran MulBackward0 seq 3 (relative seq_nr 3) in graph task 1, which A did not run" in out, out
    assert "A SumBackward0 at bare.py:6, B SumBackward0 at more.py:6" in out, out
    assert "torch::" not in out


async def test_an_error_node_and_a_graph_root_are_named_alike_everywhere(tmp_path, capsys, monkeypatch):
    """A trace written by hand with a GraphRoot (seq_nr 5, numbered) over MulBackward0 (seq_nr 4) and an Error
    node (seq_nr 2**64-1, no leaf): the Error node is `Error node N` (`Error nN` in a box) on every surface."""
    from agdb.tracer.recording.builder import TraceBuilder
    from agdb.tracer.store.schema import UINT64_MAX
    from agdb.tracer.store.tracefile import save

    b = TraceBuilder(source="test")
    t = b.thread("MainThread")
    b.node_created(thread=t, node=3, name="torch::autograd::Error", seq_nr=UINT64_MAX, topological_nr=0)
    b.node_created(thread=t, node=2, name="MulBackward0", seq_nr=4, topological_nr=1, next_edges=[(3, 0)])
    b.node_created(thread=t, node=1, name="GraphRoot", seq_nr=5, topological_nr=2, next_edges=[(2, 0)])
    b.graph_task_started(thread=t, graph_task=1, graph_root=1, roots=[(2, 0)])
    for key in (1, 2, 3):
        b.node_started(thread=t, graph_task=1, node=key, inputs=())
    trace = b.finish()
    path = tmp_path / "error.agdb"
    save(trace, path)
    error = next(n for n in range(trace.num_nodes) if trace.node(n).name.endswith("Error"))
    expected = {n: {"GraphRoot": "GraphRoot seq 5", "MulBackward0": "MulBackward0 seq 4",
                    "torch::autograd::Error": f"Error node {error}"}[trace.node(n).name] for n in range(trace.num_nodes)}
    surfaces = await every_surface(path, tmp_path, capsys, monkeypatch)
    assert surfaces["box"][error] == f"Error n{error}" and surfaces["column"][error] == f"Error node {error}"
    _check(surfaces, expected)
    assert np.all([not name.startswith("torch::") for names in surfaces.values() for name in names.values()])
