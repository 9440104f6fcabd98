"""The text of the panels' rows (tracer/replay/rows.py and friends), written once for the TUI and `agdb show`.

A `Line` is a row's text, the node it shows (None: none) and a tag saying what kind of line it is; the TUI's
widgets style a line by its tag, `agdb show` prints it. Tables (the ready queues, the dependencies) share their
cells' text here instead: each writer lays out the columns for its width. Nodes are named by views/labels.py.

Imports the tracer only; no UI.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from agdb.tracer.replay.node_details import NodeDetails
from agdb.tracer.replay.rows import PruningRows, QueueRows
from agdb.tracer.replay.state import ReadyTask
from agdb.tracer.store import events as ev
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.compiled import compiled_graph_lines
from agdb.tracer.views.labels import NodeLabels, fit, priority_cells, priority_text, seq_text

Tag = Literal["", "title", "note", "error", "nan"]
"""title: a heading; note: a remark, not data; error: an error raised; nan: a grad holding NaN."""


@dataclass(frozen=True, slots=True)
class Line:
    """One row of a panel: its text, the node it shows, and what kind of line it is."""

    text: str
    node: int | None = None
    tag: Tag = ""


# -- ready queues -----------------------------------------------------------------------------------------------
HEAD_FIRST = "head first: largest depth, then largest seq_nr"
"""What the note under a queue says about its order."""
TIED = "; tied with the next, so the heap's shape decides (libstdc++ order)"
"""… and what it adds when the head ties with the next task."""


def queue_note(rows: QueueRows) -> str:
    """The line under a queue's tasks: why its head pops first ("" for an empty queue)."""
    return HEAD_FIRST + (TIED if rows.is_head_tied else "") if rows.tasks else ""


def queue_title(trace: Trace, rows: QueueRows) -> str:
    """A queue's heading: `cpu (MainThread): 2 task(s)`."""
    return f"{trace.queue_label(rows.queue)}: {len(rows.tasks)} task(s)"


def task_cells(labels: NodeLabels, pop: int, task: ReadyTask) -> tuple[str, str, str, str]:
    """A queued task's cells: its place in the pop order, its name (beside a seq_nr column), depth and seq_nr."""
    return (str(pop), labels.task(task.node, "column"), *priority_cells(task.priority))


def slots_text(filled: tuple[bool, ...] | None) -> str:
    """An input buffer's slots as the panels write them: `[x.]` (x: a grad is in), "" for a node not waiting."""
    return "" if filled is None else "[" + "".join("x" if s else "." for s in filled) + "]"


# -- pruning ----------------------------------------------------------------------------------------------------
NO_TASK = "no graph task is running"


def pruning_lines(labels: NodeLabels, sections: tuple[PruningRows, ...], name_width: int = 0) -> list[Line]:
    """The pruning panel's lines; `name_width` pads or cuts a pruned node's name (0: as it is)."""
    lines = [] if sections and sections[0].finished_at is None else [Line(NO_TASK, tag="note")]
    for s in sections:
        lines.extend(_section(labels, s, name_width))
    return lines


def _section(labels: NodeLabels, s: PruningRows, name_width: int) -> list[Line]:
    name = labels.label
    when = f"finished at step {s.finished_at}" if s.finished_at is not None else f"depth {s.reentrant_depth}"
    lines = [Line(f"graph task {s.graph_task} ({when}): min_topo_nr {s.min_topo_nr}", tag="title")]
    for node, topo in s.pruned:
        shown = fit(name(node), name_width) if name_width else name(node)
        lines.append(Line(f"  pruned  {shown} topo {topo} < min {s.min_topo_nr}", node))
    if s.finished_at is not None:
        return lines  # a finished task's exec_info is not kept: only its pruning stays in the graph
    if s.needed or s.captured:
        lines.append(Line(f"  exec_info: {len(s.needed)} needed, {len(s.captured)} captured"))
        lines.extend(Line(f"  needed  {name(n)}", n) for n in s.needed)
        # A captured grad may flow into no node (-1: an input with no grad_fn of its own).
        lines.extend(Line(f"  capture {name(n) if n >= 0 else '(no node)'}", n if n >= 0 else None)
                     for n in s.captured)
        if s.skipped:
            lines.append(Line(f"  exec_info skips {len(s.skipped)}: counted, but no needed grad flows through them"))
            lines.extend(Line(f"  skipped {name(n)}", n) for n in s.skipped)
    else:
        lines.append(Line("  exec_info empty: every reachable node runs", tag="note"))
    return lines


