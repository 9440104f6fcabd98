"""Sparklines of a trace over its steps: the ready queues' length and the seq_nr counter, for the TUI's status
line (`queue ▁▃▅▂▁ seq ▁▂▄▆█`), where a shape reads faster than a column of numbers.

Imports numpy and the tracer's store only; no UI.
"""
from __future__ import annotations

import numpy as np

from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace

BARS = "▁▂▃▄▅▆▇█"
"""Eight heights; a bucket with nothing in it is a space."""


def queue_lengths(trace: Trace) -> np.ndarray:
    """Per step, how many tasks wait in all ready queues after that step's event (pushes so far less pops)."""
    kinds = np.asarray(trace.columns["ev_kind"])
    change = (kinds == Kind.TASK_PUSHED).astype(np.int64) - (kinds == Kind.TASK_POPPED)
    return np.cumsum(change)


def seq_nr_taken(trace: Trace) -> np.ndarray:
    """Per step, how many seq_nrs were taken up to and including it (all threads together)."""
    return np.cumsum(np.asarray(trace.columns["ev_kind"]) == Kind.SEQ_NR_BUMPED)


def sparkline(values: np.ndarray, width: int) -> str:
    """`values` in `width` characters: each the largest value of its share of the steps, as a bar of eight
    heights scaled to the largest value overall (a space for 0)."""
    n = len(values)
    if not n or width <= 0:
        return ""
    edges = np.linspace(0, n, min(width, n) + 1).astype(np.int64)
    peaks = np.maximum.reduceat(values, edges[:-1])
    top = int(values.max())
    if top <= 0:
        return " " * len(peaks)
    levels = np.ceil(peaks * len(BARS) / top).astype(np.int64)  # 1..8 for a value above 0
    return "".join(BARS[lvl - 1] if lvl > 0 else " " for lvl in levels.tolist())


def bucket_of(step: int, num_steps: int, width: int) -> int:
    """The character of a `width`-wide sparkline over `num_steps` steps that holds `step`."""
    cells = min(width, num_steps)
    edges = np.linspace(0, num_steps, cells + 1).astype(np.int64)
    return int(np.searchsorted(edges, step, side="right")) - 1
