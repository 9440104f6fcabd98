"""The status line's plots: in a wide terminal (150 columns and more) it ends with the ready queues' length and
the seq_nrs taken as sparklines, the current step's character marked; at 80 columns the sentence keeps the line."""
from __future__ import annotations

from agdb.app.app import AgdbApp
from agdb.tracer.views.sparkline import bucket_of, queue_lengths, seq_nr_taken, sparkline
from agdb.widgets.timeline import PLOT_WIDTH, Timeline
from tests.app.pilot import opened


async def test_plots_at_160_columns(demo_trace):
    """At 160×40 and step 28 the status line shows `queue` and `seq_nr` sparklines of the whole trace."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = 28
        await pilot.pause()
        timeline = screen.query_one(Timeline)
        line = timeline.render_line(0).text
        assert line.startswith("step 28/192 · ")
        queue = sparkline(queue_lengths(demo_trace), PLOT_WIDTH)
        seq = sparkline(seq_nr_taken(demo_trace), PLOT_WIDTH)
        assert f"queue {queue}" in line and f"seq_nr {seq}" in line, line
        here = bucket_of(28, len(demo_trace), PLOT_WIDTH)
        assert here == 2
        start = line.index("queue ") + len("queue ")
        cells = timeline.render_line(0)
        marked = [seg.text for seg in cells if seg.style and seg.style.reverse]
        assert marked == [queue[here], seq[here]], (marked, start)


async def test_no_plots_at_80_columns(demo_trace):
    """At 80×24 the status line is the sentence alone."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(app, pilot)
        screen.step = 28
        await pilot.pause()
        line = screen.query_one(Timeline).render_line(0).text
        assert "queue" not in line.split("·")[0] and "seq_nr ▁" not in line and "ready queue cpu" in line