# -- the node inspector -----------------------------------------------------------------------------------------
def tensor_text(t: ev.TensorSummary | None) -> str:
    """`float32[2, 3] cpu (0.5, 1, -2, …) NaN` for a grad, `None` for an undefined one."""
    if t is None:
        return "None"
    values = ", ".join(f"{v:.4g}" for v in t.preview)
    count = 1
    for d in t.shape:
        count *= d
    more = ", …" if count > len(t.preview) else ""
    flags = (" NaN" if t.has_nan else "") + (" inf" if t.has_inf else "")
    return f"{t.dtype}{list(t.shape)} {t.device} ({values}{more}){flags}"


def _event_lines(e: ev.Event, trace: Trace) -> list[str]:
    """What one of the node's events says about it."""
    at = f"step {e.step:>5}: "
    if isinstance(e, ev.TaskPushed):
        return [at + f"pushed to {trace.queue_label(e.queue)} with priority {priority_text(e.priority)}"]
    if isinstance(e, ev.TaskPopped):
        return [at + "popped" + (" (stale: its graph task was gone)" if e.stale else "")]
    if isinstance(e, ev.BufferWritten):
        how = "accumulated into" if e.is_accumulation else "written to"
        return [at + f"a grad {how} input buffer slot {e.slot}"]
    if isinstance(e, ev.HookRan):
        return [at + f"{e.hook_kind} hook {e.hook_name} ran"]
    if isinstance(e, ev.NodeStarted):
        return [at + "started with grads in:"] + [f"      in[{i}]  {tensor_text(t)}" for i, t in enumerate(e.inputs)]
    if isinstance(e, ev.NodeFinished):
        return [at + "returned grads out:"] + [f"      out[{i}] {tensor_text(t)}" for i, t in enumerate(e.outputs)]
    if isinstance(e, ev.GradAccumulated):
        return [at + f"accumulated into the leaf's .grad: {tensor_text(e.grad)}"]
    if isinstance(e, ev.GradCaptured):
        return [at + f"grad captured as result {e.output_index}: {tensor_text(e.grad)}"]
    if isinstance(e, ev.ErrorRaised):
        return [at + f"raised {e.error_type}: {e.message}"]
    if isinstance(e, ev.SeqNrBumped):
        return [at + f"took seq_nr {e.old} (the counter went {e.old} -> {e.seq_nr})"]
    if isinstance(e, ev.NodeCreated):
        return [at + "created"]
    return [at + type(e).__name__]


def detail_lines(labels: NodeLabels, d: NodeDetails) -> list[Line]:
    """The node inspector's lines for one node's details (tracer.replay.node_details)."""
    trace, info = labels.trace, d.info
    name = labels.label
    where = f" at {os.path.basename(info.filename)}:{info.lineno}: {info.source}" if info.filename else ""
    lines = [Line(f"{name(info.index)}  (node {info.index})", info.index, "title"),
             Line(f"seq_nr {seq_text(info.seq_nr)}  topological_nr {info.topological_nr}  device {info.device}"),
             Line(f"made by {info.forward_op}{where}"),
             *(Line(text) for text in compiled_graph_lines(trace, info.index)),
             Line(f"next edges ({len(info.next_edges)}):", tag="title")]
    for slot, (child, input_nr) in enumerate(info.next_edges):
        target = "None (no grad needed)" if child is None else f"{name(child)} (node {child}) input_nr {input_nr}"
        lines.append(Line(f"  [{slot}] → {target}", child))
    lines.append(Line(f"used by ({len(d.users)}):", tag="title"))
    lines.extend(Line(f"  {name(p)} (node {p}) edge [{slot}]", p) for p, slot in d.users)
    lines.append(Line(f"events up to step {d.step}:", tag="title"))
    if d.events_left_out:
        lines.append(Line(f"  … {d.events_left_out} older events", tag="note"))
    for e in d.events:
        for text in _event_lines(e, trace):
            tag: Tag = "error" if isinstance(e, ev.ErrorRaised) else ("nan" if "NaN" in text else "")
            lines.append(Line("  " + text, tag=tag))
    if not d.events:
        lines.append(Line("  none yet", tag="note"))
    if info.forward_stack:
        lines.append(Line("forward traceback (anomaly mode):", tag="title"))
        lines.extend(Line("  " + row) for row in info.forward_stack.rstrip("\n").splitlines())
    return lines
