"""Snapshot of the joint-graph panel: forward │ backward, the cursor on `sin` with its backward nodes lit.

Captured on a fresh thread, so the seq_nrs start at 0 in every process; nothing on screen shows a path.
"""
from __future__ import annotations

import threading

from agdb import engine as torch
from agdb import tracer
from agdb.app.app import AgdbApp
from agdb.tracer.fx import capture_joint
from agdb.tracer.views.joint import with_joint


def _joint_trace():
    out = {}

    def run():
        torch.manual_seed(0)
        x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
        with tracer.record() as rec:
            g = capture_joint(lambda x, w: ((x * w).sin() + x * w).sum(), x, w)
        out["trace"] = with_joint(rec.trace, g)

    t = threading.Thread(target=run, name="demo")
    t.start()
    t.join()
    return out["trace"]


def test_joint_panel(snap_compare):
    """The joint panel zoomed at 120x40 with the cursor on `sin`: its backward nodes cos and mul_4 lit, the
    grad-acc rows (x and w are each used twice) marked Σ."""
    async def open_joint(pilot) -> None:
        await pilot.pause()
        await pilot.press("9")
        await pilot.press("z")
        await pilot.press("down")
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=_joint_trace(), title="joint"), run_before=open_joint, terminal_size=(120, 40))
