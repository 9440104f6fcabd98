"""ForwardBackwardView: forward ops with their seq_nr and line, each beside the backward node it made."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from agdb.tracer.replay.forward_map import FLAGS, ForwardMap
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.replay.rows import forward_rows_made
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.labels import NodeLabels, fit, seq_text, thread_labels

from .lazy_list import LazyList

FLAG_TEXT = {"accumulate": "accumulates", "engine": "engine's", "in_backward": "in backward", "no_graph": "no graph",
             "other_thread": "other thread"}
"""How each flag of tracer.replay.forward_map reads in the flags column (NOTE [seq_nr anomalies] there says why)."""
FLAG_MEANING = {"accumulate": "an AccumulateGrad: the grad goes into a leaf's .grad (seq_nr max)",
                "engine": "the engine made this node, not a forward op, and it took a seq_nr",
                "in_backward": "made while a backward ran (create_graph, a hook, a custom backward)",
                "no_graph": "took a seq_nr but joined no graph",
                "other_thread": "another thread used the same seq_nr: the two cannot be compared"}
"""What each flag means, for the help screen's legend."""
SOURCE_MIN = 28
"""Characters of the source line a row keeps in a narrow panel, before the node and flags columns do."""
NAME_MIN = 16
"""The node column is cut no narrower (a cut AccumulateGrad keeps its leaf name's end: `…ojection.weight`)."""
FLAGS_MIN = 11
"""The flags column is cut no narrower: `accumulates` whole."""


class ForwardBackwardView(LazyList):
    """One row per forward op, in the order they ran: seq_nr, op, backward node, flags, line and source."""

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
        self.labels = NodeLabels(trace)
        self.name_width = self.labels.column_width(22)
        """Width of the backward node column: its longest name, within 22..NAME_WIDTH_MAX (longer ones are cut)."""
        self._node_thread = trace.columns["node_thread"]
        self.threads = thread_labels(trace, self._node_thread)
        """Each thread's label, when the trace's nodes were made on more than one thread (else {}: no column)."""
        self.thread_width = max((len(n) for n in self.threads.values()), default=0)
        # With a thread column, `other thread` says what the column already shows on every row of a second thread
        # (each thread numbers from its own counter): its room goes to the source instead.
        self._shown_flags = ~(1 << FLAGS.index("other_thread")) & 0xFF if self.threads else 0xFF
        combos = np.flatnonzero(np.bincount(self.forward_map.flags & self._shown_flags, minlength=1)).tolist()
        self.flag_width = max((len(self._flag_text(c)) for c in combos), default=0)
        """Width of the flags column: the widest combination of flags this trace has (0: no flag at all)."""
        self._widths = (self.name_width, self.flag_width)  # the widths the longest name and flags want

    def fit_columns(self, width: int) -> bool:
        """Narrow the node and flags columns (down to NAME_MIN and FLAGS_MIN, cut with `…`) so that the source
        keeps SOURCE_MIN characters; as wide as the trace wants when there is room."""
        name, flags = self._widths
        thread = self.thread_width + 1 if self.thread_width else 0
        fixed = len(f"{'':>8} {'':<10} → ") + 1 + thread + len(f"{'':>4}: ")
        over = fixed + name + (flags + 1 if flags else 0) + SOURCE_MIN - width
        if over > 0:
            cut_name = min(over, max(name - NAME_MIN, 0))
            name, over = name - cut_name, over - cut_name
        if over > 0 and flags:
            flags -= min(over, max(flags - FLAGS_MIN, 0))
        changed = (name, flags) != (self.name_width, self.flag_width)
        self.name_width, self.flag_width = name, flags
        return changed

    @staticmethod
    def _flag_text(bits: int) -> str:
        return ", ".join(FLAG_TEXT[name] for i, name in enumerate(FLAGS) if bits >> i & 1)

    def header(self) -> str:
        """The column headers, aligned with the rows."""
        flags = f"{fit('flags', self.flag_width)} " if self.flag_width else ""
        thread = f"{'thread':<{self.thread_width}} " if self.thread_width else ""
        return f"{'seq_nr':>8} {'op':<10} → {'backward node':<{self.name_width}} {thread}{flags}{'line':>4}  source"

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """Dim the ops that had not run by the state's step."""
        self.step = state.step
        made = forward_rows_made(self._made_steps, state)
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
        name = self.labels.column_name(op.node)
        if len(name) > self.name_width and op.flags == ("accumulate",):
            # The op (`leaf`) and the flag (`accumulates`) say AccumulateGrad already: its leaf's name is the news,
            # and the end of a parameter's path (`…proj.weight`) tells more than its start.
            name = name.removeprefix("AccumulateGrad ")
            name = name if len(name) <= self.name_width else "…" + name[len(name) - self.name_width + 1:]
        name = fit(name, self.name_width)
        text = Text.assemble(f"{seq_text(op.seq_nr):>8} ", (f"{op.op:<10} ", "bold"), f"→ {name} ")
        if self.thread_width:  # the thread that made the node: each thread numbers its own nodes
            text.append(f"{self.threads.get(int(self._node_thread[op.node]), ''):<{self.thread_width}} ")
        if self.flag_width:
            flags = self._flag_text(int(self.forward_map.flags[op.node]) & self._shown_flags)
            style = "forward-backward--accumulate" if op.flags == ("accumulate",) else "forward-backward--flag"
            text.append(f"{fit(flags, self.flag_width)} ", self.component_style(style) if flags else "")
        text.append(f"{op.lineno:>4}: {op.source}" if op.lineno > 0 else " " * 5)  # 0: no line (a bridge's leaf)
        if op.step > self.step:
            text.stylize("dim")
        return text
