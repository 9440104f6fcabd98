"""The JSON form of an EngineState, as `agdb show --json` prints it. Schema `agdb.state/1`:

    {"schema": "agdb.state/1", "step": int, "num_steps": int,
     "event": {"kind": "TaskPopped", ...the event's fields...},
     "ready_queues": [{"queue": str, "label": str, "tasks": [{"node": int|null, "name": str, "seq_nr": int,
                                                "priority": [depth, seq_nr], "graph_task": int}]}],
     "dependencies": {"<node>": remaining count},
     "not_ready": {"<node>": [filled, ...] one bool per input slot},
     "executed": [{"node": int, "name": str, "seq_nr": int}],   # execution order, all graph tasks so far
     "pruned": [int, ...],                                       # not expanded: topological_nr < min_topo_nr
     "running": [{"thread": str, "node": int, "name": str}],
     "graph_tasks": [{"graph_task": int, "reentrant_depth": int, "min_topo_nr": int,
                      "needed": [int, ...], "captured": [int, ...]}],
     "culprits": int}                                            # seq_nr increments so far

Node ids index the trace's node table. Imports the standard library only.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

SCHEMA = "agdb.state/1"
"""Bumped when a field changes meaning or disappears; new fields may be added within a version."""


def _plain(value: Any) -> Any:
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def event_to_json(event: Any) -> dict:
    """An event as a JSON object with its kind."""
    return {"kind": type(event).__name__, **_plain(event)}


def state_to_json(trace: Any, state: Any) -> dict:
    """The `agdb.state/1` object for `state` of `trace`."""
    def seq(node: int) -> int:
        return trace.node(node).seq_nr

    return {
        "schema": SCHEMA,
        "step": state.step,
        "num_steps": state.num_steps,
        "event": event_to_json(state.event),
        "ready_queues": [{"queue": q.name, "label": trace.queue_label(q.name), "tasks": [
            {"node": t.node, "name": t.name, "seq_nr": t.seq_nr, "priority": list(t.priority),
             "graph_task": t.graph_task} for t in q.tasks]} for q in state.ready_queues],
        "dependencies": {str(n): c for n, c in state.dependencies.items()},
        "not_ready": {str(n): list(slots) for n, slots in state.not_ready.items()},
        "executed": [{"node": n, "name": trace.node_name(n), "seq_nr": seq(n)} for n in state.executed],
        "pruned": list(state.pruned),
        "running": [{"thread": trace.threads[t][1], "node": n, "name": trace.node_name(n)} for t, n in state.running],
        "graph_tasks": [{"graph_task": g.graph_task, "reentrant_depth": g.reentrant_depth,
                         "min_topo_nr": g.min_topo_nr, "needed": list(g.needed), "captured": list(g.captured)}
                        for g in state.graph_tasks],
        "culprits": state.culprits,
    }
