"""The backward calls torch.compile makes while it traces, kept apart from the program's graph tasks (NOTE
[compile-time entries] in tracer/sources/torch/compiling.py): one plain entry each, as torch's own wrapper of the
same entry point sees the call, and nothing torch traces changed by keeping it.

The backend is aot_eager: the same AOT autograd tracing as the default inductor, without compiling C++.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402

TWO = """
import torch

def f(x):
    return torch.sin(x).sum()

def g(x, w):
    return (torch.cos(x * 2) @ w).sum()

torch.manual_seed(0)
x = torch.randn(3, 3, requires_grad=True)
w = torch.randn(3, 2, requires_grad=True)
cf = torch.compile(f, backend="aot_eager")
cg = torch.compile(g, backend="aot_eager")
for _ in range(2):
    (cf(x) + cg(x, w)).backward()
"""


def _own_witness():
    """A wrapper of torch's `_engine_run_backward`, put on before the recording (so the bridge's wraps it): what
    torch itself says of each call made while torch.compile traced (Dynamo's compile id, which of torch.autograd's
    `backward` and `grad` made it, the roots' node names, how many inputs), in order."""
    import sys

    import torch.autograd as ag
    from torch._guards import CompileContext

    original = ag._engine_run_backward
    seen: list[tuple] = []

    def run(t_outputs, *args, **kwargs):
        if torch.compiler.is_compiling():  # the kind by which of torch.autograd's functions called
            caller = sys._getframe(1)
            while caller.f_code.co_filename != ag.__file__:
                caller = caller.f_back
            caller = caller.f_code.co_name
            seen.append((str(CompileContext.current_compile_id()), caller,
                         [t.grad_fn.name() for t in t_outputs], len(args[3] if len(args) > 3 else ())))
        return original(t_outputs, *args, **kwargs)

    ag._engine_run_backward = run
    return seen, lambda: setattr(ag, "_engine_run_backward", original)


def test_each_compile_time_call_is_an_entry_apart_from_the_graph_tasks(tmp_path):
    """Two compiled functions, two steps: one entry per call torch made while tracing, with the compile id, kind and
    root names torch's own wrapper saw, the compiled frame's function and file; the program's two backward calls
    are its only graph tasks."""
    torch._dynamo.reset()
    path = str(tmp_path / "two.py")
    seen, restore = _own_witness()
    try:
        with tracer.record("torch") as rec:
            exec(compile(TWO, path, "exec"), {})  # noqa: S102 - the test's own program
    finally:
        restore()
        torch._dynamo.reset()
    trace = rec.trace
    entries = trace.meta["compile_time_calls"]
    assert len(seen) == 2
    assert [(e["compile_id"], e["kind"], e["roots"], e["num_inputs"]) for e in entries] == seen
    assert [(e["function"], e["file"], e["num_roots"]) for e in entries] == [("f", path, 1), ("g", path, 1)]
    assert all(len(e["inputs"]) == e["num_inputs"] for e in entries)
    assert len(trace.meta["graph_tasks"]) == 2 and len(trace.steps_of(Kind.GRAPH_TASK_STARTED)) == 2
    assert trace.meta["divergences"] == [] and not trace.meta.get("bridge_errors")


CAPTURE = """
import json, os, sys, traceback
from tests.tracer.fx.compiled_runner import import_before_fork
import_before_fork()
from agdb import tracer
from agdb.tracer.sources.torch.fx_run import capture_run

def capture(program, recorded, out):
    with capture_run() as found:
        if recorded:
            with tracer.record("torch") as rec:
                exec(compile(program, "nested.py", "exec"), {})
        else:
            exec(compile(program, "nested.py", "exec"), {})
    data = found.to_json()
    json.dump({"compiles": data["compiles"], "graphs": data["graphs"],
               "entries": rec.trace.meta.get("compile_time_calls") if recorded else None}, open(out, "w"))

program, outs = sys.argv[1], {"plain": sys.argv[2], "recorded": sys.argv[3]}
for how, out in outs.items():
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            capture(program, how == "recorded", out)
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        sys.exit(f"the {how} run failed")
"""
"""Runs the program twice, plain then recorded, each in a child forked from one process that imported torch and
agdb and ran nothing: each child starts from that same fresh state (seq_nrs and the region's call ids are per
process), and the imports are paid once."""


def test_keeping_the_entries_changes_nothing_torch_traces(tmp_path):
    """The program that failed with "Unexpected fake buffer" when the bridge walked compile-time calls (a nested
    compile region, a graph break, a custom Function), each run in a fresh process (seq_nrs and the region's call
    ids are per process): every graph AOTAutograd makes is the same, node for node and meta for meta, recorded or
    not, and the recording kept its compile-time entries."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from .test_torch_bridge_compile import NESTED

    outs = {how: tmp_path / f"{how}.json" for how in ("plain", "recorded")}
    run = subprocess.run([sys.executable, "-c", CAPTURE, NESTED, str(outs["plain"]), str(outs["recorded"])],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr[-3000:]
    plain, recorded = (json.loads(outs[how].read_text()) for how in ("plain", "recorded"))
    assert len(plain["graphs"]) >= 4  # joints, forwards, backwards and the nested region's subgraphs
    assert (recorded["compiles"], recorded["graphs"]) == (plain["compiles"], plain["graphs"])
    entries = recorded["entries"]
    assert entries and {e["compile_id"] for e in entries} <= {c["compile_id"] for c in plain["compiles"]}


@pytest.mark.parametrize("program", ["two", "nested"])
def test_numbers_torch_takes_while_it_compiles_are_no_nodes_of_the_program(tmp_path, program):
    """AOTAutograd's fake tensors take sequence numbers while torch compiles: none becomes a node or a culprit of the
    trace, named (the nested region's function runs line by line while torch traces it) or not. Every node the
    programs made is in their loss's graph, so every numbered node of the trace is one torch ran (its own pre-hooks
    saw it: the trace's observed NODE_STARTED), and the numbers left out are the compiles'."""
    from agdb.tracer.recording import culprits

    from .test_torch_bridge_compile import NESTED

    torch._dynamo.reset()
    try:
        with tracer.record("torch") as rec:
            exec(compile(TWO if program == "two" else NESTED, str(tmp_path / f"{program}.py"), "exec"), {})  # noqa: S102
    finally:
        torch._dynamo.reset()
    trace = rec.trace
    ran = {trace.event_node(int(s)) for s in trace.steps_of(Kind.NODE_STARTED)}
    numbered = [i for i in range(trace.num_nodes) if trace.node(i).seq_nr < 2**63]
    assert numbered and set(numbered) <= ran, [(trace.node_name(i), trace.node(i).seq_nr) for i in set(numbered) - ran]
    assert "?" not in {c.node_name for c in culprits.of_trace(trace)}
    ranges = trace.meta["compile_time_seq_nrs"]
    assert len(ranges) == 2 and all(stop > start for _, start, stop in ranges)  # two compiles: f and g, or a break
    left_out = {s for _, start, stop in ranges for s in range(start, stop)}
    assert not left_out & {trace.node(i).seq_nr for i in numbered}
