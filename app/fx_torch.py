"""`agdb fx --torch SCRIPT [ARGS...]`: the graphs real PyTorch's AOTAutograd makes in the script's own run.

The script runs unchanged, as `python SCRIPT ARGS...` runs it, while tracer/sources/torch/fx_run.py keeps every graph
its `torch.compile` calls make (joint, forward, backward, nested subgraphs; app/fx_report.py reports them). A script
that compiles nothing but marks a target with `agdb_fx` (app/fx_common.py) gets the older report: torch's
AOTAutograd run on that target (`aot_function`, `aot_export_joint_with_descriptors`). Never imports torch itself:
tracer/sources/torch does, once torch is known to be installed.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Iterator

from .commands import fail
from .fx_common import FxError, mark_of, marked, print_report, run_as_main


def capture_script_torch(script: str, record: bool = False, scope: dict | None = None) -> tuple[Any, Any]:
    """Run `script` on real PyTorch (or take the globals `scope` of its run) and capture its `agdb_fx` target with
    torch's AOTAutograd; returns (TorchFx, and with `record` the bridge's Trace of one eager run of the target,
    else None).

    Raises:
        FxError: torch is missing; the script is missing, raised, or marks nothing usable; torch could not trace
            the target, or made no graph with seq_nr.
    """
    from agdb.tracer.sources import torch as torch_source

    if not torch_source.available():
        raise FxError(f"agdb fx --torch runs real PyTorch, which is not installed. {torch_source.INSTALL_HINT}")
    from agdb.tracer.sources.torch import fx as torch_fx

    with (marked(script) if scope is None else _marked_in(scope, script)) as (target, args):
        try:
            captured = torch_fx.capture(target, *args)
        except torch_fx.TorchFxError as e:
            raise FxError(f"{script}: {e}") from None
        except Exception as e:  # noqa: BLE001 - the user's code ran inside torch's tracing
            raise FxError(f"torch could not trace {script}'s agdb_fx: {type(e).__name__}: {_first_line(e)}"
                          f"{_hint(e)}") from None
        if not record:
            return captured, None
        try:
            return captured, torch_fx.record_run(target, *args)
        except Exception as e:  # noqa: BLE001 - the user's code, run eagerly for -o
            raise FxError(f"recording one eager run of {script}'s agdb_fx for -o raised {type(e).__name__}: "
                          f"{_first_line(e)}") from None


@contextlib.contextmanager
def _marked_in(scope: dict, script: str) -> Iterator[tuple[Any, tuple]]:
    """The mark of a script that already ran, with its folder on sys.path (the capture may import from it)."""
    folder = os.path.dirname(os.path.abspath(script))
    sys.path.insert(0, folder)
    try:
        yield mark_of(scope, script)
    finally:
        sys.path.remove(folder)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


_DATA_DEPENDENT = ("DataDependentOutputException", "GuardOnDataDependentSymNode", "DynamicOutputShapeException")


def _hint(e: BaseException) -> str:
    if type(e).__name__ in _DATA_DEPENDENT:
        return (" (the target reads a tensor's value, e.g. `if x.sum() > 0`, and AOTAutograd traces with fake "
                "tensors that have none: drop --torch to capture it on agdb's engine, which runs it)")
    return ""


def as_graph_set(captured: Any, target: str) -> Any:
    """A marked target's graphs (TorchFx) as one compile of a GraphSet, so both paths print one JSON contract. The
    line and module stack agdb's mode put on the nodes (torch records none when called directly) move to
    `meta["agdb"]`: they are agdb's, not torch's."""
    from agdb.tracer.fx.graph_set import Compile, GraphEntry, GraphSet

    found = GraphSet(compiles=[Compile(0, None, target)], notes=[f"agdb ran {captured.api} on the script's agdb_fx "
                                                                  "target"] + list(captured.notes))
    for kind in ("joint", "forward", "backward"):
        graph = getattr(captured, kind)
        if graph is None:
            continue
        graph = graph.copy()
        for n in graph.nodes:
            derived = {k: n.meta.pop(k) for k in ("stack_trace", "nn_module_stack", "fwd_nn_module_stack")
                       if k in n.meta}
            if derived:
                n.meta["agdb"] = derived
        found.graphs.append(GraphEntry(f"c0.{kind}", kind, None, 0, kind, graph))  # type: ignore[arg-type]
    return found


def report_json_torch(captured: Any, script: str) -> dict:
    """The JSON contract of app/fx_report.py for a marked target's graphs, plus the torch entry point."""
    from .fx_report import report_json as graphs_json

    data = graphs_json(as_graph_set(captured, "agdb_fx"), script)
    data["api"] = captured.api
    return data


