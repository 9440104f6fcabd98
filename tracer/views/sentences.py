"""One sentence per event, for the TUI's status line and `agdb show`: `ExpBackward0 took seq_nr 0 (counter 0 → 1) at
line 44`, `MulBackward0 seq 3 popped from ready queue cpu (MainThread)`. Nodes are named by views/labels.py.

Imports the tracer only; no UI.
"""
from __future__ import annotations

from agdb.tracer.store import events as ev
from agdb.tracer.store.meta import compile_time_calls
from agdb.tracer.views.labels import NodeLabels, Width, priority_text, seq_text, shown_name


def _name(event, labels: NodeLabels, width: Width = "list") -> str:
    node = getattr(event, "node", None)
    if node is not None and node >= 0:
        return labels.label(node, width)
    name = getattr(event, "node_name", "") or getattr(event, "name", "")
    return shown_name(name) if name else labels.task(None)


def _task(event) -> str:
    return f"graph task {event.graph_task}"


def sentence(event: ev.Event, labels: NodeLabels) -> str:
    """What happened at this event, said as a sentence (names, seq_nrs and lines as the panels show them);
    `labels` are the trace's (the sentence names its nodes and queues)."""
    queue_label = labels.trace.queue_label
    name = _name(event, labels)
    if isinstance(event, ev.SeqNrBumped):
        name = _name(event, labels, "column")  # its seq_nr is the sentence itself
        return f"{name} took seq_nr {event.old} (counter {event.old} → {event.seq_nr}){_at_line(event.lineno)}"
    if isinstance(event, ev.NodeCreated):
        name = _name(event, labels, "column")
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
        return (f"{name} pushed to ready queue {queue_label(event.queue)} with priority "
                f"{priority_text(event.priority)}; {event.queue_length} in the queue")
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


def recording_notes(meta: dict) -> list[str]:
    """What a trace says of its own recording, for the reader first: a recording that began mid-backward
    (`meta.omitted`) or that a signal cut short (`meta.partial`); docs/trace-format.md §1."""
    notes = []
    omitted = meta.get("omitted")
    if isinstance(omitted, dict):
        notes.append(f"the recording began while {omitted.get('graph_tasks', '?')} graph task(s) ran; their "
                     f"{omitted.get('events', '?')} events after that are left out")
    if isinstance(meta.get("partial"), str):
        notes.append(f"the recording was cut short by {meta['partial']}: the script did not run to its end")
    hidden = compile_time_not_shown(meta)
    if hidden:
        notes.append(hidden)
    return notes


def compile_time_not_shown(meta: dict, path: str = "") -> str:
    """What a bridge trace leaves out of every view by default: the backward calls torch.compile made while it
    traced (`meta.compile_time_calls`), or "" when there were none; `path` is the trace's file, for the command."""
    count, _ = compile_time_calls(meta)
    if not count:
        return ""
    calls = "call" if count == 1 else "calls"
    command = f"agdb show --compile-time {path}" if path else "agdb show --compile-time"
    return f"{count} compile-time backward {calls} not shown (torch.compile's own: {command})"


def compile_time_lines(meta: dict) -> list[str]:
    """`agdb show --compile-time`: one line per backward call torch.compile made while it traced, in order (which
    compile, backward or autograd.grad, its roots and inputs), after a line that says what they are."""
    count, entries = compile_time_calls(meta)
    if not count:
        return ["no compile-time backward calls: torch.compile traced no backward while this trace was recorded"]
    lines = [f"{count} compile-time backward call{'s' if count != 1 else ''}: made by torch.compile while it traced "
             "(AOTAutograd on fake tensors), not the program's; no view counts them as graph tasks"]
    if not entries:
        lines.append("  (this trace kept only their count)")
    for i, e in enumerate(entries, 1):
        where = f" ({e['function']} in {e['file']}:{e['line']})" if e.get("function") and e.get("file") else ""
        ident = f"compile {e['compile_id']}" if e.get("compile_id") else "a compile outside Dynamo"
        what = "autograd.grad" if e["kind"] == "grad" else "backward"
        lines.append(f"  {i}. {ident}{where}: {what} from {_listed(e['roots'], e['num_roots'], 'root')}"
                     + (f" to {_listed(e['inputs'], e['num_inputs'], 'input')}" if e["num_inputs"] else ""))
    return lines


def _listed(names: list[str], count: int, noun: str) -> str:
    shown = ", ".join(shown_name(n) for n in names)
    more = f", … {count - len(names)} more" if count > len(names) else ""
    return f"{count} {noun}{'s' if count != 1 else ''} ({shown}{more})"
