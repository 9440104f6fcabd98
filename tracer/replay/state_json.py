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
     "culprits": int,                                            # seq_nr increments so far
     "labels": {"<node>": str},                                  # only when asked for (see below)
     "omitted": {"<list>": int}}                                 # only when `limit` cut a list (see below)

Node ids index the trace's node table. A `name` is the node's name as the source recorded it
(`torch::autograd::AccumulateGrad`); `labels`, which `agdb show --json` always gives, names every node the object
mentions as agdb writes it for people (tracer/views/labels.py: `MulBackward0 seq 3`, `AccumulateGrad fc1.weight`).
Asked for one node, every list keeps only that node's entries; asked for at most `limit` entries per list, each list
keeps its first ones (`executed` its last ones, the most recent) and `omitted` says how many each lost. The whole
state is never built when only part is asked for: a 1M-node trace costs what its shown rows cost. Imports numpy
and the standard library only.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, Callable

import numpy as np

from agdb.tracer.store.schema import seq_decode

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


def state_to_json(trace: Any, state: Any, limit: int | None = None, node: int | None = None,
                  label: Callable[[int], str] | None = None) -> dict:
    """The `agdb.state/1` object for `state` of `trace`: every entry, or `node`'s only, at most `limit` per list;
    with `label` (a node's display name: tracer.views.labels.NodeLabels.label), the `labels` of its nodes."""
    omitted: dict[str, int] = {}

    def keep(name: str, items: Any, last: bool = False) -> Any:
        """The first (or last) `limit` items, counting the others in `omitted`."""
        if limit is None or len(items) <= limit:
            return items
        omitted[name] = omitted.get(name, 0) + len(items) - limit
        return items[len(items) - limit:] if last else items[:limit]

    def mine(nodes: np.ndarray) -> np.ndarray:
        return nodes if node is None else nodes[nodes == node]

    def seq(n: int) -> int:
        return seq_decode(int(trace.columns["node_seq"][n]))

    queues = [{"queue": q.name, "label": trace.queue_label(q.name), "tasks": [
        {"node": t.node, "name": t.name, "seq_nr": t.seq_nr, "priority": list(t.priority), "graph_task": t.graph_task}
        for t in keep("ready_queues", [t for t in q.tasks if node is None or t.node == node])]}
        for q in state.ready_queues]
    dep_nodes, dep_counts = _innermost([gt.dependency_arrays() for gt in state.graph_tasks], node)
    dep_nodes = keep("dependencies", dep_nodes)
    # not_ready: each waiting node with its row in all graph tasks' waiting nodes, to find its task's slots.
    tasks = state.graph_tasks
    sizes = [len(gt.waiting_nodes()) for gt in tasks]
    rows = np.arange(sum(sizes))
    owner = np.repeat(np.arange(len(tasks)), sizes)
    offsets = np.cumsum([0, *sizes])
    wait_nodes, wait_rows = _innermost([(gt.waiting_nodes(), rows[offsets[i]:offsets[i + 1]])
                                        for i, gt in enumerate(tasks)], node)
    wait_nodes = keep("not_ready", wait_nodes)
    executed = keep("executed", mine(state.executed.array()), last=True)
    data = {
        "schema": SCHEMA,
        "step": state.step,
        "num_steps": state.num_steps,
        "event": event_to_json(state.event),
        "ready_queues": queues,
        "dependencies": dict(zip(map(str, dep_nodes.tolist()), dep_counts[:len(dep_nodes)].tolist(), strict=True)),
        "not_ready": {str(n): list(tasks[owner[r]].filled_slots(n))
                      for n, r in zip(wait_nodes.tolist(), wait_rows[:len(wait_nodes)].tolist(), strict=True)},
        "executed": [{"node": n, "name": trace.node_name(n), "seq_nr": seq(n)} for n in executed.tolist()],
        "pruned": keep("pruned", [n for n in state.pruned if node is None or n == node]),
        "running": [{"thread": trace.threads[t][1], "node": n, "name": trace.node_name(n)} for t, n in state.running
                    if node is None or n == node],
        "graph_tasks": [{"graph_task": g.graph_task, "reentrant_depth": g.reentrant_depth,
                         "min_topo_nr": g.min_topo_nr,
                         "needed": keep("needed", [n for n in g.needed if node is None or n == node]),
                         "captured": keep("captured", [n for n in g.captured if node is None or n == node])}
                        for g in state.graph_tasks],
        "culprits": state.culprits,
    }
    if label is not None:
        data["labels"] = {str(n): label(n) for n in sorted(_mentioned(data))}
    if omitted:
        data["omitted"] = omitted
    return data


def _mentioned(data: dict) -> set[int]:
    """Every node an `agdb.state/1` object names."""
    nodes = {t["node"] for q in data["ready_queues"] for t in q["tasks"]}
    nodes.update(int(n) for n in (*data["dependencies"], *data["not_ready"]))
    nodes.update(e["node"] for e in (*data["executed"], *data["running"]))
    nodes.update(data["pruned"])
    for g in data["graph_tasks"]:
        nodes.update(g["needed"])
        nodes.update(g["captured"])
    event_node = data["event"].get("node")
    nodes.add(event_node if isinstance(event_node, int) else None)
    return {n for n in nodes if n is not None and n >= 0}


def _innermost(parts: list[tuple[np.ndarray, np.ndarray]], node: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(node, value) pairs of several graph tasks merged by node, the innermost (last) task winning, by node."""
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    nodes = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
    values = np.concatenate([p[1] for p in parts]).astype(np.int64, copy=False)
    if node is not None:
        mask = nodes == node
        nodes, values = nodes[mask], values[mask]
    if len(parts) == 1 and node is None:
        return nodes, values  # one graph task: already one entry per node, by node
    last = len(nodes) - 1 - np.unique(nodes[::-1], return_index=True)[1]
    return nodes[last], values[last]

