"""The thread column of the culprits and forward↔backward panels: shown, narrow, when a trace's increments come
from more than one thread (a bridge recording of worker threads), hidden when they come from one."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from agdb.app.app import AgdbApp
from agdb.tracer import TraceBuilder
from agdb.tracer.views.labels import THREAD_WIDTH, thread_labels
from agdb.widgets.culprits import CulpritsView
from agdb.widgets.forward_backward import ForwardBackwardView
from tests.app.pilot import opened


def _two_workers():
    """A bridge trace of two worker threads, each making its own graph and calling backward."""
    torch = pytest.importorskip("torch")
    from agdb import tracer

    def work(scale):
        x = torch.ones(2, requires_grad=True)
        (x * scale).exp().sum().backward()

    with tracer.record("torch") as rec:
        for i, name in enumerate(["worker-0", "ThreadPoolExecutor-0_1"]):
            t = threading.Thread(target=work, args=(i + 2,), name=name)
            t.start()
            t.join()
    return rec.trace


def test_thread_labels_are_short_distinct_and_absent_for_one_thread():
    """Long names keep their distinguishing end within THREAD_WIDTH; one thread gets no labels; two threads of one
    name are told apart by their rows."""
    b = TraceBuilder(source="engine")
    rows = [b.thread(n) for n in ("MainThread", "ThreadPoolExecutor-0_0", "ThreadPoolExecutor-0_1", "w", "w")]
    trace = b.finish()
    labels = thread_labels(trace, np.array(rows))
    assert labels[0] == "MainThread"
    assert labels[1] != labels[2] and labels[1].endswith("0_0") and len(labels[1]) <= THREAD_WIDTH
    assert labels[3] != labels[4]
    assert thread_labels(trace, np.array([2, 2])) == {}


async def test_culprits_and_forward_backward_panels_show_each_row_s_thread():
    """At 80x24 both panels put each row's thread beside it: the culprits' threads are the trace's own; F↔B drops
    its `other thread` flag, which the column makes redundant."""
    trace = _two_workers()
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        screen.step = len(trace) - 1
        await pilot.press("7")
        await pilot.pause()
        view = screen.query_one(CulpritsView)
        assert "thread" in view.header()
        rows = [view.row_text(i).plain for i in range(view.row_count())]
        named = [trace.threads[c.thread][1] for c in view.culprits]
        assert named == ["worker-0"] * 3 + ["ThreadPoolExecutor-0_1"] * 3
        short = thread_labels(trace, np.array([c.thread for c in view.culprits]))
        for row, c in zip(rows, view.culprits, strict=True):
            assert short[c.thread] in row and f"{c.lineno}: {c.source}" in row
        fwd = screen.query_one(ForwardBackwardView)
        assert "thread" in fwd.header()
        for i in range(len(fwd.forward_map)):
            op = fwd.forward_map.op(i)
            if op.op != "leaf":
                assert short[op.thread] in fwd.row_text(i).plain
            assert "other thread" not in fwd.row_text(i).plain  # the column says it: the flag's room goes to source


async def test_one_thread_keeps_the_panels_as_they_were(demo_trace):
    """A trace made on one thread has no thread column in either panel."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        assert "thread" not in screen.query_one(CulpritsView).header()
        assert "thread" not in screen.query_one(ForwardBackwardView).header()


async def test_tui_torch_records_the_workers_of_a_script():
    """`agdb tui --torch docs/examples/threads.py`: the script runs on the TUI's own thread for it, and each worker
    it starts gets its culprits, with its thread, in the culprits panel."""
    pytest.importorskip("torch")
    from pathlib import Path

    from agdb.app.run_script import ScriptSource
    from tests.app.pilot import recorded

    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "threads.py"
    app = AgdbApp(script=str(example), source=ScriptSource("torch"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await recorded(app, pilot)
        view = screen.query_one(CulpritsView)
        trace = screen.trace
        rows = [(trace.threads[c.thread][1], c.old, c.node_name, c.lineno) for c in view.culprits]
        made = [("MulBackward0", 10), ("TanhBackward0", 10), ("MulBackward0", 11), ("SumBackward0", 11)]
        assert rows == [(w, i, *m) for w in ("worker-0", "worker-1") for i, m in enumerate(made)]
        assert "thread" in view.header()
