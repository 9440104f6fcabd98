"""`agdb`: record scripts, show traces, list seq_nr culprits, export pictures, open the TUI."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Sequence

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agdb.tracer.recording import culprits as culprits_mod
from agdb.tracer.replay.replay import Replay
from agdb.tracer.replay.rows import state_before
from agdb.tracer.replay.state_json import state_to_json
from agdb.tracer.store.printable import printable
from agdb.tracer.store.tracefile import TraceFormatError
from agdb.tracer.views.labels import NodeLabels, shown_name
from agdb.tracer.views.sentences import compile_time_lines, recording_notes

from . import fx_cli, ranks, torch_cli
from .commands import compiles, err, fail, load_trace, output_file, record_script, save_run
from .main_stack import ensure_big_stack
from .run_script import DEFAULT_SOURCE, ScriptSource
from .show import DEFAULT_LIMIT, StdoutConsole, print_step, short
from .signals import ScriptSignals, end_by


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agdb` command."""
    parser = _parser()
    is_command = argv is None  # the `agdb` process itself, not a call from Python (a test's)
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
    if is_command and _records_real_torch(args):
        note = ensure_big_stack()  # NOTE [the main thread's stack]; may execute agdb again
        if note:
            fail(note)
    with ScriptSignals() as signals:
        args.signals = signals
        status = _run(args)
        signum = -status if status < 0 else signals.held
    if signum:  # NOTE [signals and the script]: a signal ended the run; end as python killed by it would
        return end_by(signum) if is_command else 128 + signum
    return status


def _records_real_torch(args: argparse.Namespace) -> bool:
    """Whether the command runs a script on real PyTorch on this (the main) thread."""
    source = getattr(args, "source", None)
    if args.func is torch_cli.cmd_torch:
        return True
    if getattr(args, "command", "") == "fx" and getattr(args, "torch", False):
        return True  # the script runs on real torch on this thread: its graphs are freed there
    is_script = args.func is _cmd_record or (args.func is _cmd_culprits and not args.script.endswith(".agdb"))
    return is_script and getattr(source, "name", "") == "torch"


def _run(args: argparse.Namespace) -> int:
    """Run the command; a failure the user can cause is one line, and the status is negative for a signal."""
    try:
        return args.func(args)
    except BrokenPipeError:
        return _stdout_closed()
    except TraceFormatError as e:
        fail(str(e))
        return 1
    except OSError as e:
        fail(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e))
        return 1
    except KeyboardInterrupt:
        fail("interrupted")
        return -signal.SIGINT