def print_torch_report(captured: Any, partitions: bool) -> None:
    """Where the graphs came from, the joint graph's report, and a line (or, with `partitions`, the whole graphs)
    for aot_function's forward and backward graphs."""
    out = sys.stdout
    out.write(f"real PyTorch: the joint graph of {captured.api}\n")
    for note in captured.notes:
        out.write(f"note: {note}\n")
    out.write("\n")
    print_report(captured.joint)
    if captured.forward is None or captured.backward is None:
        return
    fwd, bwd = captured.forward, captured.backward
    saved = [getattr(v, "name", repr(v)) for v, desc in zip(fwd.output_node.args[0], fwd.output_node.meta.get("desc")
                                                           or (), strict=False)
             if type(desc).__name__ == "SavedForBackwardsAOTOutput"]
    calls = sum(1 for n in fwd.nodes if n.op == "call_function"), sum(1 for n in bwd.nodes if n.op == "call_function")
    out.write(f"\n{captured.api}'s partition: the forward graph runs {_ops(calls[0])} and saves "
              f"{', '.join(saved) or 'nothing'} for the backward graph, which runs {_ops(calls[1])}\n")
    if partitions:
        out.write("\nforward graph:\n")
        out.write(fwd.print_readable(meta_keys=("seq_nr",)).replace("class joint(", "class forward(", 1))
        out.write("\nbackward graph:\n")
        out.write(bwd.print_readable(meta_keys=("seq_nr",)).replace("class joint(", "class backward(", 1))


def _ops(n: int) -> str:
    return f"{n} op" if n == 1 else f"{n} ops"


def cmd_fx_torch(args: argparse.Namespace) -> int:
    """`agdb fx --torch SCRIPT [ARGS...] [--json] [--partitions] [-o FILE.agdb]`."""
    from agdb.tracer.store.tracefile import save
    from agdb.tracer.views.joint import with_joint

    status, scope = _own_graphs(args)
    if status is not None:
        return status
    if args.python_op:
        return fail("--python-op on real torch shows the custom autograd.Functions of a script's own compiled graphs; "
                     "for a marked target, torch's AOTAutograd traces them through with no trace of the call (drop "
                     "--torch to see PythonOp nodes on agdb's engine)")
    try:
        captured, trace = capture_script_torch(args.script, record=args.output is not None, scope=scope)
    except FxError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(report_json_torch(captured, args.script), indent=2))
    else:
        print_torch_report(captured, args.partitions)
    if args.output is not None:
        save(with_joint(trace, captured.joint), args.output)
        sys.stderr.write(f"wrote {args.output}: the bridge's trace of one eager run ({len(trace):,} events) and the "
                         f"joint graph from torch ({len(captured.joint):,} nodes)\n")
    return 0


