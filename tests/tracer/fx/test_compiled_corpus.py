"""`agdb fx --torch SCRIPT --json` on a corpus of compiled programs, against an independent capture.

Each program of tests/tracer/fx/compiled/ is a plain script that compiles with the backend FX_CORPUS_BACKEND names.
compiled_runner.py runs it under agdb with a recording backend of the test's own there: an `aot_autograd` backend
whose compilers keep what they receive (node names, seq_nr, partitioner_tag, is_gradient_acc, custom, for the graph
and every GraphModule in it), read from torch's GraphModules without agdb. agdb's capture rides on that same
compile. Every graph the recording compilers received must be among agdb's forward and backward graphs, with their
subgraphs, node for node; each compile with a backward must come with its joint graph; and the anomalies that say
a propagation hole is there (`annotation`, `no_forward`, `retraced`) appear only where torch's graphs have one.
Planted holes (compiled/holes/) must be reported with their node names, and scripts agdb cannot report must end
with one `agdb:` line.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agdb.tracer.sources import torch as torch_bridge

needs_torch = pytest.mark.skipif(not torch_bridge.available(), reason="torch is not installed")

HERE = Path(__file__).resolve().parent
CORPUS = sorted((HERE / "compiled").glob("*.py"))
HOLES = sorted((HERE / "compiled" / "holes").glob("*.py"))
ROOT = HERE.parents[2]

EXPECTED_COMPILES = {
    "annotate_layers": ["0/0"], "annotate_region": ["0/0"], "batchnorm_train": ["0/0"], "checkpoint": ["0/0"],
    "cond": ["0/0"], "custom_function": ["0/0"], "graph_break": ["0/0", "1/0"], "inference_no_grad": ["0/0", "0/1"],
    "module_mlp": ["0/0"], "multiple_outputs": ["0/0"], "recompile_shape": ["0/0", "0/1"], "region_nested": ["0/0"],
    "region_once": ["0/0"], "region_twice": ["0/0"], "single_op": ["0/0"], "used_twice": ["0/0"],
}
"""Dynamo's compile ids each program makes: a graph break starts a second frame, a new shape or a first call with
a gradient after a no_grad call recompiles the frame."""

WITH_SUBGRAPHS = {"annotate_region", "cond", "region_nested", "region_once", "region_twice"}
"""The programs whose forward and backward graphs hold higher-order ops' subgraphs."""

NO_FORWARD = {"cond": {("true_graph_1", "cos"), ("true_graph_1", "mul"), ("false_graph_1", "mul_1"),
                       ("false_graph_1", "sin"), ("false_graph_1", "neg"), ("false_graph_1", "mul_2")}}
"""Backward nodes whose seq_nr no forward node has, in torch's own graphs: torch.cond's backward branches are traced
under the number of cond's own backward node, which no forward node carries, so torch's
copy_fwd_metadata_to_bw_nodes copies nothing to them (the annotation around the cond call is lost on them; the
recording shows their `custom` empty). `no_forward_in_recording` derives the same set from the recording; this
table pins it, so that a change in torch shows here."""

HOLE_KINDS = ("annotation", "no_forward", "retraced")


