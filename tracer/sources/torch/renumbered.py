"""Nodes that `_set_sequence_nr` gives another number while the line tracer records (NOTE [renumbered nodes]).

NOTE [renumbered nodes]
`grad_fn._set_sequence_nr(n)` gives a node another number after its line took one, and the bridge knows a node by its
number (NOTE [node identity] in walk.py): a walk would meet it as a node of its own, with no line, and the node its
line made would stay out of the graph. torch's node types are immutable, so the call cannot be wrapped; a line that
calls it (read from its bytecode: line_table.py) runs with the mode pushed, and its tensors' grad_fns and the nodes it
names are read, with their numbers, when it begins (`numbered`) and again when it ends (`check`): a number that
changed moves the node's key (Forward.renumbered). A node the line itself makes, or one renumbered under
culprits="mode" (no line events), is not followed.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

from typing import Any

import torch

_TENSOR = torch.Tensor


class Renumbered:
    """The nodes of the running lines that call `_set_sequence_nr`, with their numbers before the call."""

    def __init__(self, lines: Any, pending: list) -> None:
        self.lines = lines  # the LineCulprits: its lines' names, its frames' snapshots, its Forward and state
        self.pending = pending  # (frame, [(node, its seq_nr)]) per running line

    def numbered(self, frame: Any, lasti: int) -> list:
        """The nodes the line at `lasti` names (its tensors' grad_fns, or nodes), with their numbers now."""
        names = self.lines._line(frame.f_code, lasti)[1]
        if not names:
            return []
        scope = frame.f_locals
        self.lines.touch((frame,))
        found = []
        for name in names:
            v = scope.get(name)
            if v is None and name not in scope:
                v = frame.f_globals.get(name)
            if isinstance(v, _TENSOR):
                v = v.grad_fn if v._base is None else None  # never a view's grad_fn (NOTE [line culprits])
            if v is not None and hasattr(v, "_set_sequence_nr"):
                found.append((v, v._sequence_nr()))
        return found

    def check(self, frame: Any) -> None:
        """The line `frame` ran ended: move the key of every node it gave another number."""
        pending = self.pending
        for i in range(len(pending) - 1, -1, -1):
            if pending[i][0] is frame:
                for node, old in pending.pop(i)[1]:
                    new = node._sequence_nr()
                    if new != old:
                        self.lines.forward.renumbered(self.lines.state, old, new)
