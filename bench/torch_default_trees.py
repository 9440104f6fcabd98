"""record("torch")'s default, part by part, for several checkouts of agdb side by side, in thread CPU time: on the
chain, MLP and wide graph of bench/torch_bridge.py (10k nodes by default),
- end to end: `with record("torch") as rec: forward().backward()` until `rec.trace` is frozen, over the plain forward
  and backward (issue 29 target <= 3x); `finish` is its part from the backward's return until the trace is frozen
  (the replay of the log through agdb's model of the engine, and the builder's freezing), and `recorded` the rest
  (the forward with culprits, the first backward with its walk and hooks);
- the default backward: the second backward of a retained graph while recording, the bridge's hooks logging, over
  the plain second backward (target <= 1.5x), beside bare no-op Python pre- and post-hooks on every node (target: the
  default at most 0.25 above them) and, as the floor of any design that puts one hook on a node rather than two,
  bare no-op post-hooks alone.

Each round runs one child process per tree and graph, the trees' order turned each round (a shared machine's load
falls on all alike); a child measures --reps repetitions and reports its medians; the figures are the medians (and
ranges) over the rounds. Thread CPU time (`time.thread_time`): the recording runs on the measuring thread, and time
given to other processes or threads does not count.

    .venv/bin/python bench/torch_default_trees.py --tree BEFORE --tree AFTER [--rounds R] [--reps N] [--nodes N]

A tree is a checkout of agdb (`git archive COMMIT | tar -x -C DIR`); agdb's packages are pointed at it before agdb
is imported, as bench/torch_trees.py does.
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
root, tree, kind, n, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
for name, path in finder.MAPPING.items():
    finder.MAPPING[name] = tree + path[len(root):] if path.startswith(root) else path
sys.path.insert(0, root)  # bench/ of this tree: the graphs are the same for every tree
import torch
torch.set_num_threads(1)
from agdb import tracer
from agdb.tracer.sources import torch as torch_bridge
from bench import torch_bridge as graphs
forward = {"chain": graphs._chain, "mlp": graphs._mlp, "wide": graphs._wide}[kind](torch, n)
clock = time.thread_time

def post_hooks(z):
    handles, seen, stack = [], set(), [z.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        handles.append(node.register_hook(lambda gi, go: None))
        stack.extend(c for c, _ in node.next_functions)
    return handles

def timed(fn):
    t = clock(); fn(); return clock() - t

def main():
    forward().backward()
    out = {k: [] for k in ("plain", "end_to_end", "finish", "plain_backward", "bare_hooks", "post_hooks",
                           "default_backward")}
    for _ in range(reps):
        t0 = clock(); forward().backward(); out["plain"].append(clock() - t0)
        t0 = clock()
        with tracer.record("torch") as rec:
            forward().backward()
            t1 = clock()
        assert rec.trace is not None
        t2 = clock()
        out["end_to_end"].append(t2 - t0); out["finish"].append(t2 - t1)
        z = forward(); z.backward(retain_graph=True)
        out["plain_backward"].append(timed(lambda: z.backward(retain_graph=True)))
        handles = graphs._bare_hooks(z)
        out["bare_hooks"].append(timed(lambda: z.backward(retain_graph=True)))
        for h in handles:
            h.remove()
        handles = post_hooks(z)
        out["post_hooks"].append(timed(lambda: z.backward(retain_graph=True)))
        for h in handles:
            h.remove()
        del z, handles
        with tracer.record("torch") as rec:
            z = forward(); z.backward(retain_graph=True)
            out["default_backward"].append(timed(lambda: z.backward(retain_graph=True)))
            del z
            for state in rec.source.shared.states:  # the replay is timed in the end-to-end rows
                state.log.clear()
    m = {k: statistics.median(v) for k, v in out.items()}
    print(json.dumps({"end_to_end": m["end_to_end"] / m["plain"], "finish": m["finish"] / m["plain"],
                      "recorded": (m["end_to_end"] - m["finish"]) / m["plain"], "finish_ms": m["finish"] * 1e3,
                      "default_backward": m["default_backward"] / m["plain_backward"],
                      "bare_hooks": m["bare_hooks"] / m["plain_backward"],
                      "post_hooks": m["post_hooks"] / m["plain_backward"], "plain_ms": m["plain"] * 1e3}))

torch_bridge.run_with_big_stack(main)
"""
FIGURES = ("end_to_end", "recorded", "finish", "finish_ms", "default_backward", "bare_hooks", "post_hooks")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--graph", action="append", choices=("chain", "mlp", "wide"), metavar="GRAPH")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    trees = [str(Path(t).resolve()) for t in args.tree]
    graphs = tuple(args.graph or ("chain", "mlp", "wide"))
    got: dict[tuple[str, str], list[dict]] = {(t, g): [] for t in trees for g in graphs}
    for r in range(args.rounds):
        for g in graphs:
            for tree in trees[r % len(trees):] + trees[:r % len(trees)]:
                proc = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), tree, g, str(args.nodes),
                                       str(args.reps)], capture_output=True, text=True)
                if proc.returncode:
                    sys.exit(f"bench/torch_default_trees.py: {tree} {g} failed:\n{proc.stderr[-2000:]}")
                got[(tree, g)].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    rows = []
    for g in graphs:
        for tree in trees:
            runs = got[(tree, g)]
            row = {"graph": g, "nodes": args.nodes, "tree": tree, "runs": runs}
            for k in FIGURES:
                values = [x[k] for x in runs]
                row[k] = statistics.median(values)
                row[k + "_range"] = (min(values), max(values))
            rows.append(row)
            print(f"{g} {args.nodes:,} {tree}: " + ", ".join(
                f"{k} {row[k]:.2f} ({row[k + '_range'][0]:.2f}-{row[k + '_range'][1]:.2f})" for k in FIGURES))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
