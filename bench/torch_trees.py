"""record("torch")'s default as a user meets it, for several checkouts of agdb side by side: on the 10k-node chain, MLP
and wide graph of bench/torch_bridge.py, the first backward of a new graph while recording (its walk, hooks and
whatever reconstruction runs inside the call) over the plain first backward, and end to end (`with record("torch")
as rec: forward().backward()` until `rec.trace` is frozen) over the plain forward and backward. Process CPU time.

Each round runs one child process per tree and graph, the trees' order turned each round, so that a shared machine's
load falls on all alike; a child measures 3 repetitions and reports its medians; the figures are the medians (and
ranges) over the rounds.

    .venv/bin/python bench/torch_trees.py --tree BEFORE --tree AFTER [--rounds R] [--nodes N]

A tree is a checkout of agdb (`git archive COMMIT | tar -x -C DIR`); agdb's packages are pointed at it before agdb
is imported, as `bench/torch_bridge.py --deep` does.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """\
import statistics, sys, time, json
finder = next(m for name, m in sys.modules.items() if name.startswith("__editable___agdb"))
root, tree, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for name, path in finder.MAPPING.items():
    finder.MAPPING[name] = tree + path[len(root):] if path.startswith(root) else path
sys.path.insert(0, root)  # bench/ of this tree: the graphs are the same for every tree
import torch
torch.set_num_threads(1)
from agdb import tracer
from agdb.tracer.sources import torch as torch_bridge
from bench import torch_bridge as graphs
forward = {"chain": graphs._chain, "mlp": graphs._mlp, "wide": graphs._wide}[kind](torch, n)
clock = time.process_time

def main():
    forward().backward()
    out = {"plain": [], "plain_backward": [], "end_to_end": [], "backward": []}
    for _ in range(3):
        t0 = clock(); z = forward(); t1 = clock(); z.backward(); t2 = clock(); del z
        out["plain"].append(t2 - t0); out["plain_backward"].append(t2 - t1)
        t0 = clock()
        with tracer.record("torch") as rec:
            z = forward(); t1 = clock(); z.backward(); t2 = clock(); del z
        assert rec.trace is not None
        out["end_to_end"].append(clock() - t0); out["backward"].append(t2 - t1)
    m = {k: statistics.median(v) for k, v in out.items()}
    print(json.dumps({"backward": m["backward"] / m["plain_backward"], "end_to_end": m["end_to_end"] / m["plain"],
                      "plain_ms": m["plain"] * 1e3}))

torch_bridge.run_with_big_stack(main)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="PATH")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    trees = [str(Path(t).resolve()) for t in args.tree]
    graphs = ("chain", "mlp", "wide")
    got: dict[tuple[str, str], list[dict]] = {(t, g): [] for t in trees for g in graphs}
    for r in range(args.rounds):
        for g in graphs:
            for tree in trees[r % len(trees):] + trees[:r % len(trees)]:
                proc = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), tree, g, str(args.nodes)],
                                      capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"bench/torch_trees.py: {tree} {g} failed:\n{proc.stderr[-2000:]}")
                got[(tree, g)].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = []
    for g in graphs:
        for tree in trees:
            runs = got[(tree, g)]
            row = {"graph": g, "nodes": args.nodes, "tree": tree, "runs": runs}
            for k in ("backward", "end_to_end", "plain_ms"):
                values = [x[k] for x in runs]
                row[k] = statistics.median(values)
                row[k + "_range"] = (min(values), max(values))
            rows.append(row)
            print(f"{g} {args.nodes:,} {tree}: first backward {row['backward']:.2f}x "
                  f"({row['backward_range'][0]:.2f}-{row['backward_range'][1]:.2f}), end to end "
                  f"{row['end_to_end']:.2f}x ({row['end_to_end_range'][0]:.2f}-{row['end_to_end_range'][1]:.2f}), "
                  f"plain {row['plain_ms']:.0f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