def run_own_graphs(script: str, script_args: list[str], quiet: bool, command: str = "agdb fx --torch",
                   takers: bool = False, runner: Any = None) -> tuple[Any, dict, str | None]:
    """Run `script` as `python SCRIPT ARGS...` on real PyTorch, keeping every graph its own compiles make
    (tracer/sources/torch/fx_run.py): (the GraphSet, the script's globals, and one line saying how the script
    failed, or None). With `quiet`, the script's prints go to stderr (stdout carries JSON); with `takers`, the
    frames that took each number while torch traced (--torch-frames). `runner(script, args)` runs the script
    instead of `run_as_main` (-o records it).

    Raises:
        FxError: torch is missing, there is no such script, or this torch has no place to take the graphs from.
    """
    from agdb.tracer.sources import torch as torch_source

    if not torch_source.available():
        raise FxError(f"{command} runs real PyTorch, which is not installed. {torch_source.INSTALL_HINT}")
    import torch._dynamo

    from agdb.tracer.sources.torch.fx import TorchFxError
    from agdb.tracer.sources.torch.fx_run import capture_run

    torch._dynamo.reset()  # as in a fresh `python SCRIPT`: compile ids from 0/0, nothing compiled yet (tests)
    saved_stdout = sys.stdout
    if quiet:
        sys.stdout = sys.stderr  # the script's prints must not break the JSON on stdout
    try:
        with capture_run(takers=takers) as found, _progress_line(runner is None):
            scope, error = (runner or run_as_main)(script, script_args)
    except TorchFxError as e:
        raise FxError(str(e)) from None
    finally:
        if sys.stdout is sys.stderr:
            sys.stdout = saved_stdout
    return found, scope, error


def _progress_line(is_shown: bool) -> contextlib.AbstractContextManager:
    """The phase and the time elapsed on stderr while the script runs and compiles, on a terminal (a recorded run,
    -o, shows its own line, with the events so far)."""
    from .commands import err
    from .progress_line import ProgressLine
    from .run_progress import RUNNING, RunProgress

    return ProgressLine(RunProgress(RUNNING), err, counting=False) if is_shown else contextlib.nullcontext()


def compiled_nothing(script: str, shows: str) -> str:
    """What to say when a script compiled nothing and marks nothing."""
    return (f"{script} compiled nothing: {shows} the graphs the script's own torch.compile calls make (its compiled "
            "functions or modules must run, with an input that needs a gradient for a backward graph); or mark a "
            "target with `agdb_fx = (fn_or_module, (arg, ...))` to have agdb compile it (docs/fx.md)")


def _own_graphs(args: argparse.Namespace) -> tuple[int | None, dict]:
    """Run the script, keeping the graphs its own compiles make, and report them: (the exit status, the script's
    globals); the status is None when it compiled nothing and marks a target (the caller then captures that)."""
    from .fx_report import print_graphs
    from .fx_report import report_json as graphs_json

    trace = None
    try:
        if args.output is None:
            found, scope, error = run_own_graphs(args.script, list(getattr(args, "script_args", [])), args.json,
                                                 takers=getattr(args, "torch_frames", False))
        else:
            (found, scope, error), trace = _recorded_own_graphs(args)
    except FxError as e:
        return fail(str(e)), {}
    if not len(found):
        if error is None and scope.get("agdb_fx") is not None:
            return None, scope
        return fail(error or compiled_nothing(args.script, "agdb fx --torch shows")), scope
    if args.python_op:
        _as_python_ops(found)
    if args.json:
        print(json.dumps(graphs_json(found, args.script), indent=2))
    else:
        print_graphs(found, args.script, args.partitions)
    if args.output is not None:
        try:
            _save_with_graphs(found, trace, args.output)
        except (FxError, OSError) as e:
            return fail(str(e)), scope
    if error is not None:
        return fail(f"{error} (the graphs compiled before that are shown)"), scope
    return 0, scope


def _as_python_ops(found: Any) -> None:
    """--python-op: each graph with its custom Functions' ops as PythonOp / PythonOpGrad nodes."""
    from agdb.tracer.fx.python_op_view import python_op_view

    for entry in found.graphs:
        entry.graph = python_op_view(entry.graph)
    found.notes.append("--python-op: each custom autograd.Function call's ops are one PythonOp (forward) or "
                       "PythonOpGrad (backward) node; their non-tensor arguments are read from the call site's "
                       "source (meta['agdb'])")


