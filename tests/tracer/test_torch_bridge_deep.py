"""A 200k-deep chain is recorded without crashing the program (in a subprocess, so a crash fails the test and
cannot take pytest down).

PyTorch frees a deep graph recursively: on the main thread's 8 MiB stack a 50k-deep graph whose nodes Python
touched crashes the interpreter (this script without `run_with_big_stack` dies of SIGSEGV at 50k and at 200k, and
runs at 40k), so 200k keeps four times that depth while costing a fifth of a 1M chain. The bridge walks without
recursion and `run_with_big_stack` gives the script a 1 GiB stack. The chain is built before the recording starts
(its forward is a loop like any other) and the recording keeps no grad values (`values=False`), which keeps this
the lightest run that still walks, hooks, runs and reconstructs a backward too deep for the usual stack and frees
the graph. The 1M chain and what `agdb torch` holds on it: `bench/torch_bridge.py --deep`, docs/benchmarks.md.
AGDB_DEEP_N=1000000 runs the 1M chain.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    from agdb import tracer
    from agdb.tracer.sources import torch as torch_bridge
    from agdb.tracer.store.schema import Kind

    def main():
        x = torch.ones(1, requires_grad=True)
        h = x
        for _ in range(N):
            h = h.neg()
        y = h.sum()
        del h
        with tracer.record("torch", values=False) as rec:
            y.backward()
            del y  # the deep graph is freed here, on the big stack
        trace = rec.trace
        runs = len(trace.steps_of(Kind.NODE_STARTED))
        print(trace.num_nodes, runs, len(trace.meta["divergences"]), x.grad.item())

    torch_bridge.run_with_big_stack(main)
""")


def test_a_deep_chain_is_recorded_without_a_crash():
    n = int(__import__("os").environ.get("AGDB_DEEP_N", 200_000))
    proc = subprocess.run([sys.executable, "-c", SCRIPT.replace("N)", f"{n})")], cwd=ROOT, capture_output=True,
                          text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    nodes, runs, divergences, grad = proc.stdout.split()
    assert int(nodes) == n + 2  # the chain, its sum and the leaf's AccumulateGrad
    assert int(runs) == n + 2 and int(divergences) == 0
    assert float(grad) == 1.0  # an even number of negations
