"""`agdb`: record scripts, show traces, list seq_nr culprits, export pictures, open the TUI."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tracer import culprits as culprits_mod
from tracer.replay import Replay
from tracer.state_json import state_to_json
from tracer.tracefile import TraceFormatError, load, save

err = Console(stderr=True, highlight=False)


def _fail(message: str) -> None:
    """One plain line on stderr: no markup (paths may hold brackets), no wrapping."""
    sys.stderr.write(f"agdb: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agdb` command."""
    parser = _parser()
    # agdb's options may sit before or after SCRIPT; what agdb does not know goes to the script, and so
    # does everything after the first `--`, untouched.
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    args, extra = parser.parse_known_args(argv)
    if extra or passthrough:
        if not hasattr(args, "script_args"):
            parser.error(f"unrecognized arguments: {' '.join(extra + passthrough)}")
        args.script_args = list(args.script_args) + extra + passthrough
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except TraceFormatError as e:
        _fail(str(e))
        return 1
    except OSError as e:
        _fail(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e))
        return 1
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agdb", description="Debug and visualise autograd execution.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    rec = sub.add_parser("record", help="run a script on agdb's engine and save what it did")
    rec.add_argument("script")
    rec.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    rec.add_argument("-o", "--output", required=True, help="trace file to write (.agdb)")
    _torch_flags(rec)
    rec.set_defaults(func=_cmd_record)
    show = sub.add_parser("show", help="print the engine's state at a step of a trace")
    show.add_argument("trace")
    show.add_argument("--step", type=int, default=None, help="step to show (default: the last)")
    show.add_argument("--json", action="store_true", help="print the agdb.state/1 JSON object")
    show.set_defaults(func=_cmd_show)
    cul = sub.add_parser("culprits", help="which lines bumped the sequence number (records the script)")
    cul.add_argument("script", help="a script, or a saved .agdb trace")
    cul.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    cul.add_argument("--from", dest="start", type=int, default=None, help="from this seq_nr")
    cul.add_argument("--to", dest="stop", type=int, default=None, help="up to this seq_nr")
    _torch_flags(cul)
    cul.set_defaults(func=_cmd_culprits)
    exp = sub.add_parser("export", help="draw the graph of a trace at a step (DOT, SVG, PNG or PDF)",
                         description="Draw a trace's graph, labelled and styled by each node's state at a step. "
                                     "The output's suffix picks the format; .dot needs nothing, the others "
                                     "need Graphviz's dot program.")
    exp.add_argument("trace", help="a saved .agdb trace")
    exp.add_argument("-o", "--output", required=True, help="FILE.dot, .svg, .png or .pdf")
    exp.add_argument("--step", type=int, default=None, help="show the state after this step (default: the end)")
    exp.add_argument("--view", choices=("backward", "forward", "joint"), default="backward",
                     help="backward graph (default), forward ops, or both (needs FX graphs: not yet)")
    exp.add_argument("--focus", default=None, metavar="NODE",
                     help="draw only around this node: its index, seq:N, or a name only one node has")
    exp.add_argument("--radius", type=int, default=2, help="edges from the focus node to include (default 2)")
    exp.add_argument("--collapse", action="store_true", help="fold linear chains into summary boxes")
    exp.add_argument("--force", action="store_true", help="render even a picture too large to lay out quickly")
    exp.set_defaults(func=_cmd_export)
    demo = sub.add_parser("demo", help="open the TUI on the built-in example")
    demo.add_argument("--print", action="store_true", help="print a summary instead of opening the TUI")
    demo.set_defaults(func=_cmd_demo)
    tui = sub.add_parser("tui", help="record a script and step through it in the TUI")
    tui.add_argument("script")
    tui.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    _torch_flags(tui)
    tui.set_defaults(func=_cmd_tui)
    opener = sub.add_parser("open", help="step through a saved trace in the TUI")
    opener.add_argument("trace")
    opener.add_argument("--source", action="append", default=[], metavar="FILE",
                        help="a source file the culprit view may show, for a trace recorded before agdb stored "
                             "source lines in traces (repeatable)")
    opener.set_defaults(func=_cmd_open)
    return p


def _torch_flags(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--as-torch", dest="as_torch", action="store_const", const=True, default=None,
                       help="let the script's `import torch` get agdb's engine (the default when the script "
                            "imports torch)")
    which.add_argument("--real-torch", dest="as_torch", action="store_const", const=False,
                       help="let the script use real torch (agdb cannot record its autograd yet)")


def _record(script: str, script_args: list[str], as_torch: bool | None):
    from .run_script import run_recorded

    with err.status("recording…") as status:
        run = run_recorded(script, script_args, as_torch,
                           on_progress=lambda n: status.update(f"recording… {n:,} events"))
    if run.error is not None:
        sys.stderr.write(f"agdb: the script raised (the trace up to that point is kept):\n{run.error_text}")
        if not run.error_text.endswith("\n"):
            sys.stderr.write("\n")
    if run.note:
        _fail(run.note)
    return run