def _recorded_own_graphs(args: argparse.Namespace) -> tuple[tuple[Any, dict, str | None], Any]:
    """`run_own_graphs` for -o: the same run, recorded by the bridge (which stands aside while torch compiles:
    NOTE [compile time] in tracer/sources/torch/compiling.py), so the trace holds the run and the graphs."""
    from .commands import record_script
    from .run_script import ScriptSource
    from .signals import ScriptSignals

    holder: dict[str, Any] = {}

    def run_script(script: str, script_args: list[str]) -> tuple[dict, str | None]:
        signals = getattr(args, "signals", None) or ScriptSignals()
        # the recorded run's globals, for an agdb_fx mark
        run = record_script(script, script_args, ScriptSource("torch"), signals, keep_globals=True)
        holder["trace"] = run.trace
        lines = run.error_text.strip().splitlines()
        return run.scope or {}, None if run.error is None else (lines[-1] if lines else str(run.error))

    found = run_own_graphs(args.script, list(getattr(args, "script_args", [])), args.json,
                           takers=getattr(args, "torch_frames", False), runner=run_script)
    return found, holder.get("trace")


def _save_with_graphs(found: Any, trace: Any, output: str) -> None:
    """Save the bridge's trace of the run with its graphs (with_graphs)."""
    from agdb.tracer.store.tracefile import save

    save(with_graphs(found, trace, output), output)
    sys.stderr.write(f"wrote {output}: the bridge's trace of the run ({len(trace):,} events) and "
                     f"{graphs_text(found)}: agdb open {output}, key 9\n")


def with_graphs(found: Any, trace: Any, output: str) -> Any:
    """The bridge's trace of the run with the first compile's joint graph and its subgraphs (the TUI's key 9,
    `agdb export --view joint`), and every compile with its own joint graph (`meta["compiles"]`, which a
    CompiledFunctionBackward node's inspector line opens). Every graph is in agdb fx --json's output.

    Raises:
        FxError: no compile had a backward (nothing to save to `output`).
    """
    from agdb.tracer.views.compiled import with_compiles
    from agdb.tracer.views.joint import with_joint

    joints = found.roots("joint")
    if not joints:
        raise FxError(f"nothing was saved to {output}: no compile had a backward, so there is no joint graph")
    root = joints[0]
    family = found.family(root.id)[1:]
    subgraphs = [(e.id, "" if e.parent == root.id else e.parent, e.name, e.graph) for e in family]
    return with_compiles(with_joint(trace, root.graph, subgraphs), compiles_meta(found, root.compile))


def graphs_text(found: Any) -> str:
    """What with_graphs keeps, for the line that says the trace was written."""
    joints = found.roots("joint")
    root = joints[0]
    count = len(found.family(root.id)) - 1
    first = f"the joint graph {root.id} with {count} subgraph{'s' if count != 1 else ''}"
    if len(joints) == 1:
        return first
    return (f"{first} (the first of {len(joints)} compiles with a backward: a CompiledFunctionBackward node's "
            "inspector line opens its own)")


def compiles_meta(found: Any, saved: int | None = None) -> list[dict]:
    """The capture's compiles as a trace's `meta["compiles"]` (tracer/views/compiled.py): each with the ids of its
    top graphs and, when it has one, its joint graph with the graphs nested in it (the Joint panel opens it from a
    CompiledFunctionBackward node), or "fx_joint" for compile `saved`, whose joint graph is the trace's own."""
    from agdb.tracer.fx.graph import to_data
    from agdb.tracer.views.compiled import IN_FX_JOINT
    from agdb.tracer.views.joint import SUBGRAPHS

    out = []
    for c in found.compiles:
        entry = {**vars(c), "graphs": [e.id for e in found.roots() if e.compile == c.index]}
        joint = next((e for e in found.roots("joint") if e.compile == c.index), None)
        if joint is not None and c.index == saved:
            entry["joint"] = IN_FX_JOINT  # kept once, as the trace's fx_joint
        elif joint is not None:
            data = to_data(joint.graph)
            family = found.family(joint.id)[1:]
            if family:
                data["info"] = {**data["info"], SUBGRAPHS: [
                    {"id": e.id, "parent": "" if e.parent == joint.id else e.parent, "name": e.name,
                     "graph": to_data(e.graph)} for e in family]}
            entry["joint"] = data
        out.append(entry)
    return out


