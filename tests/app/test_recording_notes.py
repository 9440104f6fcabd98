"""A trace that says something of its own recording (a signal cut it short, it began mid-backward) says it first,
in `agdb show` and in the TUI's title; the loader refuses a `partial` that is not a signal's name."""
from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Static

from agdb import engine, tracer
from agdb.app.app import AgdbApp
from agdb.app.cli import main
from agdb.tracer.store.tracefile import TraceFormatError, load, save
from tests.app.pilot import opened


def _trace(**meta):
    with tracer.record() as rec:
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
    trace = rec.trace
    trace.meta.update(meta)
    return trace


def test_show_says_first_that_a_signal_cut_the_recording_short(tmp_path, capsys):
    path = tmp_path / "cut.agdb"
    save(_trace(partial="SIGTERM"), path, durable=False)
    assert main(["show", str(path)]) == 0
    words = capsys.readouterr().out.split()  # the console wraps a long line: compare the words
    assert " ".join(words[words.index("note:"):]).startswith(
        "note: the recording was cut short by SIGTERM: the script did not run to its end ready queue")


def test_show_says_what_a_recording_begun_mid_backward_left_out(tmp_path, capsys):
    path = tmp_path / "late.agdb"
    save(_trace(omitted={"graph_tasks": 1, "events": 7}), path, durable=False)
    assert main(["show", str(path)]) == 0
    words = capsys.readouterr().out.split()  # the console wraps a long line: compare the words
    assert " ".join(words[words.index("note:"):]).startswith(
        "note: the recording began while 1 graph task(s) ran; their 7 events after that are left out ready queue")


def test_a_whole_recording_has_no_note(tmp_path, capsys):
    path = tmp_path / "whole.agdb"
    save(_trace(), path, durable=False)
    assert main(["show", str(path)]) == 0
    assert "note:" not in capsys.readouterr().out.split()


def test_the_tui_title_says_the_recording_was_cut_short(tmp_path):
    path = tmp_path / "cut.agdb"
    save(_trace(partial="SIGINT"), path, durable=False)

    async def title() -> str:
        app = AgdbApp(path=str(path))
        async with app.run_test(size=(160, 40)) as pilot:
            await app.workers.wait_for_complete()
            screen = await opened(app, pilot)
            return str(screen.query_one("#title", Static).render())

    assert "events (cut short by SIGINT) ·" in asyncio.run(title())


@pytest.mark.parametrize("bad", [1, ["SIGINT"], None, "", "SIGX\x1b[2J", "[red]SIGINT[/red]", "SIGINT" + "A" * 5000])
def test_a_partial_that_is_not_a_signals_name_is_refused_on_load(tmp_path, bad):
    """Views print `partial` as it is: anything but a signal's name (markup, escapes, a flood) is refused."""
    path = tmp_path / "bad.agdb"
    save(_trace(partial=bad), path, durable=False)
    with pytest.raises(TraceFormatError, match="meta.partial is not a signal's name"):
        load(path)
