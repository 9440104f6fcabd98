"""The 80×24 layout with long leaf names: F↔B keeps room for the source line, the ready queue's seq_nr column
stays in view, and the footer is not cut (ctrl+p is on screen)."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agdb.app.app import AgdbApp
from agdb.tracer.store import events as ev
from tests.app.pilot import opened

SCRIPT = Path(__file__).with_name("long_leaf_names.py")


@pytest.fixture(scope="module")
def trace():
    from agdb.app.run_script import run_recorded

    box = {}
    thread = threading.Thread(target=lambda: box.update(run=run_recorded(str(SCRIPT), [])), name="script")
    thread.start()
    thread.join()
    return box["run"].trace


def _lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_fb_shows_the_source_at_80_columns(trace):
    """At 80×24 each F↔B row of the model's forward shows its source line's first 16 characters or more, and
    the header names every column."""
    source = SCRIPT.read_text().splitlines()
    app = AgdbApp(trace=trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(app, pilot)
        await pilot.press("4")
        await pilot.pause()
        lines = _lines(app)
        assert any(all(w in line for w in ("seq_nr", "op", "backward node", "line", "source")) for line in lines), \
            "\n".join(lines)
        rows = [line for line in lines if "self.decoder_output_projection(" in line or "loss = model(" in line]
        wanted = [f"{n}: {source[n - 1].strip()[:16]}" for n in (14, 19)]
        for want in wanted:
            assert any(want in line for line in lines), want + "\n" + "\n".join(lines)
        assert rows


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_ready_queue_seq_nr_in_view(trace, size):
    """At 80×24 and 120×40, with the queue holding a long-named AccumulateGrad, the ready-queue panel shows its seq_nr
    column (`max` for an AccumulateGrad) on the task's row."""
    app = AgdbApp(trace=trace)
    async with app.run_test(size=size) as pilot:
        screen = await opened(app, pilot)
        names = {}
        for e in trace:
            if isinstance(e, ev.TaskPushed) and e.node is not None and "AccumulateGrad" in trace.node_name(e.node):
                names[e.step] = e.node
        screen.step = min(names)
        await pilot.press("2")
        await pilot.pause()
        lines = _lines(app)
        assert any("seq_nr" in line and "depth" in line for line in lines), "\n".join(lines)
        assert any("AccumulateGrad" in line and line.rstrip(" │▁▂▃▄▅▆▇█").endswith("max") for line in lines), \
            "\n".join(lines)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_footer_shows_every_hint_and_ctrl_p(trace, size):
    """The footer's key hints are whole (no `…`) and end with ctrl+p Palette, at 80×24 and 120×40."""
    app = AgdbApp(trace=trace)
    async with app.run_test(size=size) as pilot:
        await opened(app, pilot)
        footer = _lines(app)[-1]
        assert "…" not in footer and "ctrl+p" in footer, footer