def run_under_agdb(scripts: list[Path], out: Path) -> dict[str, dict]:
    """Run each script in a forked child under `agdb fx --torch SCRIPT --json` with the recording backend; returns,
    by script stem, agdb's exit status, stdout, stderr and what the recording compilers received."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "tests.tracer.fx.compiled_runner", str(out), *map(str, scripts)],
                   cwd=ROOT, check=True, timeout=600)  # a hang guard: about 15 s of CPU
    results = {}
    for script in scripts:
        stem = out / script.stem
        received = Path(f"{stem}.received.json")
        results[script.stem] = {"rc": int(Path(f"{stem}.rc").read_text()), "out": Path(f"{stem}.out").read_text(),
                                "err": Path(f"{stem}.err").read_text(),
                                "received": json.loads(received.read_text()) if received.exists() else None}
    return results


def agdb_received(report: dict) -> list[dict]:
    """agdb's forward and backward graphs, each with the graphs nested in it, in the order agdb has them, shaped as
    the recording is (`path` as GraphModule.named_modules() spells it)."""
    by_id = {g["id"]: g for g in report["graphs"]}
    out = []
    for root in report["graphs"]:
        if root["parent"] is None and root["kind"] in ("forward", "backward"):
            family = [g for g in report["graphs"] if g["id"] == root["id"] or g["id"].startswith(root["id"] + "/")]
            assert all(by_id[g["parent"]] for g in family[1:])
            out.append({"kind": root["kind"], "graphs": [
                {"path": g["id"][len(root["id"]) + 1:].replace("/", "."),
                 "nodes": [_agdb_node(n) for n in g["nodes"]]} for g in family]})
    return out


def _agdb_node(n: dict) -> dict:
    m = n["meta"]
    return {"name": n["name"], "op": n["op"], "seq_nr": m["seq_nr"], "partitioner_tag": m["partitioner_tag"],
            "is_gradient_acc": m["is_gradient_acc"], "custom": m["custom"]}


def same_custom(recorded, shown) -> bool:
    """Equal as plain data; an object the recording kept as {"__object__": type name} is shown by agdb as text
    naming that type (`<NestedCompileRegionOptions>`)."""
    if isinstance(recorded, dict) and set(recorded) == {"__object__"}:
        return isinstance(shown, str) and recorded["__object__"] in shown
    if isinstance(recorded, dict):
        return isinstance(shown, dict) and recorded.keys() == shown.keys() and all(
            same_custom(recorded[k], shown[k]) for k in recorded)
    if isinstance(recorded, list):
        return isinstance(shown, list) and len(recorded) == len(shown) and all(
            same_custom(a, b) for a, b in zip(recorded, shown, strict=True))
    return recorded == shown and type(recorded) is type(shown)


def differences(recorded: list[dict], shown: list[dict]) -> list[str]:
    """Where agdb's graphs differ from what the recording compilers received, one line each."""
    if [(r["kind"], [g["path"] for g in r["graphs"]]) for r in recorded] != \
            [(s["kind"], [g["path"] for g in s["graphs"]]) for s in shown]:
        return [f"graphs: recorded {[(r['kind'], [g['path'] for g in r['graphs']]) for r in recorded]}, "
                f"agdb {[(s['kind'], [g['path'] for g in s['graphs']]) for s in shown]}"]
    out = []
    for i, (r, s) in enumerate(zip(recorded, shown, strict=True)):
        for rg, sg in zip(r["graphs"], s["graphs"], strict=True):
            where = f"{r['kind']} #{i} {rg['path'] or '(root)'}"
            if [n["name"] for n in rg["nodes"]] != [n["name"] for n in sg["nodes"]]:
                out.append(f"{where}: nodes {[n['name'] for n in rg['nodes']]} != {[n['name'] for n in sg['nodes']]}")
                continue
            for rn, sn in zip(rg["nodes"], sg["nodes"], strict=True):
                for key in ("op", "seq_nr", "partitioner_tag", "is_gradient_acc"):
                    if rn[key] != sn[key] or type(rn[key]) is not type(sn[key]):
                        out.append(f"{where} {rn['name']}: {key} {rn[key]!r} != {sn[key]!r}")
                if not same_custom(rn["custom"], sn["custom"]):
                    out.append(f"{where} {rn['name']}: custom {rn['custom']!r} != {sn['custom']!r}")
    return out


def no_forward_in_recording(recorded: list[dict]) -> set[tuple[str, str]]:
    """(subgraph name, node) of each backward node whose seq_nr no forward node has, by torch's predicates
    (`_is_forward_node_with_seq_nr`, `_is_backward_node_with_seq_nr`, grad-acc nodes left out), over the graphs of
    all compiles at once (a compile's forward and backward graphs never share numbers with another's here)."""
    nodes = [(g["path"].rsplit(".", 1)[-1], n) for r in recorded for g in r["graphs"] for n in g["nodes"]]
    forward = {n["seq_nr"] for _, n in nodes if n["partitioner_tag"] != "is_backward" and n["seq_nr"] is not None}
    return {(path, n["name"]) for path, n in nodes if n["partitioner_tag"] == "is_backward" and
            n["seq_nr"] is not None and not n["is_gradient_acc"] and n["seq_nr"] not in forward}


