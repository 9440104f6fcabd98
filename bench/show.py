"""Benchmark: what `agdb show` costs on a 1M-node trace, against what the TUI pays to reach the same step.

Run it from the repository root:

    .venv/bin/python bench/show.py            # 1,000,000 nodes (~6M events): about two minutes, most of it building
    .venv/bin/python bench/show.py --quick    # 20,000 nodes: a few seconds
    .venv/bin/python bench/show.py --json out.json

The traces
----------
Written with the public TraceBuilder (tracer/recording/builder.py) and saved to a temporary .agdb file: a backward
through a chain of N nodes (N - 1 MulBackward0 and an AccumulateGrad; NodeCreated for each, then per node a
pop, NodeStarted, BufferWritten, a push and NodeFinished: ~6 events a node). A second trace of 2,000 nodes
has one node named by 100,000 characters (`show` cuts names at 200 characters).

What is measured
----------------
Each command runs as a user runs it, `python -m agdb show FILE ...` in a subprocess with stdout to a pipe
read to the end, ``--reps`` times (1 with ``--quick``... 3 by default); the median wall time is reported,
and the child's CPU time (user + sys, from ``resource.getrusage(RUSAGE_CHILDREN)``), which a loaded
machine disturbs less. Commands: the last step (the default), the middle step, one node's rows at the
middle step (``--node``), and ``--json --limit 20``; and the long-name trace at the step where the long
name is among the last nodes run, with ``--all``.

The reference is the TUI's price for the same step, measured in this process: ``load`` of the file,
``Replay(trace)`` and ``state_at(step)`` (what ``StepScreen`` computes before it paints a step). Target: a
show's CPU time at most that reference plus 1.5 s (Python's start-up and the imports of a fresh process).
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agdb.tracer.recording.builder import TraceBuilder  # noqa: E402
from agdb.tracer.replay.replay import Replay  # noqa: E402
from agdb.tracer.store.schema import UINT64_MAX  # noqa: E402
from agdb.tracer.store.tracefile import load, save  # noqa: E402
from bench._common import bench_main  # noqa: E402

OVERHEAD_S = 1.5
"""What a fresh `python -m agdb` costs before it reads the trace, allowed on top of the TUI's price."""


def chain_trace(n: int, long_name_at: int = -1) -> Any:
    """A backward through a chain of `n` nodes, written with the TraceBuilder (see the module docstring)."""
    b = TraceBuilder(source="bench")
    t = b.thread("MainThread")
    q = b.queue(f"cpu:{t}")
    for k in range(n, 0, -1):
        name = "AccumulateGrad" if k == n else "X" * 100_000 if k - 1 == long_name_at else "MulBackward0"
        b.node_created(thread=t, node=k, name=name, seq_nr=UINT64_MAX if k == n else n - k, topological_nr=n - k,
                       next_edges=[(k + 1, 0)] if k < n else [])
    b.graph_task_started(thread=t, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.dependencies_computed(thread=t, graph_task=1, min_topo_nr=0, dependencies=[(k, 1) for k in range(2, n + 1)])
    b.task_pushed(thread=t, graph_task=1, node=1, queue=q, seq_nr=n - 1, queue_length=1)
    for k in range(1, n + 1):
        b.task_popped(thread=t, graph_task=1, node=k, queue=q, queue_length=0)
        b.node_started(thread=t, graph_task=1, node=k, inputs=[None])
        if k < n:
            b.buffer_written(thread=t, graph_task=1, node=k + 1, slot=0, is_accumulation=False)
            b.task_pushed(thread=t, graph_task=1, node=k + 1, queue=q, seq_nr=n - k - 1, queue_length=1)
        b.node_finished(thread=t, graph_task=1, node=k, outputs=[None])
    b.graph_task_finished(thread=t, graph_task=1)
    return b.finish()


def _show(path: Path, *args: Any) -> tuple[float, float, int]:
    """(wall s, CPU s, bytes printed) of one `agdb show PATH ARGS` in a subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "agdb", "show", str(path), *map(str, args)], cwd=ROOT,
                          env={**os.environ, "COLUMNS": "120"},
                          capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, len(done.stdout)


def _tui_price(path: Path, step: int) -> float:
    """Seconds of load + Replay + state_at(step): what the TUI computes before painting that step."""
    start = time.process_time()
    Replay(load(path)).state_at(step)
    return time.process_time() - start


def run(quick: bool, reps: int | None) -> dict:
    n = 20_000 if quick else 1_000_000
    reps = reps or (1 if quick else 3)
    checks: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        big, named = Path(tmp) / "chain.agdb", Path(tmp) / "named.agdb"
        start = time.perf_counter()
        trace = chain_trace(n)
        build_s = time.perf_counter() - start
        save(trace, big)
        events = len(trace)
        del trace
        save(chain_trace(2000, long_name_at=1990), named)
        middle = n + 3 + 5 * (n // 2)  # n NodeCreated, 3 to start, 5 events a node: half the nodes have run
        cases = [("last step", big, (), events - 1), ("middle step", big, ("--step", middle), middle),
                 ("one node, middle step", big, ("--step", middle, "--node", n // 2), middle),
                 ("--json --limit 20, middle", big, ("--step", middle, "--json", "--limit", 20), middle),
                 ("100,000-char name, --all", named, ("--step", 2003 + 5 * 1995, "--all"), 2003 + 5 * 1995)]
        for name, path, args, step in cases:
            runs = [_show(path, *args) for _ in range(reps)]
            price = _tui_price(path, step)
            cpu = statistics.median(r[1] for r in runs)
            checks.append({"name": name, "wall_s": statistics.median(r[0] for r in runs), "cpu_s": cpu,
                           "bytes": runs[0][2], "tui_price_s": price, "target_s": price + OVERHEAD_S,
                           "met": cpu <= price + OVERHEAD_S})
    return {"meta": {"nodes": n, "events": events, "build_s": build_s, "reps": reps}, "checks": checks}


def print_report(result: dict) -> None:
    meta = result["meta"]
    print(f"agdb show on a {meta['nodes']:,}-node chain ({meta['events']:,} events; built with the TraceBuilder in "
          f"{meta['build_s']:.1f} s), median of {meta['reps']}")
    print(f"{'case':<30}{'wall s':>9}{'CPU s':>9}{'printed':>10}{'TUI price':>11}{'target':>9}  status")
    for c in result["checks"]:
        print(f"{c['name']:<30}{c['wall_s']:>9.2f}{c['cpu_s']:>9.2f}{c['bytes']:>10,}{c['tui_price_s']:>11.2f}"
              f"{c['target_s']:>9.2f}  {'met' if c['met'] else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    return bench_main(__doc__, run, print_report, quick_help="20,000 nodes, one run per command",
                      reps_help="runs of each command (default 3, --quick 1)", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
