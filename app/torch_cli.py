"""The bridge's commands: `agdb torch SCRIPT [-o TRACE]`, the `--torch` flag of record/culprits/tui, and `agdb diff`.

Kept apart from cli.py, which only calls `add_commands` and `add_torch_flag`; both build on commands.py. Never
imports torch: the bridge does, when a script runs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agdb.tracer.sources import torch as torch_source
from agdb.tracer.views.sentences import compile_time_not_shown

from .commands import compiles, fail, load_trace, output_file, record_script, save_run
from .run_script import ScriptSource

TORCH = ScriptSource("torch")
"""What `--torch` chooses: real torch, recorded by the bridge."""


class _NeedsTorch(argparse.Action):
    """`--torch`: refuses at once, saying how to install torch, when it is missing."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if not torch_source.available():
            parser.error(f"{option_string} runs real PyTorch, which is not installed. {torch_source.INSTALL_HINT}")
        setattr(namespace, self.dest, TORCH)


def add_torch_flag(group: Any) -> None:
    """`--torch` beside --as-torch and --real-torch."""
    group.add_argument("--torch", dest="source", action=_NeedsTorch, nargs=0,
                       help="run the script on real PyTorch and record it with agdb's bridge (docs/torch-bridge.md)")


def add_commands(sub: Any) -> None:
    """The `torch` and `diff` subcommands."""
    tor = sub.add_parser("torch", help="run a script on real PyTorch and record it (the bridge)",
                         description="Run SCRIPT on real PyTorch 2.13 and record its autograd into a trace: seq_nr "
                                     "culprits, the graph, every backward call, and agdb's model of the engine for "
                                     "what torch does not show (docs/torch-bridge.md).")
    tor.add_argument("script")
    tor.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    tor.add_argument("-o", "--output", default=None,
                     help="trace file to write (default: the script's name with .agdb, in the current directory, "
                          "as `agdb record --torch` names it)")
    tor.add_argument("--single-threaded", action="store_true",
                     help="run backward calls with autograd multithreading disabled, so that torch's own execution "
                          "order of each is recorded as a second witness (it changes nothing on the CPU)")
    tor.add_argument("--nproc", type=_positive, metavar="N",
                     help="run the script on N processes through torch.distributed.run (as torchrun --standalone; "
                          "the script calls init_process_group itself) and write one trace per rank: "
                          "OUTPUT.rank0.agdb, OUTPUT.rank1.agdb, ... (agdb ranks compares them)")
    tor.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                     help="with --nproc: stop the ranks after SECONDS (none by default), save their traces and say "
                          "where each was stuck, as Ctrl-C does; for a run that hangs (ranks blocked in a collective)")
    tor.add_argument("--fx", action="store_true",
                     help="also keep the graphs the script's own torch.compile calls make, as `agdb fx --torch -o` "
                          "does: each CompiledFunctionBackward node then names its compile's graphs and the TUI "
                          "opens them (AOTAutograd's and Inductor's caches are off meanwhile: docs/fx.md)")
    tor.set_defaults(func=cmd_torch)
    dif = sub.add_parser("diff", help="compare two traces: node names, seq_nrs, culprit lines, edges, execution "
                                      "order",
                         description="Line two traces up by thread and, as a diff tool does, by node name and "
                                     "source text, and show the first difference in node names, seq_nr "
                                     "assignment, culprit lines, graph edges and execution order (lines that only "
                                     "moved are not one). Exit status 0 when they agree, 1 when they differ.")
    dif.add_argument("a", metavar="A", help="a saved .agdb trace")
    dif.add_argument("b", metavar="B", help="another")
    shown = dif.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the agdb.diff/1 JSON object")
    shown.add_argument("--tui", action="store_true", help="show the two traces side by side, differences marked")
    dif.set_defaults(func=_cmd_diff)