def joint_graphs_torch(args: argparse.Namespace, command: str) -> tuple[list[tuple[str, str, Any]], str | None]:
    """The joint graphs of a script run on real PyTorch: each compile's (its id, a title, the Graph), or, for a
    script that compiled nothing but marks a target, that target's joint graph from torch's AOTAutograd (id
    `c0.joint`); and how the script failed (one line), or None.

    Raises:
        FxError: torch missing, no such script; a script that compiled nothing and marks nothing, or raised before
            compiling; no compile had a backward; a marked target torch could not trace.
    """
    found, scope, error = run_own_graphs(args.script, list(args.script_args), args.json, command)
    if not len(found):
        if error is not None or scope.get("agdb_fx") is None:
            raise FxError(error or compiled_nothing(args.script, f"{command} checks"))
        captured, _ = capture_script_torch(args.script, scope=scope)
        return [("c0.joint", f"the joint graph of {captured.api} on the script's agdb_fx target", captured.joint)], \
            None
    joints = found.roots("joint")
    if not joints:
        raise FxError((f"{error}; " if error else "") + f"{args.script} made no joint graph: its compiles ran under "
                      "no_grad or on inputs needing no gradient (inference graphs only), and a pass on joint graphs "
                      "has nothing to check")
    return [(e.id, found.compiles[e.compile].title(), e.graph) for e in joints], error


def cmd_check_pass_torch(args: argparse.Namespace, pass_fn: Any) -> int:
    """`agdb check-pass --torch SCRIPT MODULE:FUNCTION [ARGS...]`: the pass on each joint graph of the script's own
    compiled run (or of its marked target), each checked on torch's fake tensors (TorchRunner). Exit status 1 when
    any violation, or when a graph cannot be checked (named, after the results of the others)."""
    from agdb.tracer.fx.check_pass import check_pass
    from agdb.tracer.fx.interpret import NotRunnable

    try:
        joints, error = joint_graphs_torch(args, "agdb check-pass --torch")
    except FxError as e:
        return fail(str(e))
    from agdb.tracer.sources.torch.fx_runner import TorchRunner

    results: list[tuple[str, str, list]] = []
    unrunnable: list[str] = []
    for graph_id, title, graph in joints:
        try:
            results.append((graph_id, title, check_pass(graph, pass_fn, runner=TorchRunner(graph))))
        except NotRunnable as e:
            unrunnable.append(f"{graph_id}: {e}")
        except Exception as e:  # noqa: BLE001 - the pass is user code
            return fail(f"the pass raised {type(e).__name__} on {graph_id}: {_first_line(e)}")
    if args.json:
        print(json.dumps({"graphs": [g for g, _, _ in results],
                          "violations": [{"graph": g, **v.to_json()} for g, _, vs in results for v in vs],
                          "not_checked": unrunnable}, indent=2))
    else:
        for graph_id, title, found in results:
            count = f"{len(found)} violation{'s' if len(found) != 1 else ''}" if found else "no invariant broken"
            print(f"{graph_id} ({title}): {args.pass_fn}: {count}")
            for v in found:
                print(f"  [{v.kind}] {v.message}")
    if unrunnable:
        more = f" (and {len(unrunnable) - 1} more graph{'s' if len(unrunnable) > 2 else ''})" if len(unrunnable) > 1 \
            else ""
        return fail(f"cannot check {unrunnable[0]}{more}")
    if error is not None:
        return fail(f"{error} (the graphs compiled before that were checked)")
    return 1 if any(found for _, _, found in results) else 0
