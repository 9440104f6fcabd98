"""`agdb fx` and `agdb check-pass`: capture the joint graph of what a script marks, print it, check a pass.

A script marks its target with a module-level `agdb_fx`: a pair `(function_or_module, args)`, or a function
of no arguments returning that pair (docs/fx.md). The script runs on agdb's engine (`import torch` gets it);
with `--torch`, on real PyTorch (app/fx_torch.py).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

HOW_TO_MARK = ("mark what to capture with a module-level `agdb_fx = (fn_or_module, (arg, ...))` in the script, "
               "or a function `def agdb_fx(): return fn_or_module, (arg, ...)` (docs/fx.md)")


class FxError(Exception):
    """What went wrong, said in one line for the user."""


def register(sub: Any) -> None:
    """Add the `fx` and `check-pass` subcommands to agdb's subparsers."""
    fx = sub.add_parser("fx", help="capture the joint forward/backward FX graph of what a script marks",
                        description="Run SCRIPT on agdb's engine (with --torch, on real PyTorch), capture the joint "
                                    "graph of its `agdb_fx` target and print it with seq_nr, tags, descriptors, the "
                                    "forward-to-backward map and its anomalies. " + HOW_TO_MARK[0].upper()
                                    + HOW_TO_MARK[1:] + ".")
    fx.add_argument("script")
    fx.add_argument("--json", action="store_true", help="print the graph, map and anomalies as JSON")
    fx.add_argument("--python-op", action="store_true",
                    help="show custom autograd.Functions as PythonOp/PythonOpGrad nodes (default: traced through)")
    fx.add_argument("-o", "--output", default=None, metavar="FILE.agdb",
                    help="also save a trace with the joint graph (the engine's; with --torch, the bridge's trace of "
                         "one eager run): draw it with agdb export --view joint, open it with agdb open (key 9)")
    fx.add_argument("--torch", action="store_true",
                    help="run SCRIPT on real PyTorch and convert the graphs torch's AOTAutograd makes (a module: "
                         "aot_export_joint_with_descriptors; a function: aot_function's joint, forward and backward "
                         "graphs), with torch's own seq_nr, partitioner_tag, is_gradient_acc and descriptors")
    fx.add_argument("--partitions", action="store_true",
                    help="with --torch, also print aot_function's forward and backward graphs")
    fx.set_defaults(func=cmd_fx)
    cp = sub.add_parser("check-pass", help="run a graph pass on a script's joint graph and check its invariants",
                        description="Capture SCRIPT's joint graph (" + HOW_TO_MARK + "), run the pass "
                                    "MODULE:FUNCTION on a copy, and name each node where meta['val'] is stale, a "
                                    "mutation appears, or an input and an output newly alias. Exits 1 if any.")
    cp.add_argument("script")
    cp.add_argument("pass_fn", metavar="MODULE:FUNCTION",
                    help="the pass: an importable module or a .py file, and a function taking the graph")
    cp.add_argument("--json", action="store_true", help="print the violations as JSON")
    cp.set_defaults(func=cmd_check_pass)


def _fail(message: str) -> int:
    sys.stderr.write(f"agdb: {message}\n")
    return 1


def capture_script(script: str, python_op: bool = False, record: bool = False) -> tuple[Any, Any]:
    """Run `script` on agdb's engine, find its `agdb_fx` mark and capture it; returns (graph, trace or None).

    Raises:
        FxError: the script is missing, raised, or marks nothing usable.
    """
    from . import torch_shim

    shim = torch_shim.install()
    try:
        with marked(script) as (target, args):
            return _capture_engine(script, target, args, python_op, record)
    finally:
        torch_shim.uninstall(shim)


def _capture_engine(script: str, target: Any, args: tuple, python_op: bool, record: bool) -> tuple[Any, Any]:
    from agdb.tracer.fx import capture_joint

    mode = "python_op" if python_op else "trace"
    try:
        if record:
            from agdb import tracer

            with tracer.record() as rec:
                graph = capture_joint(target, *args, custom_functions=mode)
            return graph, rec.trace
        return capture_joint(target, *args, custom_functions=mode), None
    except Exception as e:  # noqa: BLE001 - the user's code ran inside the capture
        raise FxError(f"capturing {script}'s agdb_fx raised {type(e).__name__}: {e}") from None


@contextmanager
def marked(script: str) -> Iterator[tuple[Any, tuple]]:
    """Run `script` (as `__agdb_fx__`) and give its `agdb_fx` mark as (target, args); the script's folder stays on
    sys.path until the block ends (the capture may import from it).

    Raises:
        FxError: the script is missing, raised, or marks nothing usable.
    """
    path = Path(script)
    if not path.is_file():
        raise FxError(f"{script}: no such file")
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        try:
            scope = runpy.run_path(str(path), run_name="__agdb_fx__")
        except SystemExit:
            raise FxError(f"{script} called sys.exit before agdb could capture it") from None
        except Exception as e:  # noqa: BLE001 - the user's script: say what it raised, in one line
            raise FxError(f"{script} raised {type(e).__name__}: {e}") from None
        mark = scope.get("agdb_fx")
        if mark is None:
            raise FxError(f"{script} marks nothing: {HOW_TO_MARK}")
        if callable(mark) and not isinstance(mark, tuple):
            try:
                mark = mark()
            except Exception as e:  # noqa: BLE001 - the user's function
                raise FxError(f"{script}'s agdb_fx() raised {type(e).__name__}: {e}") from None
        if not (isinstance(mark, tuple) and len(mark) == 2 and callable(mark[0])):
            raise FxError(f"{script}: agdb_fx must be (fn_or_module, args); {HOW_TO_MARK}")
        target, args = mark
        yield target, args if isinstance(args, tuple) else (args,)
    finally:
        sys.path.remove(folder)