def _cmd_record(args: argparse.Namespace) -> int:
    run = _record(args.script, args.script_args, args.as_torch)
    if run.note:
        return 1  # nothing recorded, and said why: no empty file
    with err.status(f"saving {len(run.trace):,} events…"):
        save(run.trace, args.output)
    sys.stderr.write(f"wrote {args.output}: {len(run.trace):,} events, {run.trace.num_nodes:,} nodes\n")
    return 1 if run.error is not None else 0


def _load(path: str):
    with err.status(escape(f"loading {path}…")):
        return load(path)


def _cmd_show(args: argparse.Namespace) -> int:
    trace = _load(args.trace)
    if len(trace) == 0:
        _fail(f"{args.trace} holds no events")
        return 1
    step = len(trace) - 1 if args.step is None else args.step
    if not 0 <= step < len(trace):
        _fail(f"--step {step} is outside 0..{len(trace) - 1}")
        return 1
    state = Replay(trace).state_at(step)
    if args.json:  # the names as recorded: JSON escapes control characters itself
        print(json.dumps(state_to_json(trace, state), indent=2))
        return 0
    _print_state(state_to_json(trace.for_display(), state))
    return 0


def _print_state(data: dict) -> None:
    """Print a state (from a trace made for_display); names are never markup (a node may be called `Weird[/]`)."""
    out = Console()
    event = data["event"]
    out.print(f"[bold]step {data['step']}[/] of {data['num_steps'] - 1}: [cyan]{event['kind']}[/]")
    for q in data["ready_queues"]:
        table = Table(title=Text(f"ready queue {q['label']}"), title_justify="left")
        for col in ("pop", "node", "name", "priority (depth, seq_nr)"):
            table.add_column(col)
        for i, t in enumerate(q["tasks"]):
            table.add_row(str(i), str(t["node"]), Text(t["name"]), str(tuple(t["priority"])))
        out.print(table)
    if data["dependencies"]:
        out.print("dependencies: " + ", ".join(f"{n}={c}" for n, c in data["dependencies"].items()))
    executed = " → ".join(e["name"] for e in data["executed"]) if data["executed"] else "-"
    out.print(Text(f"executed: {executed}"))
    out.print(Text(f"pruned: {data['pruned']}  running: {[r['name'] for r in data['running']]}  "
                   f"culprits so far: {data['culprits']}"))


def _cmd_culprits(args: argparse.Namespace) -> int:
    if args.script.endswith(".agdb"):
        trace, failed = _load(args.script), False
    else:
        run = _record(args.script, args.script_args, args.as_torch)
        trace, failed = run.trace, run.error is not None or bool(run.note)
    trace = trace.for_display()  # a trace's names and lines may hold terminal escape sequences
    rows = culprits_mod.select(culprits_mod.of_trace(trace), args.start, args.stop)
    table = Table(title="sequence-number increments", title_justify="left")
    for col in ("seq_nr", "node", "thread", "file:line", "function", "source"):
        table.add_column(col, overflow="fold")
    for c in rows:
        cells = (f"{c.old} → {c.new}", c.node_name, trace.threads[c.thread][1] if trace.threads else "",
                 f"{Path(c.filename).name}:{c.lineno}" if c.filename else "?", c.function, c.source)
        table.add_row(*(Text(cell) for cell in cells))  # Text: source lines are not markup
    Console().print(table)
    return 1 if failed else 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import ExportError, export, resolve_focus

    trace = _load(args.trace)
    if len(trace) == 0:
        _fail(f"{args.trace} holds no events")
        return 1
    try:
        focus = resolve_focus(trace, args.focus) if args.focus is not None else None
        with err.status(escape(f"drawing {args.output}…")):
            done = export(trace, args.output, step=args.step, view=args.view, focus=focus, radius=args.radius,
                          collapse=args.collapse, force=args.force)
    except ExportError as e:
        _fail(str(e))
        return 1
    sys.stderr.write(f"wrote {done.path}: {done.num_boxes:,} boxes, {done.num_arrows:,} arrows\n")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    if args.print:
        demo.main()
        return 0
    from .app import AgdbApp

    AgdbApp(trace=demo.record_example(), title="built-in example").run()
    return 0


def _cmd_tui(args: argparse.Namespace) -> int:
    from .app import AgdbApp

    return _run_app(AgdbApp(script=args.script, script_args=args.script_args, as_torch=args.as_torch))


def _cmd_open(args: argparse.Namespace) -> int:
    from .app import AgdbApp

    return _run_app(AgdbApp(path=args.trace, source_files=args.source))


def _run_app(app) -> int:
    """Run the TUI; after it, say in one line why the trace could not be opened, and exit non-zero then (and
    when the app itself failed)."""
    app.run()
    if app.failure:
        _fail(app.failure)
        return 1
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main())
