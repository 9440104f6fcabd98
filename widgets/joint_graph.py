"""JointGraphView: the trace's FX joint graph, forward nodes on the left and backward nodes on the right.

The cursor's node and its partners by seq_nr are highlighted: on a forward node, the backward nodes with its
number; on a backward node, its forward node. The joint graph's subgraphs (a nested compile region's) follow it,
their nodes named `subgraph.node` and indented by depth, and the partners are found across them all, as torch's
`copy_fwd_metadata_to_bw_nodes` finds them (tracer/fx/family_map.py). Gradient-accumulation nodes carry `Σ`,
nodes the anomalies report names carry `!`. The graph does not change with the step: it is what `agdb fx -o`
saved.
"""
from __future__ import annotations

from typing import Callable

from rich.text import Text

from agdb.tracer.fx.family_map import family_anomalies, family_map
from agdb.tracer.fx.graph import Graph, Node, op_name
from agdb.tracer.fx.seq_map import anomalies
from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.compiled import compile_joint
from agdb.tracer.views.joint import META_KEY, joint_of_trace, subgraphs_of
from agdb.tracer.views.model import ViewError

from .lazy_list import LazyList


class JointGraphView(LazyList):
    """One row per FX call node in graph order: forward ones in the left column, backward ones in the right."""

    COMPONENT_CLASSES = LazyList.COMPONENT_CLASSES | {"joint-graph--partner", "joint-graph--flag",
                                                      "joint-graph--acc"}
    DEFAULT_CSS = """
    JointGraphView > .joint-graph--partner { background: $success 35%; text-style: bold; }
    JointGraphView > .joint-graph--flag { color: $warning; text-style: bold; }
    JointGraphView > .joint-graph--acc { color: $secondary; text-style: bold; }
    """

    def __init__(self, trace: Trace, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        self.graph_id = ""
        """Which joint graph the rows show: "" for the trace's own (`fx_joint`), `c1.joint` for a compile's."""
        self._read(lambda: joint_of_trace(trace) if META_KEY in trace.meta else None)

    def show_compile(self, index: int) -> None:
        """Show the joint graph of compile `index` (a CompiledFunctionBackward node's, tracer/views/compiled.py)."""
        self._read(lambda: compile_joint(self.trace, index))
        self.graph_id = f"c{index}.joint"
        self.cursor = 0
        self.rows_changed()

    def _read(self, read: Callable[[], Graph | None]) -> None:
        """The rows, partners and flags of the graph `read()` returns (None: the trace holds none)."""
        self.nodes: list[Node] = []
        self.note = ""
        self.partners: dict[Node, set[Node]] = {}
        self.flagged: dict[Node, str] = {}
        self.names: dict[Node, str] = {}
        self.depth: dict[Node, int] = {}
        try:
            graph = read()
            if graph is None:
                self.note = "this trace holds no joint graph: record one with `agdb fx SCRIPT -o FILE.agdb`"
                return
            subgraphs = subgraphs_of(graph)
        except ViewError as e:
            self.note = str(e)
            return
        members = [("", graph)] + [(gid, g) for gid, _, _, g in subgraphs]
        prefix = {"": ""} | {gid: f"{name}." for gid, _, name, _ in subgraphs}
        depth = {"": 0}
        for gid, parent, _, _ in subgraphs:
            depth[gid] = depth.get(parent, 0) + 1
        self.nodes = [n for _, g in members for n in g.nodes if n.op in ("call_function", "get_attr")]
        self.names = {n: prefix[gid] + n.name for gid, g in members for n in g.nodes}
        self.depth = {n: depth[gid] for gid, g in members for n in g.nodes}
        m = family_map(members)
        by_key = {(gid, n.name): n for gid, g in members for n in g.nodes}
        for (gid, name), (_, f) in m.partner.items():
            b = by_key[(gid, name)]
            self.partners.setdefault(f, set()).add(b)
            self.partners[b] = {f}
        for a in family_anomalies(members):
            if a.kind != "gradient_acc":
                for name in a.nodes:  # an annotation anomaly's forward node may sit in another graph: unflagged
                    if (a.graph, name) in by_key:
                        self.flagged.setdefault(by_key[(a.graph, name)], a.message)
        for a in anomalies(graph):  # `shifted`, from the lines agdb's own capture keeps (graph.info["bumps"])
            if a.kind == "shifted":
                for name in a.nodes:
                    self.flagged.setdefault(graph.node(name), a.message)

    def show_state(self, state: EngineState, selected: int | None = None) -> None:
        """The joint graph does not depend on the step: nothing to do."""

    def row_count(self) -> int:
        return max(len(self.nodes), 1)

    def cursor_node(self) -> Node | None:
        """The FX node under the cursor."""
        return self.nodes[self.cursor] if self.nodes and self.cursor < len(self.nodes) else None

    def is_partner(self, index: int) -> bool:
        """Whether row `index` is a partner (by seq_nr) of the cursor's node."""
        here = self.cursor_node()
        return here is not None and self.nodes[index] in self.partners.get(here, ())

    def row_key(self, index: int) -> object:
        return index, self.is_partner(index)

    def watch_cursor(self, old: int, new: int) -> None:
        self.__dict__.pop("_painted", None)  # partners of the old and new cursor rows change colour
        super().watch_cursor(old, new)

    def header(self) -> str:
        """One header for both halves: the row's width is the panel's, unknown when the header is made."""
        return f"{'seq':>6} node = op(args) · forward nodes │ backward nodes"

    def row_text(self, index: int) -> Text:
        if not self.nodes:
            return Text(self.note, style="italic")
        n = self.nodes[index]
        half = max(self.size.width // 2, 24)
        seq = n.meta.get("seq_nr")
        mark = "Σ" if n.meta.get("is_gradient_acc") else ("!" if n in self.flagged else " ")
        args = ", ".join(_arg_text(a) for a in n.args)
        cell = Text(f"{mark}{'' if seq is None else seq:>5} {'  ' * self.depth.get(n, 0)}")
        cell.append(self.names.get(n, n.name), "bold")
        cell.append(f" = {op_name(n.target)}({args})")
        custom = n.meta.get("custom")
        if isinstance(custom, dict) and custom:  # torch.fx.traceback.annotate's, and what torch copied to backward
            cell.append(" {" + ", ".join(f"{k}={v!r}" for k, v in custom.items()) + "}", "italic")
        if self.is_partner(index):
            cell.stylize(self.component_style("joint-graph--partner"))
        if mark != " ":
            cell.stylize(self.component_style("joint-graph--acc" if mark == "Σ" else "joint-graph--flag"), 0, 1)
        if n.meta.get("partitioner_tag") == "is_backward":
            row = Text(" " * (half - 1) + "│ ")
            row.append_text(cell)
            return row
        cell.truncate(half - 1, overflow="ellipsis", pad=True)
        cell.append("│")
        return cell


def _arg_text(a: object) -> str:
    """An argument as a row shows it: a node by name, anything else by a short repr."""
    if isinstance(a, Node):
        return a.name
    text = repr(a)
    return text if len(text) <= 12 else text[:11] + "…"
