"""`agdb export`: DOT text, rendered formats, and the plain errors for what cannot be drawn."""
from __future__ import annotations

import shutil

import pytest

from agdb.app import export as export_mod
from agdb.app.cli import main
from agdb.app.demo import record_example
from agdb.tracer.store.tracefile import save


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "demo.agdb"
    save(record_example(), str(path))
    return str(path)


def agdb(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_export_dot_writes_one_box_per_node(demo_file, tmp_path, capsys):
    """`agdb export T -o x.dot` writes DOT with a box n{i} per node of the trace and says what it wrote."""
    from agdb.tracer.store.tracefile import load

    trace = load(demo_file)
    out = tmp_path / "g.dot"
    code, _, err = agdb(["export", demo_file, "-o", str(out)], capsys)
    assert code == 0 and f"{trace.num_nodes} boxes" in err
    text = out.read_text()
    assert all(f"    n{i} [label=" in text for i in range(trace.num_nodes))


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("suffix,magic", [(".svg", b"<?xml"), (".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_export_renders_with_graphviz(demo_file, tmp_path, capsys, suffix, magic):
    """SVG, PNG and PDF come out of dot as files of that format."""
    out = tmp_path / f"g{suffix}"
    code, _, err = agdb(["export", demo_file, "-o", str(out), "--step", "28"], capsys)
    assert code == 0, err
    assert out.read_bytes().startswith(magic)


def test_missing_dot_is_explained_and_dot_text_still_works(demo_file, tmp_path, capsys, monkeypatch):
    """Without the dot program, .svg fails with how to install it; .dot still exports."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))  # graphviz finds no `dot` on it
    code, _, err = agdb(["export", demo_file, "-o", str(tmp_path / "g.svg")], capsys)
    assert code == 1 and "not installed" in err and "apt-get install graphviz" in err and ".dot" in err
    assert not (tmp_path / "g.svg").exists()
    code, _, _ = agdb(["export", demo_file, "-o", str(tmp_path / "g.dot")], capsys)
    assert code == 0


def test_too_large_is_refused_unless_forced(demo_file, tmp_path, capsys, monkeypatch):
    """Past MAX_BOXES, rendering is refused with --collapse/--focus suggested; --force renders anyway."""
    monkeypatch.setattr(export_mod, "MAX_BOXES", 5)
    code, _, err = agdb(["export", demo_file, "-o", str(tmp_path / "g.svg")], capsys)
    assert code == 1 and "--collapse" in err and "--focus" in err and "--force" in err
    if shutil.which("dot"):
        code, _, err = agdb(["export", demo_file, "-o", str(tmp_path / "g.svg"), "--force"], capsys)
        assert code == 0, err


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_bad_dot_text_reports_dots_own_error():
    """DOT text that dot rejects fails with dot's exit status and the last line of what it said."""
    with pytest.raises(export_mod.ExportError, match=r"dot failed \(exit 1\): .*syntax error"):
        export_mod.render("digraph { a -> }", "svg")


def test_slow_layout_gives_up_after_the_timeout(monkeypatch):
    """A layout that outlasts the timeout fails with a message suggesting fewer boxes."""
    import threading

    release = threading.Event()
    monkeypatch.setattr(export_mod.graphviz, "pipe", lambda *args, **kwargs: release.wait(5) and b"")
    try:
        with pytest.raises(export_mod.ExportError, match=r"did not finish laying out in 0\.05 s.*--collapse"):
            export_mod.render("digraph { a }", "svg", timeout_s=0.05)
    finally:
        release.set()


@pytest.mark.parametrize("extra,message", [
    (["--view", "joint"], "holds no joint graph"),
    (["--step", "100000"], "outside"),
    (["--focus", "Mul"], "give a node index"),
    (["--focus", "99999"], "no node ran as number 99999"),
    (["--focus", "node:99999"], "there is no node"),
])
def test_bad_requests_get_one_plain_line(demo_file, tmp_path, capsys, extra, message):
    """Views, steps and focus nodes that cannot be drawn fail with one agdb: line, not a traceback."""
    code, _, err = agdb(["export", demo_file, "-o", str(tmp_path / "g.dot"), *extra], capsys)
    assert code == 1 and message in err and "Traceback" not in err and err.startswith("agdb: ")


def test_unknown_format_names_the_formats(demo_file, tmp_path, capsys):
    """An unknown suffix lists the formats agdb writes."""
    code, _, err = agdb(["export", demo_file, "-o", str(tmp_path / "g.jpg")], capsys)
    assert code == 1 and ".svg" in err and ".dot" in err


def test_focus_by_seq_nr_draws_its_neighbourhood(demo_file, tmp_path, capsys):
    """--focus seq:3 --radius 1 draws the node with seq_nr 3 and its direct neighbours only."""
    from agdb.tracer.store.tracefile import load

    trace = load(demo_file)
    center = next(i for i in range(trace.num_nodes) if trace.node(i).seq_nr == 3)
    near = {center} | {c for c, _ in trace.node(center).next_edges if c is not None}
    near |= {p for p in range(trace.num_nodes) if any(c == center for c, _ in trace.node(p).next_edges)}
    out = tmp_path / "g.dot"
    code, _, err = agdb(["export", demo_file, "-o", str(out), "--focus", "seq:3", "--radius", "1"], capsys)
    assert code == 0, err
    drawn = {i for i in range(trace.num_nodes) if f"    n{i} [label=" in out.read_text()}
    assert drawn == near


def test_export_json_writes_the_graph_model(demo_file, tmp_path, capsys):
    """`-o g.json` writes the agdb.graph/1 object, a box per node with the trace's names; `--format json` writes it
    whatever the file is called, and `--format dot` writes DOT to a file with no known suffix."""
    import json

    from agdb.tracer.store.tracefile import load

    trace = load(demo_file)
    out = tmp_path / "g.json"
    code, _, err = agdb(["export", demo_file, "-o", str(out), "--step", "28"], capsys)
    assert code == 0 and f"{trace.num_nodes} boxes" in err
    data = json.loads(out.read_text())
    assert data["schema"] == "agdb.graph/1" and "after step 28" in data["graph"]["title"]
    nodes = {b["node"]: b for b in data["boxes"] if b["kind"] == "node"}
    assert set(nodes) == set(range(trace.num_nodes))
    cos = next(i for i in range(trace.num_nodes) if trace.node(i).name == "CosBackward0")
    assert nodes[cos]["label"][0] == "CosBackward0 seq 3"  # the demo's fourth op (app/demo_program.py)
    named = tmp_path / "graph.txt"
    assert agdb(["export", demo_file, "-o", str(named), "--format", "json", "--step", "28"], capsys)[0] == 0
    assert json.loads(named.read_text()) == data
    as_dot = tmp_path / "graph.out"
    assert agdb(["export", demo_file, "-o", str(as_dot), "--format", "dot"], capsys)[0] == 0
    assert as_dot.read_text().startswith("digraph agdb {")


def test_unknown_suffix_points_at_format(demo_file, tmp_path, capsys):
    """A file with no suffix agdb knows is refused with the suffixes listed (.json among them) and --format named."""
    code, _, err = agdb(["export", demo_file, "-o", str(tmp_path / "g.out")], capsys)
    assert code == 1 and ".json" in err and "--format" in err
