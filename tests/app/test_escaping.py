"""Text from a trace reaches the terminal escaped: node names, files, threads and source lines with terminal
escape sequences or direction overrides are shown as visible escapes, and nothing from a trace or a path is
read as Rich or Textual markup (`Weird[/]`, `[bold]`), in `agdb show`, `agdb culprits` and the TUI.
"""
from __future__ import annotations

import asyncio

import pytest

from agdb import engine, tracer
from agdb.app.app import AgdbApp
from agdb.app.cli import main
from agdb.tracer import TraceBuilder
from agdb.tracer.store.tracefile import save
from agdb.widgets.culprits import CulpritsView
from agdb.widgets.event_log import EventLog
from agdb.widgets.graph_view import GraphView
from tests.engine.helpers import run_in_thread

ESC = "\x1b]0;owned\x07\x1b[2J"  # retitle the window, clear the screen
EVIL_NAME = f"Mul{ESC}Backward0"
EVIL_FILE = f"/tmp/{ESC}model.py"
EVIL_THREAD = f"Main{ESC}"


def test_printable_escapes_controls_and_direction_overrides():
    """Control characters (C0, DEL, C1) and bidi overrides become \\xNN / \\uNNNN; other text is untouched, and
    with keep_newlines line breaks and tabs stay."""
    from agdb.tracer.store.printable import printable

    assert printable("MulBackward0 é ∑ 日本") == "MulBackward0 é ∑ 日本"
    assert printable("a\x1b[31mb\x7f\x9bc\u202ed") == "a\\x1b[31mb\\x7f\\x9bc\\u202ed"
    assert printable("one\ntwo\tthree\r") == "one\\x0atwo\\x09three\\x0d"
    assert printable("one\ntwo\tthree\x1b", keep_newlines=True) == "one\ntwo\tthree\\x1b"


def _weird_function_trace():
    """A backward through a custom Function whose class is named `Weird[/]` (its node: `Weird[/]Backward`)."""
    def forward(ctx, a):
        return a * 2

    def backward(ctx, g):
        return g * 2

    weird = type("Weird[/]", (engine.autograd.Function,), {"forward": staticmethod(forward),
                                                            "backward": staticmethod(backward)})

    def record():
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        with tracer.record() as rec:
            weird.apply(x).sum().backward()
        return rec.trace

    return run_in_thread(record)


