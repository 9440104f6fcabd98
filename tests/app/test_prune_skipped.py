"""The prune panel lists the nodes exec_info skipped (those the graph panel marks `skipped`), at every step of
the built-in example's `inputs=` backward, and `agdb show` prints the same rows."""
from __future__ import annotations

import numpy as np

from agdb.app.app import AgdbApp
from agdb.tracer.replay.node_states import STATE_CODE
from agdb.tracer.replay.replay import Replay
from agdb.tracer.replay.rows import pruning_rows
from agdb.widgets.graph_view import GraphView
from agdb.widgets.pruning import PruningView
from tests.app.pilot import opened


def _exec_info_steps(trace):
    replay = Replay(trace)
    return [step for step in range(len(trace))
            if any(gt.needed or gt.captured for gt in replay.state_at(step).graph_tasks)]


def test_pruning_rows_hold_the_skipped_nodes(demo_trace):
    """At each step where a graph task has exec_info, pruning_rows' skipped nodes are exactly the nodes whose
    state (tracer.replay.node_states) is `skipped`."""
    from agdb.tracer.replay.node_states import NodeStates

    steps = _exec_info_steps(demo_trace)
    assert steps
    replay, states = Replay(demo_trace), NodeStates(demo_trace)
    filled = states.filled()
    for step in steps[:: max(len(steps) // 8, 1)]:
        state = replay.state_at(step)
        states.fill(state, filled)
        skipped = set(np.flatnonzero(filled.codes == STATE_CODE["skipped"]).tolist())
        listed = {n for section in pruning_rows(demo_trace, state) for n in section.skipped}
        assert listed == skipped and skipped, step


async def test_prune_panel_lists_the_skipped_nodes(demo_trace):
    """In the TUI, at a step of the `inputs=` backward, the prune panel has a `skipped` row for each node the
    graph panel shows skipped."""
    step = _exec_info_steps(demo_trace)[0]
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(app, pilot)
        screen.step = step
        await pilot.press("6")
        await pilot.pause()
        graph = screen.query_one("#graph", GraphView)
        skipped = set(np.flatnonzero(graph.codes == STATE_CODE["skipped"]).tolist())
        panel = screen.query_one(PruningView)
        rows = {panel.node_at_row(i) for i in range(panel.row_count())
                if panel.row_text(i).plain.lstrip().startswith("skipped")}
        assert skipped and rows == skipped