def _stdout_closed() -> int:
    """The reader of our output went away (`agdb show --json | head`): stop quietly, as `cat` would.

    stdout is pointed at /dev/null so that Python's final flush does not complain again, and the status is
    the one a Unix tool killed by SIGPIPE reports (128 + 13).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 128 + 13


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agdb", description="Debug and visualise autograd execution.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    rec = sub.add_parser("record", help="run a script on agdb's engine and save what it did")
    rec.add_argument("script")
    rec.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    rec.add_argument("-o", "--output", default=None,
                     help="trace file to write (default: the script's name with .agdb, in the current directory)")
    _torch_flags(rec)
    rec.set_defaults(func=_cmd_record)
    show = sub.add_parser("show", help="print the engine's state at a step of a trace")
    show.add_argument("trace")
    show.add_argument("--step", type=int, default=None, help="step to show (default: the last)")
    show.add_argument("--json", action="store_true", help="print the agdb.state/1 JSON object (every row, unless "
                                                                 "--limit)")
    show.add_argument("--node", default=None, metavar="NODE",
                      help="the node inspector's lines and only this node's rows: its index, seq:N, or a name only "
                           "one node has")
    show.add_argument("--compile-time", action="store_true",
                      help="instead of the state, the backward calls torch.compile made while it traced (a torch "
                           "trace keeps them apart: no view shows or counts them as graph tasks)")
    rows = show.add_mutually_exclusive_group()
    rows.add_argument("--limit", type=int, default=None, metavar="N",
                      help=f"at most N rows per list (default {DEFAULT_LIMIT}; --json: all)")
    rows.add_argument("--all", action="store_true", help="every row of every list")
    show.set_defaults(func=_cmd_show)
    cul = sub.add_parser("culprits", help="which lines bumped the sequence number (records the script)")
    cul.add_argument("script", help="a script, or a saved .agdb trace")
    cul.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    cul.add_argument("--from", dest="start", type=int, default=None, help="from this seq_nr")
    cul.add_argument("--to", dest="stop", type=int, default=None, help="up to this seq_nr")
    cul.add_argument("--thread", default=None, metavar="THREAD",
                     help="only this thread's increments (each thread has its own counter): its name, such as "
                          "MainThread, or its row in the trace")
    _torch_flags(cul)
    cul.set_defaults(func=_cmd_culprits)
    exp = sub.add_parser("export", help="draw the graph of a trace at a step (DOT, SVG, PNG, PDF or JSON)",
                         description="Draw a trace's graph, labelled and styled by each node's state at a step. "
                                     "The output's suffix picks the format unless --format names one; .dot and "
                                     ".json need nothing, the others need Graphviz's dot program.")
    exp.add_argument("trace", help="a saved .agdb trace")
    exp.add_argument("-o", "--output", required=True, help="FILE.dot, .svg, .png, .pdf or .json")
    exp.add_argument("--format", dest="fmt", choices=("dot", "svg", "png", "pdf", "json"), default=None,
                     help="the format to write (default: the output's suffix); json is the graph model, schema "
                          "agdb.graph/1")
    exp.add_argument("--step", type=int, default=None, help="show the state after this step (default: the end)")
    exp.add_argument("--view", choices=("backward", "forward", "joint"), default="backward",
                     help="backward graph (default), forward ops, or the FX joint graph (a trace from `agdb fx -o`)")
    exp.add_argument("--focus", default=None, metavar="NODE",
                     help="draw only around this node: the number the TUI shows before it (its execution index "
                          "at --step), node:N (the trace's node N), seq:N, or a name only one node has")
    exp.add_argument("--radius", type=int, default=2, help="edges from the focus node to include (default 2)")
    exp.add_argument("--collapse", action="store_true",
                     help="fold repeated blocks (one box `× N`) and linear chains, and draw each shared leaf once")
    exp.add_argument("--force", action="store_true",
                     help="render even a picture too large to lay out quickly, and replace a read-only file")
    exp.set_defaults(func=_cmd_export)
    demo = sub.add_parser("demo", help="open the TUI on the built-in example")
    demo.add_argument("--print", action="store_true", help="print a summary instead of opening the TUI")
    demo.set_defaults(func=_cmd_demo)
    tui = sub.add_parser("tui", help="record a script and step through it in the TUI")
    tui.add_argument("script")
    tui.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    _torch_flags(tui)
    _export_flags(tui)
    tui.set_defaults(func=_cmd_tui)
    opener = sub.add_parser("open", help="step through a saved trace in the TUI")
    opener.add_argument("trace")
    opener.add_argument("--source", action="append", default=[], metavar="FILE",
                        help="a source file the culprit view may show, for a trace recorded before agdb stored "
                             "source lines in traces (repeatable)")
    _export_flags(opener)
    opener.set_defaults(func=_cmd_open)
    _serve_parser(sub)
    fx_cli.register(sub)  # fx, check-pass
    torch_cli.add_commands(sub)
    ranks.add_command(sub)  # agdb torch --nproc's rank traces
    return p


def _torch_flags(parser: argparse.ArgumentParser) -> None:
    """--as-torch, --real-torch and --torch: which source records the script (run_script.ScriptSource)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--as-torch", dest="source", action="store_const", const=ScriptSource(torch_import="engine"),
                       default=DEFAULT_SOURCE, help="let the script's `import torch` get agdb's engine (the default "
                                                    "when the script imports torch)")
    which.add_argument("--real-torch", dest="source", action="store_const", const=ScriptSource(torch_import="torch"),
                       help="let the script use real torch, unrecorded (--torch records it)")
    torch_cli.add_torch_flag(which)