def report_json(graph: Any) -> dict:
    """The graph, the map (forward node -> backward nodes) and the anomalies, as plain data."""
    from agdb.tracer.fx import to_data
    from agdb.tracer.fx.seq_map import anomalies, seq_map

    m = seq_map(graph)
    return {"format": "agdb.fx-report/1", "graph": to_data(graph),
            "map": {f.name: [b.name for b in bs] for f, bs in m.backward_of.items()},
            "anomalies": [a.to_json() for a in anomalies(graph)]}


def print_report(graph: Any) -> None:
    """The graph as code, the descriptors, the map and the anomalies, for a terminal."""
    from agdb.tracer.fx.seq_map import anomalies, seq_map

    out = sys.stdout
    out.write(graph.print_readable(meta_keys=("seq_nr", "partitioner_tag")))
    out.write("\ndescriptors:\n")
    for n in graph.nodes:
        if n.op == "placeholder":
            out.write(f"  {n.name}: {n.meta['desc']!r}  {n.meta['desc'].expr()}\n")
    for v, d in zip(graph.output_node.args[0], graph.output_node.meta["desc"], strict=True):
        if d is not None:
            out.write(f"  output {getattr(v, 'name', v)}: {d!r}  {d.expr()}\n")
    out.write("\nforward -> backward (by seq_nr):\n")
    for f, bs in seq_map(graph).backward_of.items():
        out.write(f"  {f.meta['seq_nr']:>4}  {f.name} -> {', '.join(b.name for b in bs) or '(none)'}\n")
    found = anomalies(graph)
    out.write(f"\nanomalies: {len(found) or 'none'}\n")
    for a in found:
        out.write(f"  [{a.kind}] {a.message}\n")
        for file, line, fn, node in a.culprits:
            out.write(f"      culprit: {os.path.basename(file)}:{line} in {fn} (made {node})\n")


def cmd_fx(args: argparse.Namespace) -> int:
    """`agdb fx SCRIPT`."""
    from agdb.tracer.store.tracefile import save
    from agdb.tracer.views.joint import with_joint

    if args.torch:
        from .fx_torch import cmd_fx_torch

        return cmd_fx_torch(args)
    if args.partitions:
        return _fail("--partitions shows the graphs aot_function makes: use it with --torch")
    try:
        graph, trace = capture_script(args.script, args.python_op, record=args.output is not None)
    except FxError as e:
        return _fail(str(e))
    if args.json:
        print(json.dumps(report_json(graph), indent=2))
    else:
        print_report(graph)
    if args.output is not None:
        save(with_joint(trace, graph), args.output)
        sys.stderr.write(f"wrote {args.output}: {len(trace):,} events and the joint graph ({len(graph):,} nodes)\n")
    return 0


def load_pass(spec: str) -> Any:
    """The function named by `module:function` (a module importable from the current directory, or a .py file).

    Raises:
        FxError: a malformed spec, a module that cannot be imported, or no such function.
    """
    module_name, sep, fn_name = spec.rpartition(":")
    if not sep or not module_name or not fn_name:
        raise FxError(f"{spec!r}: name the pass as MODULE:FUNCTION (for example passes.py:drop_clones)")
    try:
        if module_name.endswith(".py"):
            scope = runpy.run_path(module_name)
            fn = scope.get(fn_name)
        else:
            sys.path.insert(0, os.getcwd())
            try:
                fn = getattr(importlib.import_module(module_name), fn_name, None)
            finally:
                sys.path.remove(os.getcwd())
    except Exception as e:  # noqa: BLE001 - the user's module
        raise FxError(f"cannot load {module_name}: {type(e).__name__}: {e}") from None
    if not callable(fn):
        raise FxError(f"{module_name} has no function {fn_name!r}")
    return fn


def cmd_check_pass(args: argparse.Namespace) -> int:
    """`agdb check-pass SCRIPT MODULE:FUNCTION`."""
    from agdb.tracer.fx.check_pass import check_pass

    try:
        fn = load_pass(args.pass_fn)
        graph, _ = capture_script(args.script)
        found = check_pass(graph, fn)
    except FxError as e:
        return _fail(str(e))
    except Exception as e:  # noqa: BLE001 - the pass is user code
        return _fail(f"the pass raised {type(e).__name__}: {e}")
    if args.json:
        print(json.dumps({"violations": [v.to_json() for v in found]}, indent=2))
    elif not found:
        print(f"{args.pass_fn}: no invariant broken")
    else:
        for v in found:
            print(f"[{v.kind}] {v.message}")
    return 1 if found else 0
