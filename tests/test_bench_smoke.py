from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run_bench(tmp_path: Path, script: str, *args: str, timeout: int = 300) -> tuple[str, dict]:
    """Run `bench/<script> ARGS --json FILE`; check it exited 0; return its stdout and the JSON it wrote."""
    out = tmp_path / f"{Path(script).stem}.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.long
def test_bench_quick_writes_json(tmp_path):
    """`bench/engine.py --quick --reps 1 --json` writes positive forward µs/op and backward µs/node for every graph
    and config, the nn model's optimizer step, and the GPT-nano step (forward, backward, AdamW and their total)."""
    stdout, data = _run_bench(tmp_path, "engine.py", "--quick", "--reps", "1")
    assert "µs/node" in stdout and "µs/op" in stdout

    assert {"meta", "targets", "graphs", "results", "checks"} <= set(data)
    assert set(data["graphs"]) == {"chain", "mlp", "nn", "gpt"}
    for graph in data["graphs"].values():
        assert 0 < graph["ops"] < graph["nodes"]

    configs = {"engine", "engine+noop-observer"} | ({"torch"} if data["meta"]["torch"] else set())
    seen = set()
    for row in data["results"]:
        assert {"graph", "config", "phase", "reps", "times_ms", "median_ms"} <= set(row)
        unit = {"forward": "op", "backward": "node", "step": "step", "total": "step"}[row["phase"]]
        assert row[f"{unit}s"] > 0 and len(row["times_ms"]) == row["reps"]
        assert row["median_ms"] > 0 and row[f"us_per_{unit}"] > 0
        seen.add((row["graph"], row["config"], row["phase"]))
    phases = {"chain": ("forward", "backward"), "mlp": ("forward", "backward"), "nn": ("forward", "backward", "step"),
              "gpt": ("forward", "backward", "step", "total")}
    assert seen == {(g, c, p) for g, ps in phases.items() for c in configs for p in ps}

    for check in data["checks"]:
        assert check["ratio"] > 0 and check["target"] > 0 and isinstance(check["met"], bool)
    if data["meta"]["torch"]:
        assert any(c["graph"] == "gpt" and c["name"] == "train step engine / torch" for c in data["checks"])


def test_threads_bench_quick_writes_json(tmp_path):
    """`bench/threads.py --quick --json` runs and writes positive timings for hops, reentrant and nested calls."""
    stdout, data = _run_bench(tmp_path, "threads.py", "--quick")
    assert "µs/hop" in stdout and "WARNING" not in stdout

    assert {"meta", "hops", "reentrant", "nested"} <= set(data)
    timing = {"reps", "times_ms", "median_ms", "min_ms"}

    hops = data["hops"]
    assert hops["nodes"] > 0 and hops["hops"] > 0
    assert {r["config"] for r in hops["results"]} == {"cpu-only", "cpu<->cuda:0 threads", "cpu<->cuda:0 no-threads"}
    for row in hops["results"]:
        assert timing | {"nodes", "hops", "us_per_node", "us_per_hop"} <= set(row)
        assert row["nodes"] == hops["nodes"] and len(row["times_ms"]) == row["reps"]
        assert row["median_ms"] > 0 and row["us_per_node"] > 0
        # A difference of two medians: a number, of either sign on a noisy machine; none for the cpu-only chain.
        assert (row["us_per_hop"] is None) == (row["hops"] == 0)
        assert row["hops"] == 0 or isinstance(row["us_per_hop"], float)

    re = data["reentrant"]
    assert re["inner_nodes"] == 3 and re["nodes"] == re["functions"] + 2
    assert [r["config"] for r in re["results"]] == ["reentrant", "plain", "top-level"]
    for row in re["results"]:
        assert timing <= set(row) and row["median_ms"] > 0
    assert re["us_per_toplevel_backward"] > 0 and isinstance(re["us_per_reentrant_backward"], float)

    nested = data["nested"]
    assert nested["layout_as_expected"] is True
    assert [r["depth"] for r in nested["results"]] == nested["depths"] == [30, 50, 70]
    for row in nested["results"]:
        assert timing | {"levels_on_calling_thread", "threads", "us_per_level"} <= set(row)
        assert row["median_ms"] > 0 and row["us_per_level"] > 0
    assert [r["threads"] for r in nested["results"]] == [1, 1, 2]
    for key in ("us_per_level_one_thread", "us_per_level_across_handoff", "us_extra_across_handoff",
                "us_per_handoff"):
        assert isinstance(nested[key], float)
    assert len(nested["handoff_us"]) == data["meta"]["sizes"]["nest_reps"]