def _export_flags(parser: argparse.ArgumentParser) -> None:
    """--export-dir and --no-export: where the TUI's export key may write (export.ExportRule)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--export-dir", default=None, metavar="DIR",
                       help="let the export key write only inside DIR (a relative name is taken inside it)")
    where.add_argument("--no-export", action="store_true", help="turn the export key off")


def _export_rule(args: argparse.Namespace):  # noqa: ANN202 - export.ExportRule, imported late (graphviz)
    """The rule --export-dir / --no-export ask for, or None (write anywhere)."""
    if args.export_dir is None and not args.no_export:
        return None
    from .export import ExportRule

    return ExportRule(directory=args.export_dir, is_off=args.no_export)


def _cmd_record(args: argparse.Namespace) -> int:
    if args.output is None:
        args.output = Path(args.script).stem + ".agdb"
    output = output_file(args.output)
    if output is None or not compiles(args.script):
        return 1
    run = record_script(args.script, args.script_args, args.source, args.signals,
                        on_os_exit=lambda run: save_run(run, output, args.output))
    return save_run(run, output, args.output)


def _cmd_show(args: argparse.Namespace) -> int:
    from .export import ExportError, resolve_focus

    trace = load_trace(args.trace)
    if args.compile_time:
        return _show_compile_time(trace, args.json)
    if len(trace) == 0:
        fail(f"{args.trace} holds no events")
        return 1
    step = len(trace) - 1 if args.step is None else args.step
    if not 0 <= step < len(trace):
        fail(f"--step {step} is outside 0..{len(trace) - 1}")
        return 1
    if args.limit is not None and args.limit < 0:
        fail("--limit must be 0 or more")
        return 1
    try:
        node = resolve_focus(trace, args.node, flag="--node") if args.node is not None else None
    except ExportError as e:
        fail(str(e))
        return 1
    limit = None if args.all else args.limit if args.limit is not None or args.json else DEFAULT_LIMIT
    with err.status(f"replaying to step {step:,}…"):
        replay = Replay(trace)
        state = replay.state_at(step)
        before = None if args.json else state_before(replay, state)
    if args.json:  # the names as recorded: JSON escapes control characters itself
        data = state_to_json(trace, state, limit=limit, node=node, label=NodeLabels(trace).label)
        print(json.dumps(data, indent=2))
        return 0
    # for_display: a trace's names may hold terminal escape sequences (print_step takes no markup either)
    print_step(trace.for_display(), state, before, StdoutConsole(), limit, node,
               "; ".join(recording_notes(trace.meta)))
    return 0


def _show_compile_time(trace, as_json: bool) -> int:
    """`agdb show --compile-time`: the compile-time backward calls a torch trace kept apart (docs/trace-format.md)."""
    if as_json:
        from agdb.tracer.store.meta import compile_time_calls

        count, entries = compile_time_calls(trace.meta)
        print(json.dumps({"count": count, "compile_time_calls": entries}, indent=2))
        return 0
    out = StdoutConsole()
    for line in compile_time_lines(trace.meta):  # names and paths made safe to show, as for_display makes them
        out.print(Text(printable(line)))
    return 0


def _cmd_culprits(args: argparse.Namespace) -> int:
    if args.script.endswith(".agdb"):
        return _print_culprits(load_trace(args.script), args)

    def os_exit(run) -> int:
        return _culprits_of_run(run, args)

    if not compiles(args.script):
        return 1
    return _culprits_of_run(record_script(args.script, args.script_args, args.source, args.signals,
                                          on_os_exit=os_exit), args)


def _culprits_of_run(run, args: argparse.Namespace) -> int:
    if run.note:
        return 1
    if len(run.trace) == 0 and run.error is not None:
        fail(f"the sequence number never moved: {NO_BUMP_FAILED}")
        return run.exit_status or 1
    status = _print_culprits(run.trace, args, failed=run.error is not None)
    return run.exit_status or status


def _print_culprits(trace, args: argparse.Namespace, failed: bool = False) -> int:
    """Print the table of increments asked for, or say why it is empty; 1 when --thread names no thread."""
    trace = trace.for_display()  # a trace's names and lines may hold terminal escape sequences
    every = culprits_mod.of_trace(trace)
    if args.thread is not None:
        rows_of = _thread_rows(trace, args.thread)
        if not rows_of:
            names = ", ".join(f"{row} ({name})" for row, name in trace.threads) or "none"
            fail(f"--thread {args.thread}: no such thread in the trace (its threads: {names})")
            return 1
        every = [c for c in every if c.thread in rows_of]
    rows = culprits_mod.select(every, args.start, args.stop)
    if not rows:
        fail(_why_no_culprits(every, args, failed))
        return 0
    table = Table(title="sequence-number increments", title_justify="left")
    out = StdoutConsole()
    widest = max(len(short(c.source)) for c in rows)
    cols, cells, room = _culprit_columns(rows, trace, out.width, widest)
    for col, width in cols:
        table.add_column(col, overflow="fold", no_wrap=col in ("seq_nr", "node"), min_width=width, max_width=width)
    # The source takes what the other columns leave, cut, never wrapped, so that it keeps standing above its
    # carets (both are cut alike).
    table.add_column("source", no_wrap=True, overflow="ellipsis", max_width=room, min_width=min(widest, room))
    for c, row in zip(rows, cells, strict=True):
        table.add_row(*(Text(row[col]) for col, _ in cols), _source_cell(c))  # Text: source is not markup
    out.print(table)
    return 0


CULPRIT_CAPS = {"seq_nr": 16, "node": 24, "module": 24, "thread": 12, "file:line": 24, "function": 16}
"""Widths the culprits table keeps for its small columns when the terminal is too narrow for their longest cells
(longer cells fold)."""
GIVE_WAY = (("function", 24), ("thread", 16))
"""The small columns that give way to the source, in this order, when it would be narrower than this (the thread
only when every row is on one thread)."""


def _culprit_columns(rows: list, trace, width: int, source: int) -> tuple[list[tuple[str, int]], list[dict], int]:
    """The small columns shown and the width each keeps (its longest cell, capped when the terminal is narrow, so
    that file:line is never squeezed out of sight), every row's cells, and the room left for the source (whose
    longest line is `source` wide)."""
    cells = [{"seq_nr": f"{c.old} → {c.new}", "node": shown_name(c.node_name),
              "thread": trace.threads[c.thread][1] if trace.threads else "",
              "file:line": f"{Path(c.filename).name}:{c.lineno}" if c.filename else "?", "function": c.function,
              "module": c.module}
             for c in rows]
    cells = [{k: short(v) for k, v in row.items()} for row in cells]
    # the module call that made each op (NOTE [module paths]), when any was made in one
    names = ["seq_nr", "node", *(["module"] if any(c.module for c in rows) else []), "thread", "file:line", "function"]
    widest = {n: max(len(n), *(len(row[n]) for row in cells)) for n in names}
    caps: dict[str, int] = {}  # none while everything fits
    # several threads: each counts on its own, so a row means nothing without its thread, which then stays
    give_way = [g for g in GIVE_WAY if g[0] != "thread" or len({c.thread for c in rows}) < 2]
    while True:
        cols = [(n, min(widest[n], caps.get(n, widest[n]))) for n in names]
        room = width - sum(w for _, w in cols) - 3 * (len(cols) + 1) - 1  # padding and rules
        if not give_way or room >= min(source, give_way[0][1]):
            return cols, cells, max(16, room)
        if not caps:
            caps = CULPRIT_CAPS
        else:
            names.remove(give_way.pop(0)[0])


def _source_cell(c) -> Text:
    """The culprit's line with, under it, `~` under the expression that ran and `^` under the op itself."""
    source = short(c.source)
    marks = c.carets() if source == c.source else ""
    text = Text(source + (f"\n{marks}" if marks else ""))
    if marks:  # the op's own part stands out too where the terminal has styles
        start, end = marks.index("^"), marks.rindex("^") + 1
        text.stylize("bold underline", start, end)
    return text


