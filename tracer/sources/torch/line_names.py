"""Naming the nodes a line made, from what the line kept (NOTE [line culprits] in lines.py), and the frame rows their
numbers go on.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

from typing import Any

import torch

_TENSOR = torch.Tensor
MAX_CANDIDATES = 16
"""Tensors looked at per list or tuple a line stores or reads (its last ones: a list the line appended to)."""
WINDOW = 4096
"""How far back (in seq_nrs) a node left unnamed by its own line may still be named by a later line."""


def names_reached(lines: Any, todo: list, start: int, now: int, inplace: str) -> list[str]:
    """Names of the nodes numbered start..now-1 (and of earlier `?` ones) reached from the nodes `todo`, for the
    LineCulprits `lines` (its pending `?` numbers, its state, its Forward)."""
    pending = lines._pending  # in increasing order: its first key is the lowest (O(1) in an OrderedDict)
    while pending:
        low = next(iter(pending))
        if low >= now - WINDOW:
            break
        del pending[low]
    else:
        low = start
    found: dict[int, str] = {}
    type_names, push, pop = lines._type_names, todo.append, todo.pop
    while todo:
        n = pop()
        s = n._sequence_nr()
        if low <= s < now and s not in found and (s >= start or s in pending):
            name = type_names.get(type(n))
            if name is None:
                name = type_names[type(n)] = n.name()
            found[s] = name
            for c, _ in n.next_functions:
                if c is not None:
                    push(c)
    late = {s: name for s, name in found.items() if s < start}
    if late:
        state = lines.state
        seen, waiting, written = state.seen, state.seen_unnamed, {}
        for s, name in late.items():
            del pending[s]
            i = waiting.pop(s, None)
            if i is None:
                written[s] = name
            else:  # not written yet: named where it waits
                seen[i] = (s, name, seen[i][2])
        if written:
            lines.forward.late_names(state, written)
    names = [found.get(s) or "?" for s in range(start, now)]
    if names[0] == "?" and inplace and any(n.endswith("CopySlices") for n in names):
        names[0] = inplace
    return names


def marked_rows(lines: Any, at: Any, start: int, now: int, last: int) -> list[int]:
    """The frame row of each number start..now-1: the instruction opcode events saw take it (the LineCulprits'
    `_marks`: (first, after, offset) each), else `last`, the row of the instruction running now (NOTE [columns on
    lines] in line_table.py)."""
    rows = [last] * (now - start)
    code = at.f_code if at is not None else None
    for first, after, offset in lines._marks:
        if code is None:
            break
        row = lines._line(code, offset)[0]
        for s in range(max(first, start), min(after, now)):
            rows[s - start] = row
    lines._marks.clear()
    return rows


def add_nodes(nodes: list, v: Any) -> None:
    """The grad_fn of `v`, or of the tensors in it if it is a tuple or list (a view's: its base's)."""
    if isinstance(v, _TENSOR):
        g = (v if v._base is None else v._base).grad_fn  # never a view's grad_fn (NOTE [line culprits])
        if g is not None:
            nodes.append(g)
    elif type(v) is tuple or type(v) is list:
        for item in v[-MAX_CANDIDATES:]:  # the last: what a line appended
            if isinstance(item, _TENSOR):
                g = (item if item._base is None else item._base).grad_fn
                if g is not None:
                    nodes.append(g)


def runs(rows: list) -> list[tuple[int, int, int]]:
    """(first index, index after, row) of each run of equal rows."""
    runs, first = [], 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i] != rows[first]:
            runs.append((first, i, rows[first]))
            first = i
    return runs
