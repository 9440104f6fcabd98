"""NodeInspector: everything known about the selected node at the step, one line per fact."""
from __future__ import annotations

import os

from rich.text import Text

from agdb.tracer.replay.node_details import NodeDetails, node_details
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store import events as ev
from agdb.tracer.store.trace import Trace

from .labels import NodeLabels, seq_text
from .lazy_list import LazyList


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
        depth, seq = e.priority
        return [at + f"pushed to {trace.queue_label(e.queue)} with priority ({depth}, {seq_text(seq)})"]
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


def detail_lines(trace: Trace, d: NodeDetails, labels: NodeLabels | None = None) -> list[Text]:
    """The inspector's lines for one node's details (`labels` tells same-named nodes apart)."""
    info = d.info
    name = (labels or NodeLabels(trace)).label
    where = f" at {os.path.basename(info.filename)}:{info.lineno}: {info.source}" if info.filename else ""
    lines = [Text(f"{name(info.index)}  (node {info.index})", style="bold"),
             Text(f"seq_nr {seq_text(info.seq_nr)}  topological_nr {info.topological_nr}  device {info.device}"),
             Text(f"made by {info.forward_op}{where}")]
    lines.append(Text(f"next edges ({len(info.next_edges)}):", style="bold"))
    for slot, (child, input_nr) in enumerate(info.next_edges):
        target = "None (no grad needed)" if child is None else f"{name(child)} (node {child}) input_nr {input_nr}"
        lines.append(Text(f"  [{slot}] → {target}"))
    lines.append(Text(f"used by ({len(d.users)}):", style="bold"))
    lines.extend(Text(f"  {name(p)} (node {p}) edge [{slot}]") for p, slot in d.users)
    lines.append(Text(f"events up to step {d.step}:", style="bold"))
    if d.events_left_out:
        lines.append(Text(f"  … {d.events_left_out} older events", style="italic"))
    for e in d.events:
        for line in _event_lines(e, trace):
            style = "bold red" if isinstance(e, ev.ErrorRaised) else ("bold yellow" if "NaN" in line else "")
            lines.append(Text("  " + line, style=style))
    if not d.events:
        lines.append(Text("  none yet", style="italic"))
    if info.forward_stack:
        lines.append(Text("forward traceback (anomaly mode):", style="bold"))
        lines.extend(Text("  " + row) for row in info.forward_stack.rstrip("\n").splitlines())
    return lines


class NodeInspector(LazyList):
    """The selected node's edges, users, hooks, grads in and out, errors and forward traceback."""

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.node: int | None = None
        self.lines: list[Text] = [Text("press Enter on a node in any panel to inspect it", style="italic")]
        self.labels = NodeLabels(trace)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Show the selected node as it is after the state's step."""
        self.node = selected
        if selected is not None:
            self.lines = detail_lines(self.trace, node_details(self.trace, selected, state.step), self.labels)
        self.rows_changed()

    def row_count(self) -> int:
        return len(self.lines)

    def row_text(self, index: int) -> Text:
        return self.lines[index].copy()