def test_show_prints_a_markup_like_node_name_verbatim(tmp_path, capsys, monkeypatch):
    """`agdb show` on a trace with a node named `Weird[/]Backward` prints the name as it is (no MarkupError)."""
    monkeypatch.setenv("COLUMNS", "300")
    trace = _weird_function_trace()
    name = next(trace.node(i).name for i in range(trace.num_nodes) if trace.node(i).name.startswith("Weird"))
    assert "[/]" in name
    path = tmp_path / "weird.agdb"
    save(trace, path, durable=False)
    code = main(["show", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert name in out
    for step in range(len(trace)):
        assert main(["show", str(path), "--step", str(step)]) == 0
    capsys.readouterr()


def _evil_trace():
    """A trace whose node name, file, source line and thread name hold terminal escape sequences and markup."""
    b = TraceBuilder(source="test")
    main_thread = b.thread(EVIL_THREAD)
    frame = b.frame(EVIL_FILE, 7, f"fn{ESC}", source=f"y = x * w  # {ESC}[bold]not bold[/]")
    b.seq_nr_bumped(thread=main_thread, node=1, name=EVIL_NAME, old=0, seq_nr=1, frame=frame)
    b.node(2, name="torch::autograd::AccumulateGrad", seq_nr=2**64 - 1)
    b.node_created(thread=main_thread, node=1, name=EVIL_NAME, seq_nr=0, topological_nr=1, next_edges=[(2, 0)],
                   frame=frame)
    b.graph_task_started(thread=main_thread, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.dependencies_computed(thread=main_thread, graph_task=1, min_topo_nr=0, dependencies=[(1, 0), (2, 1)])
    cpu = b.queue(f"cpu:{main_thread}")
    b.task_pushed(thread=main_thread, graph_task=1, node=1, queue=cpu, seq_nr=0, queue_length=1)
    b.task_popped(thread=main_thread, graph_task=1, node=1, queue=cpu, queue_length=0)
    b.node_started(thread=main_thread, graph_task=1, node=1, inputs=[None])
    b.error_raised(thread=main_thread, graph_task=1, node=1, error_type="RuntimeError",
                   message=f"bad\n{ESC}[red]x[/]")
    b.graph_task_finished(thread=main_thread, graph_task=1, has_error=True)
    return b.finish()


@pytest.mark.parametrize("argv", [["culprits"], ["show"], ["show", "--step", "0"]])
def test_commands_print_no_raw_escape_sequence(argv, tmp_path, capsys, monkeypatch):
    """`agdb culprits` and `agdb show` on a trace full of escape sequences print none raw: each is `\\x1b`."""
    monkeypatch.setenv("COLUMNS", "400")
    path = tmp_path / "evil.agdb"
    save(_evil_trace(), path, durable=False)
    code = main([argv[0], str(path), *argv[1:]])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err
    if argv != ["show", "--step", "0"]:  # step 0 shows no name
        assert "\\x1b" in out
    if argv == ["culprits"]:
        assert "[bold]not bold[/]" in out  # markup-looking source is shown as it is


def test_show_json_keeps_the_names_as_recorded(tmp_path, capsys):
    """`agdb show --json` keeps the exact names: JSON itself escapes control characters."""
    import json

    path = tmp_path / "evil.agdb"
    save(_evil_trace(), path, durable=False)
    assert main(["show", str(path), "--json", "--step", "6"]) == 0
    out, _ = capsys.readouterr()
    assert "\x1b" not in out
    assert json.loads(out)["running"][0]["name"] == EVIL_NAME


async def _tui_rows(path, size=(120, 40)) -> tuple[list[str], str]:
    app = AgdbApp(path=str(path))
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        await pilot.press("G")
        await pilot.pause()
        rows = []
        for widget_type in (GraphView, EventLog):
            widget = screen.query_one(widget_type)
            rows += [widget.row_text(i).plain for i in range(widget.row_count())]
        await pilot.press("7")
        culprits = screen.query_one(CulpritsView)
        rows += [culprits.row_text(i).plain for i in range(culprits.row_count())]
        culprits.cursor = 0
        await pilot.press("enter")
        await pilot.pause()
        title = str(screen.query_one("#title").content)
    return rows, title


def test_the_tui_shows_escapes_and_takes_nothing_as_markup(tmp_path):
    """The TUI opens a trace full of escape sequences, from a path that looks like markup: every row and the
    title show `\\x1b` where the trace has ESC, and the brackets as they are."""
    folder = tmp_path / "run["
    folder.mkdir()
    path = folder / "]evil.agdb"  # the path holds `[/]`, a markup closing tag
    save(_evil_trace(), path, durable=False)
    rows, title = asyncio.run(_tui_rows(path))
    text = "\n".join(rows)
    assert "\x1b" not in text and "\x07" not in text
    assert EVIL_NAME.replace("\x1b", "\\x1b").replace("\x07", "\\x07") in text
    assert str(path) in title


def test_the_tui_failure_message_takes_no_markup(tmp_path):
    """A file that cannot be opened, at a path holding `[/]`: the TUI says so (no MarkupError) and fails."""
    folder = tmp_path / "run["
    folder.mkdir()
    path = folder / "]missing.agdb"

    async def go():
        app = AgdbApp(path=str(path))
        async with app.run_test(size=(100, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            status = str(app.query_one("#status").content)
        return status, app.failure

    status, failure = asyncio.run(go())
    assert str(path) in status and str(path) in failure