def test_tracer_bench_quick_writes_json(tmp_path):
    """`bench/tracer.py --quick --json` runs and writes positive overhead, size, save/load and seek figures."""
    stdout, data = _run_bench(tmp_path, "tracer.py", "--quick")
    assert "state_at p99" in stdout

    assert {"meta", "targets", "overhead", "big_trace", "memory", "io", "seek", "checks"} <= set(data)

    o = data["overhead"]
    assert o["nodes"] > 0 and o["events"] > o["events_forward"] > 0 and o["events_per_node"] > 0
    for key in ("plain_forward_ms", "plain_backward_ms", "recorded_forward_ms", "recorded_backward_ms",
                "recorded_finish_ms", "finish_ns_per_event"):
        assert o[key] > 0, key
    assert set(o["ratios"]) == {"backward", "forward_backward", "forward_backward_finish"}
    assert all(v > 0 for v in o["ratios"].values())

    assert data["big_trace"]["events"] > 0 and data["memory"]["bytes_per_event"] > 0
    assert data["big_trace"]["buffers"]["rows_bytes_per_event"] > 0
    io = data["io"]
    assert io["loaded_events_match"] is True
    for key in ("file_bytes", "bytes_per_event", "save_ms", "load_ms", "save_mb_s", "load_mb_s",
                "save_ms_per_1M", "load_ms_per_1M"):
        assert io[key] > 0, key
    seek = data["seek"]
    assert seek["interval"] > 0 and seek["construct_ms"] > 0 and seek["seeks"] > 0
    for stats in (seek["cold"], seek["warm"]):
        assert 0 < stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"]

    assert len(data["checks"]) == 9 and data["info"]
    assert any(c["name"].startswith("peak bytes/event while recording") for c in data["checks"])
    loop = data["loop"]
    assert loop["graph_tasks"] == loop["calls"] == 30 and loop["events"] > 30 * 500 and loop["open_s"] > 0
    for check in data["checks"]:
        assert check["value"] > 0 and check["target"] > 0 and isinstance(check["met"], bool)
    for row in data["info"]:
        assert row["value"] > 0, row["name"]


