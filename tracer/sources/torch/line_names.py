"""The line tracer's general path when the counter moved (`moved`): naming the nodes a line made, from what the line
kept (NOTE [line culprits] in lines.py), and the frame rows their numbers go on.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

from typing import Any

import torch

_TENSOR = torch.Tensor
_seq = torch.autograd._get_sequence_nr
_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, whose f_locals is a snapshot (NOTE [stale locals])
MAX_CANDIDATES = 16
"""Tensors looked at per list or tuple a line stores or reads (its last ones: a list the line appended to)."""
WINDOW = 4096
"""How far back (in seq_nrs) a node left unnamed by its own line may still be named by a later line."""


def moved(self: Any, at: Any, lasti: int, event: str, frame: Any, arg: Any) -> None:
    """The counter moved since the last event of the LineCulprits `self` (its method `_moved`): put the new numbers on
    the line `at` was running (the hot path: NOTE [one number, one name] in lines.py)."""
    state = self.state
    start, now = state.last, _seq()
    state.last = now
    if now <= start or self.stopped[0]:
        return
    if state.row < 0:  # this thread's first number: its row now (NOTE [threads' line tracers])
        state = self.state = self.forward.thread_state()
    if at is None:
        row, names, inplace = -1, (), ""
    else:
        row, names, inplace = self._line(at.f_code, lasti)
    rows = None  # each number's frame row, when opcode events split the range (NOTE [columns on lines])
    if self._marks or self._timeline:
        if self._marks:
            rows = marked_rows(self, at, start, now, row)
        if self._timeline:  # module calls ran: each number in its own (NOTE [module paths])
            paths = self.forward.calls.paths(start, now)
            if paths and any(paths):
                in_module = self.forward.in_module
                rows = [in_module(r, p) for r, p in zip(rows or [row] * (now - start), paths, strict=True)]
        if rows is not None and now - start == 1:
            row, rows = rows[0], None
    if names:
        scope = at.f_locals
        if at.f_code.co_flags & _CO_OPTIMIZED and at.f_trace is not None:
            self._touched[at] = at  # NOTE [stale locals] (touch, inline)
    else:
        scope = None
    if now - start == 1 and not self._pending:  # the hot path: one node, kept in a name of its line's
        for name in names:
            v = scope.get(name)
            if type(v) is _TENSOR and v._base is None:
                g = v.grad_fn
                if g is not None and g._sequence_nr() == start:
                    node_name = self._type_names.get(type(g))
                    if node_name is None:
                        node_name = self._type_names[type(g)] = g.name()
                    del g
                    if state.calls or state.log or self._write_now:  # logged: written at once
                        self.forward.bump_one(state, start, node_name, row)
                    else:  # noted now, written before anything else is (Forward.write_seen)
                        state.seen.append((start, node_name, row))
                    return
    nodes: list = []
    for name in names:
        v = scope.get(name)
        if v is None and name not in scope:
            v = at.f_globals.get(name)
        if v is not None:
            add_nodes(nodes, v)
    if event == "return" or event == "flush":
        if arg is not None:
            add_nodes(nodes, arg)
    elif event == "call":
        add_nodes(nodes, tuple(frame.f_locals.values()))
        self.touch((frame,))
    found = names_reached(self, nodes, start, now, inplace) if nodes else ["?"] * (now - start)
    del nodes
    if state.calls or state.log or self._write_now:
        if rows is None:
            self.forward.bumps(state, start, now, found, row)
        else:
            for a, b, r in runs(rows):
                self.forward.bumps(state, start + a, start + b, found[a:b], r)
    else:
        seen = state.seen
        if "?" in found:
            waiting = state.seen_unnamed
            for i, name in enumerate(found):
                if name == "?":
                    waiting[start + i] = len(seen) + i
        if rows is None:
            seen.extend([(s, name, row) for s, name in zip(range(start, now), found, strict=True)])
        else:
            seen.extend(zip(range(start, now), found, rows, strict=True))
    if "?" in found:
        pending = self._pending
        for i, name in enumerate(found):
            if name == "?":
                pending[start + i] = 1


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
