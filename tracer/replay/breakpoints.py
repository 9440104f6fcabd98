"""Breakpoints: the steps at which a condition on the trace holds, found on its columns.

Imports numpy and the tracer only. A Breakpoint is plain data; `hits(trace, bp)` lists the steps it stops
at, and `next_hit` finds the nearest one after (or before) a step among several breakpoints.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from agdb.tracer.replay.search import is_number, nodes_with_seq
from agdb.tracer.store.schema import SUMMARY_KINDS, Kind
from agdb.tracer.store.trace import Trace

BreakpointKind = Literal["node", "seq_nr", "push", "nan", "error"]
KINDS: tuple[BreakpointKind, ...] = ("node", "seq_nr", "push", "nan", "error")
SYNTAX = ("node NAME | seq N | push [NAME] | nan | error   "
          "(node: a node of that name starts; seq: seq_nr N is taken or its node starts; push: a task enters a "
          "ready queue, optionally only NAME's; nan: a grad holds a NaN; error: a node raises)")
"""What `parse` accepts, for help texts and error messages."""


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """Stop where `kind` holds; `value` is the node name or seq_nr it needs (empty when none)."""

    kind: BreakpointKind
    value: str = ""

    def __str__(self) -> str:
        return f"{self.kind} {self.value}".strip()


def parse(text: str) -> Breakpoint:
    """`node MulBackward0`, `seq 12`, `push`, `push SumBackward0`, `nan`, `error`; a bare name means node.

    Raises:
        ValueError: the text is not one of these forms; the message says what is accepted.
    """
    words = text.split()
    if not words:
        raise ValueError(f"an empty breakpoint; write one of: {SYNTAX}")
    head, rest = words[0].lower(), " ".join(words[1:])
    if head in ("seq", "seq_nr"):
        if not is_number(rest):
            raise ValueError(f"`{text}`: seq needs a number, as in `seq 12`; write one of: {SYNTAX}")
        return Breakpoint("seq_nr", rest)
    if head in ("nan", "error") and not rest:
        return Breakpoint(head)  # type: ignore[arg-type]
    if head == "push":
        return Breakpoint("push", rest)
    if head == "node" and rest:
        return Breakpoint("node", rest)
    if len(words) == 1 and head not in ("node", "nan", "error"):
        return Breakpoint("node", words[0])
    raise ValueError(f"`{text}` is not a breakpoint; write one of: {SYNTAX}")


def hits(trace: Trace, bp: Breakpoint) -> np.ndarray:
    """The steps at which `bp` stops, in order (kept in the trace's index)."""
    return trace.index.memo(("breakpoint", bp), lambda: _HITS[bp.kind](trace, bp.value))


def next_hit(trace: Trace, breakpoints: list[Breakpoint], step: int,
             direction: int = 1) -> tuple[int, Breakpoint] | None:
    """The nearest step after `step` (before it when `direction` < 0) where a breakpoint stops."""
    best: tuple[int, Breakpoint] | None = None
    for bp in breakpoints:
        steps = hits(trace, bp)
        if direction > 0:
            i = int(np.searchsorted(steps, step, side="right"))
            if i < len(steps) and (best is None or steps[i] < best[0]):
                best = (int(steps[i]), bp)
        else:
            i = int(np.searchsorted(steps, step, side="left")) - 1
            if i >= 0 and (best is None or steps[i] > best[0]):
                best = (int(steps[i]), bp)
    return best


def _nodes_named(trace: Trace, name: str) -> np.ndarray:
    """Node indices whose name is `name` (or ends with `::name`, for `AccumulateGrad`)."""
    return np.flatnonzero(trace.nodes_named(lambda s: s == name or s.endswith("::" + name)))


def _steps_at_nodes(trace: Trace, steps: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    return steps[np.isin(trace.columns["ev_node"][steps], nodes)]


def _node_hits(trace: Trace, name: str) -> np.ndarray:
    return _steps_at_nodes(trace, trace.steps_of(Kind.NODE_STARTED), _nodes_named(trace, name))


def _seq_hits(trace: Trace, value: str) -> np.ndarray:
    nodes = nodes_with_seq(trace, int(value))
    return _steps_at_nodes(trace, trace.steps_of(Kind.SEQ_NR_BUMPED, Kind.NODE_STARTED), nodes)


def _push_hits(trace: Trace, name: str) -> np.ndarray:
    steps = trace.steps_of(Kind.TASK_PUSHED)
    return _steps_at_nodes(trace, steps, _nodes_named(trace, name)) if name else steps


def _nan_hits(trace: Trace, value: str) -> np.ndarray:
    c = trace.columns
    with_nan = np.flatnonzero(c["s_info"].astype(np.int64) & 2)
    groups = np.unique(np.searchsorted(c["sgroup_start"], with_nan, side="right") - 1)
    return trace.steps_of(*SUMMARY_KINDS)[groups]


def _error_hits(trace: Trace, value: str) -> np.ndarray:
    return trace.steps_of(Kind.ERROR_RAISED)


_HITS = {"node": _node_hits, "seq_nr": _seq_hits, "push": _push_hits, "nan": _nan_hits, "error": _error_hits}