@pytest.mark.long
def test_tui_bench_tiny_writes_json_and_reuses_its_big_trace(tmp_path):
    """`bench/tui.py` on a tiny trace prints its rows and writes first-paint, step and jump timings, recording part
    4's trace (`--big-nodes`, as small as the first part's) and saving it at `--big-trace PATH`; then
    `--only-big --big-trace PATH` loads that file and reports part 4's rows alone. Two processes: each branch of
    part 4 (recorded and saved, loaded) runs once."""
    path = tmp_path / "big.agdb"
    stdout, data = _run_bench(tmp_path, "tui.py", "--quick", "--nodes", "300", "--repeats", "3", "--reps", "1",
                              "--big-nodes", "300", "--big-trace", str(path), timeout=120)
    assert path.exists() and "loaded from" not in stdout, stdout

    rows = {}  # the closing table: "name   12.34 ms   <= 22 ms  met"
    for line in stdout.splitlines():
        if line.endswith((" met", " NOT met", " info")) and " ms" in line:
            name, value = line.split(" ms")[0].rsplit(None, 1)
            rows[name.strip()] = float(value)
    for name in ("first paint, direct (median)", "step l, direct p95", "step n, direct p95",
                 "jump warm, direct p95", "jump cold, direct p95"):
        assert rows.get(name, 0) > 0, (name, stdout)
    for name in ("overhead: unbound key, pilot", "overhead: pause, pilot", "step l, pilot minus overhead"):
        assert name in stdout

    assert {"meta", "targets", "trace", "first_paint", "interaction", "checks", "info"} <= set(data)
    assert data["trace"]["nodes"] >= 300 and data["trace"]["events"] >= 3_000
    first = data["first_paint"]
    assert first["painted_ok"] is True and len(first["runs"]) == 2
    assert 0 < first["init_median_ms"] < first["direct_median_ms"]
    assert data["keys_moved"] == {"l": 6, "n": 6, "presses": 6}
    for name, stats in data["interaction"].items():
        assert stats["n"] == 3 and len(stats["times_ms"]) == 3, name
        assert stats["p50_ms"] <= stats["p95_ms"] <= stats["p99_ms"] <= stats["max_ms"], name
        if "minus overhead" not in name:  # a difference may be negative on a noisy machine
            assert stats["p50_ms"] > 0, name
    # With the big trace's first paint, first l, first n and two runs of n keys in a row (issue 17 item 8).
    assert len(data["checks"]) == 11
    assert any(c["name"].startswith("first step l,") for c in data["checks"])
    assert any(c["name"].startswith("first n right after the first paint,") for c in data["checks"])
    big = data["big"]
    assert big["nodes"] == 300 and big["painted_ok"] is True and big["step_moved"] is True
    for key in ("first_n_after_paint_ms", "second_n_ms", "first_G_after_paint_ms"):
        assert big[key] > 0, key
    runs = big["consecutive_n"]
    assert runs["presses"] == 20 and runs["drawn_boxes"] > 0
    for phase in ("after_paint", "drawn"):
        assert runs[phase]["n"] == 20 and 0 < runs[phase]["p50_ms"] <= runs[phase]["p95_ms"], phase
    assert data["training_loop"]["calls"] == 30 and data["training_loop"]["painted_ok"] is True
    for check in data["checks"]:
        assert check["value"] > 0 and check["target"] > 0 and isinstance(check["met"], bool)

    stdout, data = _run_bench(tmp_path, "tui.py", "--quick", "--only-big", "--big-trace", str(path), timeout=120)
    assert f"loaded from {path}" in stdout, stdout
    assert set(data) == {"meta", "big", "checks", "info", "table"}
    assert [c["name"].split(",")[0] for c in data["checks"]] == [
        "first paint", "first step l", "first n right after the first paint",
        "20 consecutive n right after the first paint", "20 consecutive n"]
    assert data["big"]["nodes"] == 300 and data["big"]["events"] == big["events"] > 0