def _thread_rows(trace, which: str) -> set[int]:
    """The thread rows `--thread` names: a row number, or every thread of that name."""
    if which.isdigit() and int(which) < len(trace.threads):
        return {int(which)}
    return {row for row, name in trace.threads if name == which}


NO_BUMP_FAILED = "the script failed before any op made a backward node"


def _why_no_culprits(every: list, args: argparse.Namespace, failed: bool) -> str:
    """Why the table of increments is empty, in one line."""
    if not every:
        scope = f" on thread {args.thread}" if args.thread is not None else ""
        why = NO_BUMP_FAILED if failed else \
            "no op that records a backward node ran (no tensor requires grad, or grad mode was off)"
        return f"the sequence number never moved{scope}: {why}"
    low, high = min(c.old for c in every), max(c.new for c in every)
    span = " ".join(part for part in (f"--from {args.start}" if args.start is not None else "",
                                      f"--to {args.stop}" if args.stop is not None else "") if part)
    return f"no increment in {span}: the counter moved from {low} to {high}" + (
        " on that thread" if args.thread is not None else "")


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import ExportError, export, resolve_focus

    trace = load_trace(args.trace)
    if len(trace) == 0 and args.view != "joint":  # a joint graph saved alone (agdb fx --torch -o) has no events
        fail(f"{args.trace} holds no events")
        return 1
    try:
        state, order = _state_and_order(trace, args.step) if args.focus is not None else (None, None)
        focus = resolve_focus(trace, args.focus, order=order) if args.focus is not None else None
        with err.status(escape(f"drawing {args.output}…")):
            done = export(trace, args.output, step=args.step, view=args.view, focus=focus, radius=args.radius,
                          collapse=args.collapse, force=args.force, state=state, fmt=args.fmt)
    except ExportError as e:
        fail(str(e))
        return 1
    sys.stderr.write(f"wrote {done.path}: {done.num_boxes:,} boxes, {done.num_arrows:,} arrows\n")
    return 0


