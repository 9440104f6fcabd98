"""`agdb show --step N` prints the rows the TUI's panels show at step N (tracer/replay/rows.py): the ready queues,
the dependencies and input buffers (with the counts that changed at the step), and the pruning; on the demo
trace (app/demo.py, the program in app/demo_program.py), at steps where each panel has something to say."""
from __future__ import annotations

import pytest

from agdb.app.app import AgdbApp
from agdb.app.cli import main
from agdb.app.demo import record_example
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.tracefile import save
from agdb.widgets.dependencies import DependenciesView
from agdb.widgets.pruning import PruningView
from agdb.widgets.ready_queue import ReadyQueueView
from tests.app.pilot import opened
from tests.app.show_text import table

TRACE = record_example()
_REPLAY = Replay(TRACE)


def _first(condition) -> int:
    return next(s for s in range(1, len(TRACE)) if condition(_REPLAY.state_at(s), _REPLAY.state_at(s - 1)))


STEPS = {
    "two queued": _first(lambda s, b: sum(len(q.tasks) for q in s.ready_queues) >= 2),
    "a count drops": _first(lambda s, b: isinstance(s.event, ev.NodeFinished) and s.graph_tasks
                            and any(b.dependencies.get(n, c) != c for n, c in s.dependencies.items())),
    "about to push": _first(lambda s, b: isinstance(s.event, ev.BufferWritten)),
    "pruning": _first(lambda s, b: any(gt.pruned for gt in s.graph_tasks)),
    "reentrant": _first(lambda s, b: len(s.graph_tasks) == 2),
    "the end": len(TRACE) - 1,
}


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows") / "demo.agdb"
    save(TRACE, path)
    return path


def _words(text: str) -> str:
    return " ".join(text.split())


def _show(demo_file, step: int, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "2000")
    capsys.readouterr()
    assert main(["show", str(demo_file), "--step", str(step), "--all"]) == 0
    return capsys.readouterr().out


def _show_pruning(out: str) -> list[str]:
    lines = out.splitlines()
    if "pruning:" not in lines:
        return []
    start = lines.index("pruning:") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("  "))
    return [_words(line) for line in lines[start:end]]


@pytest.mark.parametrize("moment", list(STEPS))
async def test_show_prints_the_rows_the_panels_show(demo_file, capsys, monkeypatch, moment):
    """At the step, show's queue tables, dependencies table and pruning lines hold the queues, dependencies and
    pruning panels' rows: the same names, numbers, buffers and changed marks, in the same order."""
    step = STEPS[moment]
    out = _show(demo_file, step, capsys, monkeypatch)
    app = AgdbApp(trace=TRACE)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await opened(app, pilot)
        screen.step = step
        await pilot.pause()
        queues = screen.query_one(ReadyQueueView)
        tui_queues, titles = [], []
        for i in range(queues.row_count()):
            text = queues.row_text(i).plain
            if queues.node_at_row(i) is not None or text.startswith("  ") and text[5:7] == "  ":
                w = queues.name_width
                depth, seq = text[7 + w:].split()
                tui_queues.append([text[2:5].strip(), text[7:7 + w].rstrip(), depth, seq])
            elif not text.startswith(" ") and "task(s)" in text:
                titles.append(text)
        deps = screen.query_one(DependenciesView)
        tui_deps = []
        if len(deps.model):
            for i in range(deps.row_count()):
                text = deps.row_text(i).plain
                name, rest = text[:deps.name_width].rstrip(), text[deps.name_width:].split()
                tui_deps.append([name, rest[0], rest[1] if len(rest) > 1 else "", "yes" if deps.is_changed(i) else ""])
        pruning = screen.query_one(PruningView)
        tui_pruning = [_words(pruning.row_text(i).plain) for i in range(pruning.row_count())]
    show_queues = [row[:4] for title in titles for row in table(out, f"ready queue {title}")]
    assert all(f"ready queue {title}" in out.splitlines() for title in titles)
    assert show_queues == tui_queues
    assert [row[:4] for row in table(out, "dependencies and input buffers:")] == tui_deps
    assert _show_pruning(out) == tui_pruning
    if moment == "two queued":
        assert len(tui_queues) >= 2
    if moment in ("a count drops", "about to push", "reentrant"):
        assert tui_deps
    if moment == "a count drops":
        assert any(row[3] == "yes" for row in tui_deps)
    if moment == "pruning":
        assert any(line.startswith("pruned ") for line in tui_pruning)
