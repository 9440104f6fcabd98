"""ForwardBackwardView: forward ops with their seq_nr and line, each beside the backward node it made."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from tracer.forward_map import ForwardMap
from tracer.replay import EngineState
from tracer.schema import UINT64_MAX, short_name
from tracer.trace import Trace

from .lazy_list import LazyList

_FLAG_TEXT = {"accumulate": "grad accumulation", "engine": "engine node took a seq_nr",
              "in_backward": "made during backward", "no_graph": "took a seq_nr, joined no graph",
              "other_thread": "seq_nr also used on another thread"}
"""How each flag of tracer.forward_map reads on screen (NOTE [seq_nr anomalies] there says why)."""


class ForwardBackwardView(LazyList):
    """One row per forward op, in the order they ran: seq_nr, op, backward node, line, flags."""

    COMPONENT_CLASSES = LazyList.COMPONENT_CLASSES | {"forward-backward--flag", "forward-backward--accumulate"}
    DEFAULT_CSS = """
    ForwardBackwardView > .forward-backward--flag { color: $warning; text-style: bold; }
    ForwardBackwardView > .forward-backward--accumulate { color: $secondary; }
    """

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.forward_map = ForwardMap(trace)
        self.step = len(trace)  # ops that run after this step are dimmed
        self._made_steps = trace.created_steps()[self.forward_map.order]  # ascending: rows in creation order
        self._shown: tuple = ()

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Dim the ops that had not run by the state's step."""
        step = self.step = state.step
        made = int(np.searchsorted(self._made_steps, step, side="right"))
        if (made,) == self._shown:
            return  # the same rows are dimmed: nothing to repaint
        self._shown = (made,)
        self.rows_changed()

    def row_count(self) -> int:
        return max(len(self.forward_map), 1)

    def node_at_row(self, index: int) -> int | None:
        return int(self.forward_map.order[index]) if len(self.forward_map) else None

    def row_key(self, index: int) -> object:
        return index, index < self._shown[0] if self._shown else True  # a row changes only when dimmed or not

    def row_of_node(self, node: int) -> int:
        """The row of the op that made `node`."""
        return self.forward_map.row_of(node)

    def row_text(self, index: int) -> Text:
        if not len(self.forward_map):
            return Text("the trace holds no node", style="italic")
        op = self.forward_map.op(index)
        seq = "max" if op.seq_nr == UINT64_MAX else str(op.seq_nr)
        name = short_name(self.trace.node_name(op.node))
        text = Text.assemble(f"seq {seq:>4} ", (f"{op.op:<10} ", "bold"), f"→ {name:<20} ",
                             f"{op.lineno:>4}: {op.source}")
        if op.flags:
            style = "forward-backward--accumulate" if op.flags == ("accumulate",) else "forward-backward--flag"
            text.append("  ⚑ " + ", ".join(_FLAG_TEXT[f] for f in op.flags), self.component_style(style))
        if op.step > self.step:
            text.stylize("dim")
        return text