def _state_and_order(trace, step: int | None):
    """The state at `step` (the last by default) and each node's execution index there, as the TUI numbers them;
    (None, None) for a step outside the trace (export says why)."""
    from agdb.tracer.replay.node_states import node_states

    step = len(trace) - 1 if step is None else step
    if not 0 <= step < len(trace):
        return None, None
    state = Replay(trace).state_at(step)
    return state, node_states(trace, state)[1]


def _cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    if args.print:
        demo.main()
        return 0
    from .app import AgdbApp

    return _run_app(AgdbApp(trace=demo.record_example(), title="built-in example"))


def _cmd_tui(args: argparse.Namespace) -> int:
    from .app import AgdbApp

    if not compiles(args.script):
        return 1
    if args.source.name == "engine" and args.source.torch_import == "torch":
        # --real-torch: the script's torch is not recorded, so its run mostly records nothing; it runs here first,
        # so that this is said on the command line rather than in a full-screen TUI
        run = record_script(args.script, args.script_args, args.source, args.signals)
        if len(run.trace) == 0:
            if not run.note:
                fail(f"nothing was recorded: {args.script} ran no op of agdb's engine that needs a grad")
            return run.exit_status or 1
        return _run_app(AgdbApp(trace=run.trace, title=args.script, source_files=[args.script],
                                export_rule=_export_rule(args)))
    app = AgdbApp(script=args.script, script_args=args.script_args, source=args.source,
                  export_rule=_export_rule(args))
    app.is_closed_when_empty = True  # a run that records nothing is said on the command line (_run_app)
    return _run_app(app)


def _cmd_open(args: argparse.Namespace) -> int:
    from .app import AgdbApp

    # Loaded here, not in the TUI: a missing or bad file fails on the command line (main says why, exit 1)
    # before the TUI takes the screen.
    trace = load_trace(args.trace)
    return _run_app(AgdbApp(trace=trace, title=args.trace, source_files=args.source, export_rule=_export_rule(args)))


def _run_app(app) -> int:
    """Run the TUI; after it, say in one line why the trace could not be opened, and exit non-zero then (and
    when the app itself failed). SIGINT, SIGTERM and SIGHUP quit it with the terminal restored, and agdb then
    ends by the signal."""
    app.quit_on_signals()
    app.run()
    if app.stopped_by is not None:
        return -app.stopped_by  # main ends by it (NOTE [signals and the script])
    if app.failure:
        fail(app.failure)
        return 1
    return app.return_code or 0


def _serve_parser(sub) -> None:
    serve = sub.add_parser("serve", help="serve the TUI to a web browser (a trace or a script)",
                           description="Serve agdb's TUI over HTTP: each browser tab that opens the address gets "
                                       "its own agdb (`open TRACE`, or `tui SCRIPT`, which records the script "
                                       "again for each tab). Listens on localhost only unless --host says "
                                       "otherwise. The address it prints carries a random token, which the "
                                       "page needs: anyone with the address can use the TUI. The tabs write "
                                       "no files unless --export-dir says where.")
    serve.add_argument("target", metavar="TRACE|SCRIPT", help="a saved .agdb trace, or a script to record")
    serve.add_argument("script_args", nargs="*", help="arguments for the script (after `--` if they start with -)")
    serve.add_argument("--host", default="localhost", help="address to listen on (default: localhost)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    serve.add_argument("--max-sessions", type=int, default=4, metavar="N",
                       help="browser tabs served at once, each with its own agdb process (default: 4)")
    serve.add_argument("--export-dir", default=None, metavar="DIR",
                       help="let the tabs' export key write inside DIR (default: export is off)")
    _torch_flags(serve)
    serve.set_defaults(func=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from .serve import serve

    target = os.path.abspath(args.target)
    if not 0 < args.port < 65536:
        fail(f"--port {args.port} is not a port number (1..65535)")
        return 1
    if args.max_sessions < 1:
        fail(f"--max-sessions {args.max_sessions}: give at least 1")
        return 1
    if args.export_dir is not None and not os.path.isdir(args.export_dir):
        fail(f"--export-dir {args.export_dir}: not a directory")
        return 1
    # The tabs write nothing unless told where (anyone with the address drives them).
    exports = ["--export-dir", os.path.abspath(args.export_dir)] if args.export_dir is not None else ["--no-export"]
    if args.target.endswith(".agdb"):
        load_trace(args.target)  # a missing or bad file fails here (exit 1), not in every browser tab
        argv = ["open", target, *exports]
    else:
        if not compiles(args.target):
            return 1
        argv = ["tui", target, *args.source.flags(), *exports, "--", *args.script_args]
    return serve(argv, args.host, args.port, title=f"agdb · {Path(args.target).name}",
                 max_sessions=args.max_sessions)


if __name__ == "__main__":
    sys.exit(main())
