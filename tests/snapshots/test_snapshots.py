"""Snapshots of the main screen at three steps of the demo, at 120x40 and 80x24, and of the help screen.

The demo is recorded on a fresh thread named `demo`, so its seq_nrs, thread names and queue labels are the
same in every process; nothing on screen shows a clock, a path or an address. Refresh with
`pytest tests/snapshots --snapshot-update` and read the SVG diff before committing.
"""
from __future__ import annotations

import threading

import pytest

from agdb.app.app import AgdbApp
from agdb.app.demo import record_example
from agdb.tracer.store.events import DependenciesComputed, GraphTaskStarted, TaskPushed
from agdb.widgets.culprits import CulpritsView

_TRACE = record_example()


def _tie_step() -> int:
    """The first push that leaves two tasks in a ready queue (the diamond's branches)."""
    return next(e.step for e in _TRACE if isinstance(e, TaskPushed) and e.queue_length >= 2)


def _pruning_step() -> int:
    """compute_dependencies of the `inputs=` backward, which prunes by topological_nr."""
    return next(e.step for e in _TRACE if isinstance(e, DependenciesComputed) and e.pruned)


def _reentrant_step() -> int:
    """A few events into the reentrant backward run by the custom Function's backward."""
    return next(e.step for e in _TRACE if isinstance(e, GraphTaskStarted) and e.reentrant_depth > 0) + 6


STEPS = {"tie": _tie_step, "pruning": _pruning_step, "reentrant": _reentrant_step}


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
@pytest.mark.parametrize("moment", list(STEPS))
def test_main_screen(snap_compare, moment, size):
    """The main screen at a telling step of the demo looks as pinned."""
    step = STEPS[moment]()

    async def go_to_step(pilot) -> None:
        await pilot.pause()
        pilot.app.screen.step = step
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=_TRACE, title="built-in example"), run_before=go_to_step,
                        terminal_size=size)


def test_help_screen(snap_compare):
    """The help screen lists every key."""
    assert snap_compare(AgdbApp(trace=_TRACE, title="built-in example"), press=["question_mark"],
                        terminal_size=(120, 40))


def _three_ops_trace():
    """tests/snapshots/three_ops.py recorded on a fresh thread named `script` (its counter starts at 0)."""
    from pathlib import Path

    from agdb.app.run_script import run_recorded

    box = {}
    thread = threading.Thread(target=lambda: box.update(run=run_recorded(
        str(Path(__file__).with_name("three_ops.py")), [])), name="script")
    thread.start()
    thread.join()
    return box["run"].trace


def test_culprit_source_to_the_column(snap_compare):
    """The source view of SumBackward0's culprit underlines `(y.sin() * w).sum()` and reverses `.sum()`."""
    trace = _three_ops_trace()

    async def open_sum_culprit(pilot) -> None:
        await pilot.pause()
        screen = pilot.app.screen
        screen.step = len(trace) - 1
        await pilot.press("7")
        view = screen.query_one(CulpritsView)
        view.cursor = next(i for i, c in enumerate(view.culprits) if c.node_name == "SumBackward0")
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=trace, title="three ops"), run_before=open_sum_culprit,
                        terminal_size=(120, 40))


def test_legend(snap_compare):
    """The help screen's legend: every node state in the graph panel's colours, and the marks panels use."""
    async def open_legend(pilot) -> None:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        pilot.app.screen.query_one("#legend").scroll_end(animate=False)
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=_TRACE, title="built-in example"), run_before=open_legend,
                        terminal_size=(100, 30))


def _leaf_names_trace():
    """tests/snapshots/leaf_names.py recorded on a fresh thread named `script`."""
    from pathlib import Path

    from agdb.app.run_script import run_recorded

    box = {}
    thread = threading.Thread(target=lambda: box.update(run=run_recorded(
        str(Path(__file__).with_name("leaf_names.py")), [])), name="script")
    thread.start()
    thread.join()
    return box["run"].trace


def test_accumulategrads_named_by_their_leaves(snap_compare):
    """Right after compute_dependencies, the dependencies panel (zoomed) names every AccumulateGrad by its leaf:
    model.fc1.weight … model.fc2.bias, b, `w (layer1)` and `w (layer2)`, and `leaf 8` for the unnamed one."""
    trace = _leaf_names_trace()
    step = next(e.step for e in trace if isinstance(e, DependenciesComputed))

    async def zoom_deps(pilot) -> None:
        await pilot.pause()
        pilot.app.screen.step = step
        await pilot.press("3", "z")
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=trace, title="leaf names"), run_before=zoom_deps, terminal_size=(100, 30))


def _threads_trace():
    """docs/examples/threads.py recorded on agdb's engine: two workers, each numbering its own nodes from 0."""
    from pathlib import Path

    from agdb.app.run_script import run_recorded

    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "threads.py"
    return run_in_script_thread(lambda: run_recorded(str(example), [], capture_output=True)).trace


def run_in_script_thread(fn):
    """`fn()` on a fresh thread named `script` (what the recording names the thread that ran the script)."""
    box = {}
    thread = threading.Thread(target=lambda: box.update(run=fn()), name="script")
    thread.start()
    thread.join()
    return box["run"]


@pytest.mark.parametrize("panel", ["4", "7"], ids=["forward-backward", "culprits"])
def test_thread_column_at_80x24(snap_compare, panel):
    """At 80x24 the F↔B and culprits panels of a two-worker trace give each row its thread, in a narrow column."""
    trace = _threads_trace()

    async def open_panel(pilot) -> None:
        await pilot.pause()
        pilot.app.screen.step = len(trace) - 1
        await pilot.press(panel)
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=trace, title="threads"), run_before=open_panel, terminal_size=(80, 24))
