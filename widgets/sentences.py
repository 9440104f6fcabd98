"""One sentence per event, for the status line: `ExpBackward0 took seq_nr 0 (counter 0 → 1) at line 44`."""
from __future__ import annotations

from typing import Callable

from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import short_name

from .labels import seq_text


def _name(event, label: Callable[[int], str] | None) -> str:
    node = getattr(event, "node", None)
    if label is not None and node is not None and node >= 0:
        return label(node)
    name = getattr(event, "node_name", "") or getattr(event, "name", "")
    return short_name(name) if name else "a wake-up task"


def _priority(priority: tuple[int, int]) -> str:
    depth, seq = priority
    return f"depth {depth}, seq_nr {seq_text(seq)}"


def _task(event) -> str:
    return f"graph task {event.graph_task}"


def sentence(event: ev.Event, queue_label: Callable[[str], str] = str,
             label: Callable[[int], str] | None = None) -> str:
    """What happened at this event, said as a sentence (names, seq_nrs and lines as the panels show them).

    `label` names a node told apart from others of its name (NodeLabels.label); without it, its bare name.
    """
    name = _name(event, label)
    if isinstance(event, ev.SeqNrBumped):
        name = _name(event, None)  # its seq_nr is the sentence itself
        return f"{name} took seq_nr {event.old} (counter {event.old} → {event.seq_nr}){_at_line(event.lineno)}"
    if isinstance(event, ev.NodeCreated):
        name = _name(event, None)
        return f"{name} was made (seq_nr {seq_text(event.seq_nr)}, topo {event.topological_nr}){_at_line(event.lineno)}"
    if isinstance(event, ev.GraphTaskStarted):
        nested = f", reentrant depth {event.reentrant_depth}" if event.reentrant_depth else ""
        return f"{_task(event)} started from {len(event.roots)} root(s){nested}"
    if isinstance(event, ev.DependenciesComputed):
        pruned = f", pruned {len(event.pruned)} (topo < {event.min_topo_nr})" if event.pruned else ""
        return f"{_task(event)} counted the dependencies of {len(event.dependencies)} node(s){pruned}"
    if isinstance(event, ev.ExecInfoComputed):
        return f"{_task(event)} needs {len(event.needed)} node(s) and captures {len(event.captured)} grad(s)"
    if isinstance(event, ev.TaskPushed):
        return (f"{name} pushed to ready queue {queue_label(event.queue)} with priority {_priority(event.priority)}; "
                f"{event.queue_length} in the queue")
    if isinstance(event, ev.TaskPopped):
        stale = " (stale: its graph task is gone)" if event.stale else ""
        return f"{name} popped from ready queue {queue_label(event.queue)}{stale}"
    if isinstance(event, ev.BufferWritten):
        how = "summed into" if event.is_accumulation else "written to"
        return f"a grad was {how} slot {event.slot} of {name}'s input buffer"
    if isinstance(event, ev.HookRan):
        return f"{event.hook_kind} hook {event.hook_name} ran on {name}"
    if isinstance(event, ev.NodeStarted):
        return f"{name} started running ({len(event.inputs)} grad(s) in)"
    if isinstance(event, ev.NodeFinished):
        return f"{name} finished ({len(event.outputs)} grad(s) out)"
    if isinstance(event, ev.GradCaptured):
        return f"the grad into {name} was captured as result {event.output_index}"
    if isinstance(event, ev.GradAccumulated):
        return f"{name} accumulated its grad into the leaf's .grad"
    if isinstance(event, ev.ErrorRaised):
        where = f"{name} raised" if event.node is not None else "the backward raised"
        return f"{where} {event.error_type}: {event.message}"
    if isinstance(event, ev.GraphTaskFinished):
        return f"{_task(event)} finished" + (" with an error" if event.has_error else "")
    return type(event).__name__


def _at_line(lineno: int) -> str:
    """` at line N`, or nothing for a node no line is known for (0: an AccumulateGrad a bridge's walk met)."""
    return f" at line {lineno}" if lineno > 0 else ""
