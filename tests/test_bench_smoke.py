from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_quick_writes_json(tmp_path):
    """`bench/engine.py --quick --json` runs and writes positive µs/node for every graph and config."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "engine.py"), "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "µs/node" in proc.stdout

    data = json.loads(out.read_text())
    assert {"meta", "targets", "graphs", "results", "checks"} <= set(data)
    assert set(data["graphs"]) == {"chain", "mlp"}
    for graph in data["graphs"].values():
        assert graph["nodes"] > 0

    configs = {"engine", "engine+noop-observer"} | ({"torch"} if data["meta"]["torch"] else set())
    seen = set()
    for row in data["results"]:
        assert {"graph", "config", "nodes", "reps", "times_ms", "median_ms", "us_per_node"} <= set(row)
        assert row["nodes"] > 0 and len(row["times_ms"]) == row["reps"]
        assert row["median_ms"] > 0 and row["us_per_node"] > 0
        seen.add((row["graph"], row["config"]))
    assert seen == {(g, c) for g in ("chain", "mlp") for c in configs}

    for check in data["checks"]:
        assert check["ratio"] > 0 and check["target"] > 0 and isinstance(check["met"], bool)