BAD_SCRIPTS = {
    "syntax_error": ("import torch\n\ndef f(x)\n    return x\n",
                     "raised SyntaxError: expected ':' (syntax_error.py, line 3)"),
    "compiles_nothing": ("import torch\n\nx = torch.randn(3, requires_grad=True)\n(x * 2).sum().backward()\n",
                         "compiles_nothing.py compiled nothing: agdb fx --torch shows the graphs the script's own "
                         "torch.compile calls make"),
    "data_dependent": ('import os\n\nimport torch\n\n\ndef f(x):\n    if x.sum() > 0:\n        return x.sin().sum()\n'
                       '    return x.cos().sum()\n\n\nx = torch.randn(3, requires_grad=True)\n'
                       'torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)'
                       '(x).backward()\n', "data_dependent.py raised Unsupported: Data-dependent branching"),
}
"""Scripts agdb cannot report, and what its one line says. Dynamo fake-runs the function before AOTAutograd sees
it, so a branch on a tensor's value under fullgraph=True fails there, and no graph was made."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """run_under_agdb's results for the corpus, the planted holes and BAD_SCRIPTS, all run by one runner (torch and
    agdb imported once for the three tests below, which are all marked `long` so that they stay together at the
    front of the order and one worker runs them)."""
    bad = tmp_path_factory.mktemp("bad_scripts")
    for name, (text, _) in BAD_SCRIPTS.items():
        (bad / f"{name}.py").write_text(text)
    scripts = CORPUS + HOLES + [bad / f"{name}.py" for name in BAD_SCRIPTS]
    assert len({p.stem for p in scripts}) == len(scripts)
    return run_under_agdb(scripts, tmp_path_factory.mktemp("out"))


@needs_torch
@pytest.mark.long
def test_every_graph_the_backends_compilers_receive_is_in_agdbs_report(runs):
    """For each program: agdb exits 0; its forward and backward graphs (with subgraphs) are exactly the graphs the
    recording compilers received, in order, with equal node names, seq_nr, partitioner_tag, is_gradient_acc and
    custom; each compile with a backward has a joint graph; no propagation hole is reported where torch has none."""
    assert {p.stem for p in CORPUS} == set(EXPECTED_COMPILES) and len(CORPUS) >= 15
    problems = []
    for name, r in ((p.stem, runs[p.stem]) for p in CORPUS):
        if r["rc"] != 0:
            problems.append(f"{name}: agdb exited {r['rc']}: {r['err'][-2000:]}")
            continue
        report, recorded = json.loads(r["out"]), r["received"]
        problems += [f"{name}: {d}" for d in differences(recorded, agdb_received(report))]
        compiles = report["compiles"]
        if [c["compile_id"] for c in compiles] != EXPECTED_COMPILES[name]:
            problems.append(f"{name}: compiles {[c['compile_id'] for c in compiles]}")
        if len(compiles) != sum(1 for x in recorded if x["kind"] == "forward"):
            problems.append(f"{name}: {len(compiles)} compiles, but the forward compiler ran "
                            f"{sum(1 for x in recorded if x['kind'] == 'forward')} times")
        roots = {(g["compile"], g["kind"]) for g in report["graphs"] if g["parent"] is None}
        problems += [f"{name}: compile {c} has a backward graph and no joint graph"
                     for c, kind in roots if kind == "backward" and (c, "joint") not in roots]
        if any(c["inference"] for c in compiles) != (name == "inference_no_grad"):
            problems.append(f"{name}: inference compiles {[c['inference'] for c in compiles]}")
        nested = any(g["path"] for x in recorded for g in x["graphs"])
        if nested != (name in WITH_SUBGRAPHS):
            problems.append(f"{name}: the backend's graphs {'hold' if nested else 'hold no'} subgraphs")
        holes = [a for a in report["anomalies"] if a["kind"] in HOLE_KINDS]
        expected = NO_FORWARD.get(name, set())
        if no_forward_in_recording(recorded) != expected:
            problems.append(f"{name}: the recording's no_forward nodes are {no_forward_in_recording(recorded)}")
        unannotated = [(g["path"], n["name"], n["custom"]) for x in recorded for g in x["graphs"] for n in g["nodes"]
                       if (g["path"].rsplit(".", 1)[-1], n["name"]) in expected and n["custom"] is not None]
        if unannotated:
            problems.append(f"{name}: torch annotated the backward nodes no forward node maps: {unannotated}")
        shown = {(a["graph"].rsplit("/", 1)[-1], a["nodes"][0]) for a in holes if a["kind"] == "no_forward"}
        if [a for a in holes if a["kind"] != "no_forward"] or shown != expected:
            problems.append(f"{name}: anomalies {[(a['kind'], a['graph'], a['nodes']) for a in holes]}")
    assert not problems, "\n".join(problems)


@needs_torch
@pytest.mark.long
def test_planted_propagation_holes_are_reported_with_their_nodes(runs):
    """A joint pass that drops one backward node's `custom` (it runs after agdb took the joint graph, before the
    partitioner): an `annotation` anomaly in the backward graph naming that node and its forward partner, and
    nothing in the joint. A joint pass that re-traces with make_fx under preserve_node_meta, without
    preserve_node_seq_nr: every node of the forward and backward graphs the backend receives has one seq_nr (the
    recording shows it), and agdb reports each of the two graphs as `retraced`, naming all its calls, instead of a
    map from one forward node to every backward node."""
    results = {p.stem: runs[p.stem] for p in HOLES}
    assert {k: r["rc"] for k, r in results.items()} == {"dropped_annotation": 0, "retraced": 0}

    dropped = results["dropped_annotation"]
    assert dropped["err"].startswith("dropped custom from ")
    name = dropped["err"].split()[-1]
    backward = next(x for x in dropped["received"] if x["kind"] == "backward")["graphs"][0]["nodes"]
    assert next(n for n in backward if n["name"] == name)["custom"] is None
    report = json.loads(dropped["out"])
    holes = [a for a in report["anomalies"] if a["kind"] in HOLE_KINDS]
    assert [(a["kind"], a["graph"], a["nodes"][0]) for a in holes] == [("annotation", "c0.backward", name)]
    partner = holes[0]["nodes"][1]
    forward = next(x for x in dropped["received"] if x["kind"] == "forward")["graphs"][0]["nodes"]
    assert next(n for n in forward if n["name"] == partner)["custom"] == {"layer": "lin2"}
    assert "lacks custom['layer']" in holes[0]["message"]

    retraced = results["retraced"]
    report = json.loads(retraced["out"])
    calls = {x["kind"]: [n for n in x["graphs"][0]["nodes"] if n["op"] == "call_function"]
             for x in retraced["received"]}
    numbers = {n["seq_nr"] for nodes in calls.values() for n in nodes}
    calls = {kind: [n["name"] for n in nodes] for kind, nodes in calls.items()}
    assert len(numbers) == 1 and len(calls["forward"]) == 3 and len(calls["backward"]) == 5
    (number,) = numbers
    holes = [(a["kind"], a["graph"], a["nodes"]) for a in report["anomalies"] if a["graph"] != "c0.joint"]
    assert holes == [("retraced", "c0.forward", calls["forward"]), ("retraced", "c0.backward", calls["backward"])]
    assert all(f"seq_nr {number}: re-traced without preserve_node_seq_nr" in a["message"]
               for a in report["anomalies"] if a["kind"] == "retraced")
    assert not [a for a in report["anomalies"] if a["graph"] == "c0.joint" and a["kind"] in HOLE_KINDS]


@needs_torch
@pytest.mark.long
def test_a_script_agdb_cannot_report_ends_with_one_line(runs):
    """A syntax error, a script that compiles nothing (and marks nothing), a compiled function torch cannot trace:
    exit status 1, one `agdb:` line on stderr saying why, no traceback, no report."""
    for name, (_, said) in BAD_SCRIPTS.items():
        r = runs[name]
        assert (r["rc"], r["out"]) == (1, ""), name
        assert r["err"].startswith("agdb: ") and r["err"].count("\n") == 1 and said in r["err"], r["err"]
        assert "Traceback" not in r["err"]