def cmd_torch(args: argparse.Namespace) -> int:
    """`agdb torch SCRIPT -o TRACE`."""
    if not torch_source.available():
        fail(f"agdb torch runs real PyTorch, which is not installed. {torch_source.INSTALL_HINT}")
        return 1
    if args.output is None:
        args.output = Path(args.script).stem + ".agdb"
    output = output_file(args.output)
    if output is None or not compiles(args.script):  # a typo is said once, before torch is imported
        return 1
    if args.nproc:
        from .launch import launch

        return launch(args.script, args.script_args, output, args.nproc, args.single_threaded, args.timeout)
    source = ScriptSource("torch", single_threaded=args.single_threaded)
    if getattr(args, "fx", False):
        run = _record_with_graphs(args, output, source)
        if run is None:
            return 1
    else:
        run = record_script(args.script, args.script_args, source, args.signals,
                            on_os_exit=lambda run: save_run(run, output, args.output))
    status = save_run(run, output, args.output)
    if run.trace.meta.get("compiled_autograd"):
        fail("the script turned on compiled autograd (torch._dynamo.config.compiled_autograd): its backward runs "
             "inside compiled graphs, not in autograd's engine, so no backward call of it is recorded; turn it off "
             "to record the backward (agdb fx --torch shows the compiled graphs)")
    hidden = compile_time_not_shown(run.trace.meta, args.output)
    if hidden:
        sys.stderr.write(f"agdb: {_printable(hidden)}\n")
    witness = torch_source.witness_text(run.trace)
    if witness:
        sys.stderr.write(f"agdb: {witness}\n")
    diverged = torch_source.divergence_text(run.trace)
    if diverged:
        sys.stderr.write("agdb: agdb's model of the engine, torch's witnesses and the observed order disagree "
                         "(docs/torch-bridge.md):\n"
                         + "".join(f"  {_printable(line)}\n" for line in diverged.split("\n")))
    return status


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a number of processes (1 or more)")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds (more than 0)")
    return value


def _record_with_graphs(args: argparse.Namespace, output: Any, source: ScriptSource) -> Any:
    """`agdb torch --fx`: the script recorded while the FX capture keeps every graph its compiles make
    (tracer/sources/torch/fx_run.py), the trace saved with them (app/fx_torch.py's with_graphs); None when this
    torch has no place to take the graphs from (said in one line)."""
    from agdb.tracer.sources.torch.fx import TorchFxError
    from agdb.tracer.sources.torch.fx_run import capture_run

    from .fx_common import FxError
    from .fx_torch import graphs_text, with_graphs

    said: list[str] = []

    def with_them(run: Any) -> Any:
        if len(found) and not said:
            try:
                run.trace = with_graphs(found, run.trace, args.output)
                said.append(f"agdb: kept {graphs_text(found)}")
            except FxError:  # compiles without a backward: no joint graph, and no CompiledFunctionBackward node
                said.append("agdb: no compile had a backward, so no graph is kept with the trace")
        return run

    try:
        with capture_run() as found:
            run = record_script(args.script, args.script_args, source, args.signals,
                                on_os_exit=lambda run: save_run(with_them(run), output, args.output))
    except TorchFxError as e:
        fail(str(e))
        return None
    run = with_them(run)
    for line in said:
        sys.stderr.write(_printable(line) + "\n")
    return run


def _cmd_diff(args: argparse.Namespace) -> int:
    from agdb.tracer.replay.diff import ASPECTS, compare, side_of, to_json
    from agdb.tracer.views.labels import NodeLabels

    traces = [load_trace(path) for path in (args.a, args.b)]
    a, b = (side_of(t, path, NodeLabels(t)) for t, path in zip(traces, (args.a, args.b), strict=True))
    comparison = compare(a, b)
    aspects, equal = comparison.aspects, comparison.equal
    if args.json:
        print(json.dumps(to_json(a, b, aspects), indent=2))
        return 0 if equal else 1
    if args.tui:
        from .diff_app import DiffApp

        DiffApp(a, b, comparison).run()
        return 0 if equal else 1
    out = sys.stdout
    out.write(f"A: {_printable(args.a)} ({a.source}, {len(traces[0]):,} events)\n")
    out.write(f"B: {_printable(args.b)} ({b.source}, {len(traces[1]):,} events)\n")
    width = max(len(name) for name in ASPECTS) + 1
    for x in aspects:
        mark = "=" if x.equal else "≠"
        out.write(f"{mark} {x.name + ':':<{width}} {_printable(x.summary)}\n")
        if not x.equal and x.first:
            for side in ("a", "b"):
                item = x.first.get(side)
                if isinstance(item, dict) and item.get("source"):
                    out.write(f"    {side.upper()}: {_printable(item['line'])}  {_printable(item['source'])}\n")
            culprit = x.first.get("culprit")
            if isinstance(culprit, dict) and culprit.get("source"):
                out.write(f"    {_printable(culprit['line'])}  {_printable(culprit['source'])}\n")
    if equal and comparison.line_shift:  # an edit that moved lines only: not a difference, but worth a word
        out.write(f"the traces agree: the same graph, B's line numbers {comparison.line_shift}\n")
    else:
        out.write("the traces agree\n" if equal else "the traces differ\n")
    return 0 if equal else 1


def _printable(text: str) -> str:
    """No terminal escape sequences from a trace's names and lines reach the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))
