"""`agdb fx` and `agdb check-pass`: capture the joint graph of what a script marks, print it, check a pass.

A script marks its target with a module-level `agdb_fx`: a pair `(function_or_module, args)`, or a function
of no arguments returning that pair (docs/fx.md). The script runs on agdb's engine (`import torch` gets it);
with `--torch`, on real PyTorch (app/fx_torch.py); what both share is in app/fx_common.py.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
from typing import Any

from .commands import fail
from .fx_common import HOW_TO_MARK, FxError, marked, print_report, report_json


def register(sub: Any) -> None:
    """Add the `fx` and `check-pass` subcommands to agdb's subparsers."""
    fx = sub.add_parser("fx", help="FX graphs: a script's own torch.compile graphs (--torch), or what it marks",
                        description="With --torch: run SCRIPT unchanged on real PyTorch and show every graph its own "
                                    "torch.compile calls make (joint, forward, backward, nested subgraphs) with "
                                    "torch's seq_nr, partitioner_tag, is_gradient_acc and custom meta, the "
                                    "forward-to-backward map and its anomalies. Without it: run SCRIPT on agdb's "
                                    "engine and capture the joint graph of its `agdb_fx` target (a script compiling "
                                    "nothing may mark one for --torch too). " + HOW_TO_MARK[0].upper()
                                    + HOW_TO_MARK[1:] + ". `agdb fx diff A B` compares the metadata of two "
                                    "captures (outputs of --json, or traces saved with -o); exit status 1 if they "
                                    "differ.")
    fx.add_argument("script")
    fx.add_argument("script_args", nargs="*", help="with --torch, arguments for the script (after `--` if they "
                    "start with -)")
    fx.add_argument("--json", action="store_true", help="print the graphs, map and anomalies as JSON (with --torch: "
                    "agdb.fx-report/2, docs/fx-graphs.schema.json)")
    fx.add_argument("--python-op", action="store_true",
                    help="show custom autograd.Functions as PythonOp/PythonOpGrad nodes (default: traced through; with "
                         "--torch, grouped from the script's compiled graphs by call site)")
    fx.add_argument("-o", "--output", default=None, metavar="FILE.agdb",
                    help="also save a trace with the joint graph (the engine's; with --torch, the bridge's trace of "
                         "the script's run with its first compile's joint graph and subgraphs, or of one eager run of "
                         "a marked target): draw it with agdb export --view joint, open it with agdb open (key 9)")
    fx.add_argument("--torch", action="store_true",
                    help="run SCRIPT unchanged on real PyTorch and show every graph its own torch.compile calls make, "
                         "meta as torch set it; a script that compiles nothing but marks a target: torch's AOTAutograd "
                         "graphs of that target")
    fx.add_argument("--torch-frames", action="store_true",
                    help="with --torch, note the Python frames (inside torch too: a decomposition, DTensor, a "
                         "higher-order op) in flight when each sequence number was taken while torch traced, and "
                         "name them for each anomaly")
    fx.add_argument("--partitions", action="store_true",
                    help="with --torch, also print the forward and backward graphs (of each compile, or of "
                         "aot_function for a marked target)")
    fx.set_defaults(func=cmd_fx)
    cp = sub.add_parser("check-pass", help="run a graph pass on a script's joint graphs and check its invariants",
                        description="Run the pass MODULE:FUNCTION on a copy of each joint graph and name each node "
                                    "where it made meta['val'] stale, added a mutation (other than a trailing copy_ "
                                    "epilogue), made an output share storage with an input or another output, or "
                                    "lost seq_nr, partitioner_tag or custom on a node it replaced. Only what the "
                                    "pass changed counts: a pass that changes nothing is clean. Without --torch: "
                                    "the joint graph of SCRIPT's marked target on agdb's engine (" + HOW_TO_MARK
                                    + "). With --torch: SCRIPT runs unchanged on real PyTorch, and the pass runs "
                                    "on the joint graph (aten ops) of each of its own torch.compile compiles, "
                                    "checked on torch's fake tensors; a script that compiles nothing is checked on "
                                    "its marked target's joint graph from torch. Exits 1 if any violation, or if a "
                                    "graph cannot be checked (a nested region's invoke_subgraph).")
    cp.add_argument("script")
    cp.add_argument("pass_fn", metavar="MODULE:FUNCTION",
                    help="the pass: an importable module or a .py file, and a function taking the graph (agdb's "
                         "plain Graph; with --torch its targets are aten ops such as aten.mul.Tensor)")
    cp.add_argument("script_args", nargs="*", help="with --torch, arguments for the script (after `--` if they "
                    "start with -)")
    cp.add_argument("--torch", action="store_true",
                    help="run SCRIPT on real PyTorch and check the joint graphs of its own compiled run")
    cp.add_argument("--json", action="store_true", help="print the violations as JSON (with --torch, each with its "
                    "graph)")
    cp.set_defaults(func=cmd_check_pass)


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


def cmd_fx(args: argparse.Namespace) -> int:
    """`agdb fx SCRIPT`."""
    from agdb.tracer.store.tracefile import save
    from agdb.tracer.views.joint import with_joint

    if args.script == "diff" and not os.path.isfile("diff"):
        from .fx_diff import cmd_fx_diff

        return cmd_fx_diff(list(args.script_args), args.json)
    if args.torch:
        from .fx_torch import cmd_fx_torch

        return cmd_fx_torch(args)
    if args.partitions:
        return fail("--partitions shows the graphs aot_function makes: use it with --torch")
    try:
        graph, trace = capture_script(args.script, args.python_op, record=args.output is not None)
    except FxError as e:
        return fail(str(e))
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
    """`agdb check-pass [--torch] SCRIPT MODULE:FUNCTION [ARGS...]`."""
    from agdb.tracer.fx.check_pass import check_pass

    if args.script_args and not args.torch:
        return fail("script arguments are passed to a script run on real PyTorch: use them with --torch")
    if args.torch:
        from .fx_torch import cmd_check_pass_torch

        try:
            fn = load_pass(args.pass_fn)
        except FxError as e:
            return fail(str(e))
        return cmd_check_pass_torch(args, fn)
    try:
        fn = load_pass(args.pass_fn)
        graph, _ = capture_script(args.script)
        found = check_pass(graph, fn)
    except FxError as e:
        return fail(str(e))
    except Exception as e:  # noqa: BLE001 - the pass is user code
        return fail(f"the pass raised {type(e).__name__}: {e}")
    if args.json:
        print(json.dumps({"violations": [v.to_json() for v in found]}, indent=2))
    elif not found:
        print(f"{args.pass_fn}: no invariant broken")
    else:
        for v in found:
            print(f"[{v.kind}] {v.message}")
    return 1 if found else 0