def test_export_bench_tiny_writes_json(tmp_path):
    """`bench/export.py` on tiny graphs prints its rows and writes agdb, make_dot and layout timings."""
    stdout, data = _run_bench(tmp_path, "export.py", "--quick", "--sizes", "300,1200", "--chain-nodes", "1500",
                              "--loop-steps", "40", "--reps", "1", timeout=120)

    rows = {}  # the closing table: "name   12.34 ms   >= 10.0x  met"
    for line in stdout.splitlines():
        if line.endswith((" met", " NOT met", " info")) and line.split()[0].endswith(":"):
            name, value = line[:42].strip(), line[42:54].split()[0]
            rows[name] = float(value.rstrip("x"))
    assert {"meta", "targets", "graphs", "chain", "models", "checks", "info", "table"} <= set(data)
    assert [g["wanted"] for g in data["graphs"]] == [300, 1200]
    torch_ok = data["meta"]["torchviz"] is not None
    for g, label in zip(data["graphs"], ("300", "1k"), strict=True):
        assert g["nodes"] == g["trace_nodes"] >= g["wanted"] > 0
        assert g["full"]["boxes"] == g["nodes"] and g["full"]["median_ms"] > 0
        assert 0 < g["collapsed"]["boxes"] <= g["nodes"] and g["collapsed"]["median_ms"] > 0
        assert rows[f"{label}: agdb full view"] > 0 and rows[f"{label}: agdb collapsed view"] > 0
        if torch_ok:
            assert g["torch_nodes"] == g["nodes"] and g["torchviz"]["status"] == "ok", g["torchviz"]
            assert g["ratio"] > 0 and abs(rows[f"{label}: make_dot / agdb full view"] - g["ratio"]) <= 0.051
        if g["layout"]["status"] == "ok":
            assert rows[f"{label}: dot -Tsvg of collapsed view"] > 0
    assert data["chain"]["nodes"] == 1500
    assert data["chain"]["full"]["status"] == data["chain"]["collapsed"]["status"] == "ok"
    assert data["chain"]["recursion_limit"] == data["meta"]["default_recursion_limit"]
    assert "agdb picture, default recursion limit" in stdout
    loop, mlp = data["models"]
    assert loop["nodes"] == 3 * 40 + 3 and loop["boxes"] == 4 and loop["repeats"][0][0] == "× 40: 3 nodes each"
    assert mlp["boxes"] < mlp["chains_only_boxes"] < mlp["nodes"] and mlp["repeats"][0][0].startswith("× 3: ")
    if loop["layout_status"] == "ok":
        assert rows["loop-40: --collapse, end to end"] > 0 and rows["mlp-20x3: --collapse, end to end"] > 0
        assert loop["total_s"] * 1e3 >= loop["load_ms"] + loop["fold_ms"] > 0
    for check in data["checks"]:
        assert check["value"] > 0 and check["target"] > 0 and isinstance(check["met"], bool)


def test_show_bench_quick_writes_json(tmp_path):
    """`bench/show.py --quick --json` times every `agdb show` case and compares each with the TUI's price."""
    stdout, data = _run_bench(tmp_path, "show.py", "--quick")
    assert "TUI price" in stdout
    assert data["meta"]["nodes"] == 20_000 and data["meta"]["events"] > 100_000
    assert len(data["checks"]) == 5
    for check in data["checks"]:
        assert check["cpu_s"] > 0 and check["bytes"] > 0 and isinstance(check["met"], bool)


def test_bench_fx_quick_writes_json(tmp_path):
    """`bench/fx.py --quick --json` captures a small model and reports both medians and their ratio."""
    stdout, data = _run_bench(tmp_path, "fx.py", "--quick")
    assert "capture_joint" in stdout and data["meta"]["ops"] == 500 and data["meta"]["fx_nodes"] > 500
    assert data["median_ms"]["plain"] > 0 and data["median_ms"]["capture"] > 0 and data["ratio"] > 0


def test_torch_bridge_bench_quick_writes_json(tmp_path):
    """`bench/torch_bridge.py --quick --reps 1 --json` measures the bridge on a 1k-node chain, MLP and wide graph:
    every ratio and per-node cost positive, the floors beside them (a do-nothing mode, bare hooks), every round's
    times kept, and the model predicted every order (no divergence)."""
    pytest.importorskip("torch")
    stdout, data = _run_bench(tmp_path, "torch_bridge.py", "--quick", "--reps", "1")
    assert "hook registration" in stdout and "backward" in stdout and "end to end, floor" in stdout
    assert [r["graph"] for r in data["rows"]] == ["chain", "mlp", "wide"]
    for r in data["rows"]:
        assert r["nodes"] >= 1000 and r["divergences"] == 0 and r["events"] > r["nodes"]
        for key in ("forward_ratio", "registration_us_per_node", "backward_ratio", "bare_hooks_ratio",
                    "reconstruction_us_per_node", "shapes_only_ratio", "noop_mode_ratio", "default_backward_ratio",
                    "bare_registration_us_per_node", "mode_ratio", "end_to_end_floor_ratio"):
            assert r[key] > 0, key
        assert all(len(times) == r["reps"] for name, times in r["times_ms"].items() if name != "after_each_backward")
    assert len(data["checks"]) == 18 and all(isinstance(c["met"], bool) for c in data["checks"])
    assert data["rows"][0]["reading_ratio"] > 0 and data["rows"][1]["reading_ratio"] is None  # the chain's only
