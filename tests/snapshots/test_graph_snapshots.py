"""Snapshots of the drawn graph panel at 120x40 and 80x24: a diamond while one branch runs and the other waits in
the ready queue, and a 100-step loop folded into a `× 100` box while its nodes run.

Both traces are recorded on a fresh thread (tests/graph_programs.py), so their seq_nrs are the same in every
process. Refresh with `pytest tests/snapshots --snapshot-update` and read the SVG before committing.
"""
from __future__ import annotations

import pytest

from agdb.app.app import AgdbApp
from agdb.tracer.store.events import NodeStarted
from tests import graph_programs

_DIAMOND = graph_programs.diamond()
_LOOP = graph_programs.loop(100)


def _start_of(trace, name: str, nth: int = 0) -> int:
    return [e.step for e in trace if isinstance(e, NodeStarted) and e.node_name == name][nth]


CASES = {
    "diamond": (_DIAMOND, lambda: _start_of(_DIAMOND, "CosBackward0")),  # Cos runs, Sin is ready
    "folded": (_LOOP, lambda: _start_of(_LOOP, "TanhBackward0", 40)),  # inside the × 100 box
}


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
@pytest.mark.parametrize("case", list(CASES))
def test_drawn_graph(snap_compare, case, size):
    """The graph panel draws the graph at a step mid-backward: boxes by state, ▶ running, ready marked."""
    trace, step_of = CASES[case]
    step = step_of()

    async def go_to_step(pilot) -> None:
        await pilot.pause()
        pilot.app.screen.step = step
        await pilot.pause()

    assert snap_compare(AgdbApp(trace=trace, title=f"{case} example"), run_before=go_to_step, terminal_size=size)
