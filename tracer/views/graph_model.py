"""One plain model of a drawn graph (boxes, arrows, clusters, graph attributes), built from a Trace at a step.

Each view (the backward graph, the forward ops) builds a `GraphModel` (tracer/views/model.py); renderers draw any
model: DOT text (tracer/views/dot.py), the TUI's drawn graph (tracer/views/layout.py) and JSON
(tracer/views/json_render.py). The model holds no syntax of any renderer. Nodes are named by tracer/views/labels.py:
a backward box's label starts with the node's list-width name (`MulBackward0 seq 8`), its brief is the box-width
one (`MulBackward0 s8`).

Imports numpy and the tracer only; no renderer, no UI. Nothing here recurses on the graph's depth.
"""
from __future__ import annotations

import functools
from typing import Literal

import numpy as np

from agdb.tracer.replay.node_states import STATE_CODE, STATE_TEXT, STATES, node_states
from agdb.tracer.replay.replay import EngineState, Replay
from agdb.tracer.store.schema import Kind, seq_decode
from agdb.tracer.store.trace import Trace, forward_op
from agdb.tracer.views.folding import Folding, Repeat, fold, no_folding
from agdb.tracer.views.labels import (
    NodeLabels,
    brief_name,
    cut,
    distinction_pieces,
    label_pieces,
    priority_cells,
    seq_text,
    short_names,
)
from agdb.tracer.views.model import (
    LARGE,
    Cluster,
    EdgeBlock,
    GraphAttrs,
    GraphModel,
    Ints,
    NodeBlock,
    NodeKind,
    Piece,
    Texts,
    ViewError,
)
from agdb.tracer.views.selection import edges, focus_nodes

View = Literal["backward", "forward", "joint"]
VIEWS: tuple[View, ...] = ("backward", "forward", "joint")

SET_APART = (STATE_CODE["pruned"], STATE_CODE["skipped"])
"""States of nodes the step's graph tasks will not run: drawn apart, in the `pruned` cluster."""
_IS_SET_APART = np.isin(np.arange(len(STATES)), SET_APART)
"""Per state code, whether it is set apart: one lookup a box instead of a comparison per state."""


# -- building a view ----------------------------------------------------------------------------------------
def graph_model(trace: Trace, step: int | None = None, view: View = "backward", focus: int | None = None,
                radius: int = 2, collapse: bool = False, state: EngineState | None = None,
                folding: Folding | None = None) -> GraphModel:
    """The model of `view` after event `step` (None: after the whole trace).

    Args:
        step: the event after which states are shown; None means the whole trace has run.
        view: `backward` (nodes and next edges), `forward` (forward ops, data flowing from inputs), or
            `joint` (the FX joint graph the trace carries, recorded by `agdb fx -o`; step, focus and collapse
            do not apply).
        focus, radius: only the nodes within `radius` edges of node `focus`.
        collapse: fold repeated blocks and linear chains into one box each, and draw shared leaves once
            (tracer/views/folding.py states the rule).
        state: the EngineState at `step`, when the caller already has it (saves a replay).
        folding: the boxes to draw, when the caller has folded the nodes already (the TUI's drawn graph folds
            without states, so that its boxes stay the same at every step); focus and collapse are then unused.

    Raises:
        ViewError: an unknown or unavailable view, a step outside the trace, a focus node not in it.
    """
    if view not in VIEWS:
        raise ViewError(f"unknown view {view!r}: choose one of {', '.join(VIEWS)}")
    if view == "joint":  # the FX joint graph the trace carries (tracer/fx, docs/fx.md): no steps or states
        from agdb.tracer.views.joint import joint_model, joint_of_trace

        unused = [flag for flag, given in (("--step", step is not None), ("--focus", focus is not None),
                                           ("--collapse", collapse)) if given]
        if unused:
            verb = "does" if len(unused) == 1 else "do"
            raise ViewError(f"{' and '.join(unused)} {verb} not apply to --view joint: the joint graph is drawn whole")
        return joint_model(joint_of_trace(trace), "joint graph (FX)")
    if step is not None and not 0 <= step < len(trace):
        raise ViewError(f"step {step} is outside this trace's steps 0..{len(trace) - 1}")
    if focus is not None and not 0 <= focus < trace.num_nodes:
        raise ViewError(f"node {focus} is not in this trace (its nodes are 0..{trace.num_nodes - 1})")
    codes, order, state = _states(trace, step, state)
    if folding is None:
        nodes = (focus_nodes(trace, focus, radius) if focus is not None
                 else np.arange(trace.num_nodes, dtype=np.int64))
        folding = fold(trace, nodes, codes) if collapse else no_folding(nodes, trace.num_nodes)
        every = focus is None and not collapse
    else:
        every = (len(folding.members) == folding.num_groups == trace.num_nodes
                 and bool((folding.members == np.arange(trace.num_nodes)).all()))
        collapse = collapse or not every
    title = _title(trace, step, view, focus, radius, collapse)
    return _Builder(trace, codes, order, folding, view, focus, every).model(title, state)


def backward_graph(trace: Trace, step: int | None = None, focus: int | None = None, radius: int = 2,
                   collapse: bool = False, state: EngineState | None = None) -> GraphModel:
    """The backward graph: a box per node (or folded block), an arrow per next edge labelled input_nr."""
    return graph_model(trace, step, "backward", focus, radius, collapse, state)


def forward_graph(trace: Trace, step: int | None = None, focus: int | None = None, radius: int = 2,
                  collapse: bool = False, state: EngineState | None = None) -> GraphModel:
    """The forward ops: a box per op (its backward node's), arrows from an op's inputs, labelled `in {slot}`."""
    return graph_model(trace, step, "forward", focus, radius, collapse, state)


def _title(trace: Trace, step: int | None, view: str, focus: int | None, radius: int, collapse: bool) -> str:
    when = f"after step {step} of {len(trace)}" if step is not None else f"after all {len(trace)} events"
    around = f", within {radius} edges of node {focus}" if focus is not None else ""
    folded = ", repeats and chains folded" if collapse else ""
    return f"agdb: {view} graph {when}{around}{folded}"


# -- states -------------------------------------------------------------------------------------------------
def _states(trace: Trace, step: int | None,
            state: EngineState | None) -> tuple[np.ndarray, np.ndarray, EngineState | None]:
    """(state code per node, execution index per node, the EngineState or None for 'after the trace')."""
    if step is not None:
        state = state if state is not None and state.step == step else Replay(trace).state_at(step)
        codes, order = node_states(trace, state)
        return codes, order, state
    return (*final_states(trace), None)


def final_states(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """After the whole trace: done, or why not (pruned, skipped by exec_info, captured), else not reached."""
    n = trace.num_nodes
    c = trace.columns
    codes = np.full(n, STATE_CODE["unreached"], dtype=np.int8)
    ran = c["ev_node"][trace.steps_of(Kind.NODE_STARTED)]  # only an index here: no int64 copy
    order = np.full(n, -1, dtype=np.int64)
    order[ran] = np.arange(len(ran))
    for task_rows, code in _why_not_run(trace):
        codes[task_rows] = code
    codes[ran] = STATE_CODE["done"]
    captured = np.asarray(c["captured_node"], dtype=np.int64)
    if len(captured):  # only autograd.grad captures
        codes[captured[captured >= 0]] = STATE_CODE["captured"]
    return codes, order


def _why_not_run(trace: Trace) -> list[tuple[np.ndarray, int]]:
    """Per graph task: the nodes exec_info skipped, and those topological_nr pruned."""
    c = trace.columns
    if len(c["needed_start"]) <= 1 and not len(c["pruned_node"]):
        return []  # no exec_info and nothing pruned (a plain backward()): no scan of the events for their steps
    out = []
    needed_by_task = {}
    for row, s in enumerate(trace.steps_of(Kind.EXEC_INFO_COMPUTED).tolist()):
        lo, hi = int(c["needed_start"][row]), int(c["needed_start"][row + 1])
        clo, chi = int(c["captured_start"][row]), int(c["captured_start"][row + 1])
        needed_by_task[int(c["ev_task"][s])] = np.concatenate([c["needed_node"][lo:hi], c["captured_node"][clo:chi]])
    for row, s in enumerate(trace.steps_of(Kind.DEPENDENCIES_COMPUTED).tolist()):
        task = int(c["ev_task"][s])
        if task in needed_by_task:
            lo, hi = int(c["deps_start"][row]), int(c["deps_start"][row + 1])
            counted = np.asarray(c["deps_node"][lo:hi], dtype=np.int64)
            out.append((counted[~np.isin(counted, needed_by_task[task])], STATE_CODE["skipped"]))
        lo, hi = int(c["pruned_start"][row]), int(c["pruned_start"][row + 1])
        out.append((np.asarray(c["pruned_node"][lo:hi], dtype=np.int64), STATE_CODE["pruned"]))
    return out


# -- the builder --------------------------------------------------------------------------------------------
PATTERN_WIDTH = 60
"""A repeat's label wraps its unit's names at about this many characters a line."""
PATTERN_LINES = 4
"""… and shows at most this many lines of them, then `…`."""
BRIEF_MAX = 40
"""A folded box's brief (its one line in a terminal box) is cut to this many characters."""


def _wrapped(words: list[str], width: int, most: int) -> list[str]:
    """Words joined by ` · `, wrapped at about `width` characters, at most `most` lines (the last ends `…`)."""
    lines: list[str] = []
    line = ""
    for w in words:
        if line and len(line) + 3 + len(w) > width:
            lines.append(line + " ·")
            line = w
        else:
            line = f"{line} · {w}" if line else w
    lines.append(line)
    if len(lines) > most:
        lines = [*lines[:most - 1], lines[most - 1].removesuffix(" ·") + " …"]
    return lines


def _seq_text(code: int) -> str:
    """A seq_nr column's code (-1 for UINT64_MAX) as labels.seq_text writes the seq_nr."""
    return seq_text(seq_decode(code))


class _Builder:
    """Builds one view's model; the steps are methods so each stays short.

    `every`: the view shows every node, each in its own box, in node order (no focus, no folding), so a
    node's row is the node and per-node columns are used as they are, not copied row by row: on a cold cache
    (the first picture after others ran) each such copy costs microseconds, a good part of a 1k-node picture.
    """

    def __init__(self, trace: Trace, codes: np.ndarray, order: np.ndarray, folding: Folding, view: str,
                 focus: int | None, every: bool = False) -> None:
        self.trace, self.codes, self.order, self.folding, self.view, self.focus, self.every = (
            trace, codes, order, folding, view, focus, every)
        c = trace.columns
        self.is_accumulate = trace.nodes_named(lambda s: s.endswith("AccumulateGrad"))
        self.labels = NodeLabels(trace)
        self.seq_codes = np.asarray(c["node_seq"], dtype=np.int64)
        self.edges = edges(trace)
        self.users = np.bincount(self.edges[1], minlength=trace.num_nodes)
        self.is_leaf: np.ndarray | None = None  # made for the first repeat's label

    def model(self, title: str, state: EngineState | None) -> GraphModel:
        f = self.folding
        blocks = self._boxes()
        num_boxes = f.num_groups
        edge_blocks = [self._arrows()]
        states = np.concatenate([b.state for b in blocks]) if len(blocks) > 1 else blocks[0].state
        clusters = []
        apart = np.flatnonzero(_IS_SET_APART[states])
        if len(apart):
            clusters.append(Cluster("pruned", "set_apart", "not run: pruned by topological_nr or skipped by "
                                    "exec_info", apart))
        row = num_boxes
        if state is not None:
            for qi, q in enumerate(state.ready_queues):
                if not q.tasks:
                    continue
                block, order_edges, points = self._queue(qi, q, row)
                blocks.append(block)
                clusters.append(Cluster(f"queue{qi}", "queue",
                                        f"ready queue {self.trace.queue_label(q.name)}: pops top first",
                                        np.arange(row, row + len(block))))
                edge_blocks.extend((order_edges, points))
                row += len(block)
        legend = _legend(states, any(b.peripheries is not None and (b.peripheries == 2).any() for b in blocks))
        blocks.append(legend)
        clusters.append(Cluster("legend", "legend", "legend", np.arange(row, row + len(legend))))
        edge_blocks.append(EdgeBlock("order", np.arange(row, row + len(legend) - 1),
                                     np.arange(row + 1, row + len(legend)), cluster="legend"))
        attrs = GraphAttrs(title, "TB", num_boxes > LARGE)
        return GraphModel(attrs, tuple(blocks), tuple(e for e in edge_blocks if len(e)), tuple(clusters),
                          self._node_rows())

    def _node_rows(self) -> np.ndarray:
        """Per trace node, the model row of its box (-1: not shown)."""
        group_of = self.folding.group_of
        if self.every:
            return group_of
        # -1 (not shown) reads the appended -1: a picture may have no group at all (a step before any node)
        return np.append(self.row_of_group, -1)[np.where(group_of >= 0, group_of, -1)]

    # boxes --------------------------------------------------------------------------------------------------
    def _boxes(self) -> list[NodeBlock]:
        """The plain nodes' block, then the chains' and the repeats' (if any); sets each group's model row."""
        f = self.folding
        if len(f.members) == f.num_groups:  # nothing folded (the usual case): a group is a node, in order
            self.row_of_group = f.starts[:-1]  # a group's row is its number, as its start in `members` is
            return [self._singles(f.members)]
        sizes = np.diff(f.starts)
        is_repeat = np.zeros(f.num_groups, dtype=bool)
        is_repeat[list(f.repeats)] = True
        single_groups = np.flatnonzero(sizes == 1)
        chain_groups = np.flatnonzero((sizes > 1) & ~is_repeat)
        repeat_groups = np.flatnonzero(is_repeat)
        blocks = [self._singles(f.members[f.starts[:-1][single_groups]])]
        if len(chain_groups):
            blocks.append(self._folded("chain", chain_groups, self._chain_label))
        if len(repeat_groups):
            blocks.append(self._folded("repeat", repeat_groups, self._repeat_label))
        # Plain nodes first (in folding order), then the chains, then the repeats.
        self.row_of_group = np.empty(f.num_groups, dtype=np.int64)
        row = 0
        for groups in (single_groups, chain_groups, repeat_groups):
            self.row_of_group[groups] = row + np.arange(len(groups))
            row += len(groups)
        return blocks

    def _at(self, column: np.ndarray, vs: np.ndarray) -> np.ndarray:
        """column[vs], or the column itself when the view shows every node in order (see `every`)."""
        return column if self.every else column[vs]

    def _marks(self, vs: np.ndarray) -> tuple[Texts, np.ndarray, np.ndarray | None]:
        """The label's last line (accumulation points), the peripheries and the focus emphasis of `vs`."""
        is_acc = self._at(self.is_accumulate, vs)
        users = self._at(self.users, vs)
        sums = (users >= 2) > is_acc  # summed by the engine, and not an AccumulateGrad (bools: a > b is a & ~b)
        mark = is_acc.astype(np.int64)
        summed = users[sums]
        counts = summed
        if len(summed):  # none in a single chain
            counts = np.flatnonzero(np.bincount(summed))  # np.unique: slower
            mark[sums] = 2 + np.searchsorted(counts, summed)
        table = ("", "\naccumulates into .grad", *(f"\n⊕ sums {u} grads" for u in counts.tolist()))
        peripheries = (sums | is_acc).view(np.int8) + 1
        emphasis = (vs == self.focus) if self.focus is not None else None
        return Texts(mark, table), peripheries, emphasis

    def _singles(self, vs: np.ndarray) -> NodeBlock:
        marks, peripheries, emphasis = self._marks(vs)
        shown = None if self.every else vs
        topo = self._at(np.asarray(self.trace.columns["node_topo"], dtype=np.int64), vs)
        if self.view == "backward":
            orders = self._at(self.order, vs)
            label: tuple[Piece, ...] = (*label_pieces(self.trace, shown, "list"), "\ntopo ", Ints(topo),
                                        _earlier_runs(self.trace, vs, orders), Ints(orders), marks)
            brief = label_pieces(self.trace, shown, "box")
        else:  # the forward view: the op, its seq_nr and its line, read node by node (no hot path)
            ops, wheres = [], []
            for v in vs.tolist():
                info = self.trace.node(v)
                ops.append(info.forward_op)
                wheres.append(f"line {info.lineno}: {info.source[:48].rstrip()}" if info.lineno else "")
            rows = np.arange(len(vs))
            seq = Ints(self._at(self.seq_codes, vs), "max")
            # A leaf's op is `leaf` for every one of them: its name (x, fc1.weight) tells which.
            leaves = tuple(f" {self.labels.distinction(v)}".rstrip() if op == "leaf" else ""
                           for op, v in zip(ops, vs.tolist(), strict=True))
            label = (Texts(rows, tuple(ops)), Texts(rows, leaves),
                     "\nseq ", seq, "\n", Texts(rows, tuple(wheres)), marks)
            brief = (Texts(rows, tuple(ops)), *distinction_pieces(self.trace, shown, "box"))
        return NodeBlock("node", "n", Ints(vs), label, vs, self._at(self.codes, vs), peripheries, emphasis, brief,
                         topo)

    def _folded(self, kind: NodeKind, groups: np.ndarray, label_of) -> NodeBlock:
        """A block of folded boxes (chains or repeats), labelled by `label_of(group)`: (label, brief, state)."""
        labels, briefs, states, firsts = [], [], [], []
        for g in groups.tolist():
            label, brief, code = label_of(g)
            labels.append(label)
            briefs.append(cut(brief, BRIEF_MAX))
            states.append(code)
            firsts.append(int(self.folding.group(g)[0]))
        rows = np.arange(len(groups))
        return NodeBlock(kind, kind, Ints(groups), (Texts(rows, tuple(labels)),),
                         np.asarray(firsts, dtype=np.int64), np.asarray(states, dtype=np.int8),
                         brief=(Texts(rows, tuple(briefs)),))

    def _chain_label(self, g: int) -> tuple[str, str, int]:
        """A chain's label (its length, its commonest names, its seq_nrs, its states), brief (`k in a chain:
        First … Last`) and state."""
        members = self.folding.group(g)
        shown = self._names_of(members)
        names, counts = np.unique(shown, return_counts=True)
        ops = ", ".join(f"{n} ×{k}" for n, k in sorted(zip(names.tolist(), counts.tolist(), strict=True),
                                                          key=lambda p: -p[1])[:4])
        states, code = self._states_of(members)
        first, last = int(members[0]), int(members[-1])
        seq = self.seq_codes
        label = (f"{len(members)} nodes in a chain\n{ops}\nseq {_seq_text(int(seq[first]))} … "
                 f"{_seq_text(int(seq[last]))}\n{states}")
        brief = f"{len(members)} in a chain: {brief_name(str(shown[0]))} … {brief_name(str(shown[-1]))}"
        return label, brief, code

    def _repeat_label(self, g: int) -> tuple[str, str, int]:
        """`× N`, the nodes of one repetition (nested repeats as `(…) × k`), the leaves it holds, the seq_nrs
        and the states; its brief `× N: A·B·C` (one repetition's names); its state."""
        members = self.folding.group(g)
        rep = self.folding.repeats[g]
        if self.is_leaf is None:  # leaves as folding has them: no next edge to a node
            self.is_leaf = np.bincount(self.edges[0], minlength=self.trace.num_nodes) == 0
        leaves = members[self.is_leaf[members]]
        own = ""
        if len(leaves):
            names, counts = np.unique(self._names_of(leaves), return_counts=True)
            own = "\nleaves only it uses: " + ", ".join(
                f"{n} ×{k:,}" for n, k in zip(names.tolist(), counts.tolist(), strict=True))
        seqs = self.seq_codes[members[~self.is_leaf[members]]]
        seqs = seqs[seqs >= 0]  # AccumulateGrad's UINT64_MAX reads as -1 here
        span = f"\nseq {int(seqs.min())} … {int(seqs.max())}" if len(seqs) else ""
        states, code = self._states_of(members)
        lines = _wrapped(self._unit_text(rep), PATTERN_WIDTH, PATTERN_LINES)
        label = f"× {rep.count:,}: {rep.period:,} nodes each\n" + "\n".join(lines) + f"{own}{span}\n{states}"
        return label, f"× {rep.count:,}: " + "·".join(self._unit_brief(rep)), code

    def _unit_text(self, rep: Repeat) -> list[str]:
        """The words of one repetition: names (a run of one name as `name ×k`), nested repeats as `(…) × k`."""
        words: list[str] = []
        items = rep.unit
        names = self._names_of(np.asarray([i for i in items if not isinstance(i, Repeat)], dtype=np.int64))
        k = 0
        for item in items:
            if isinstance(item, Repeat):
                inner = " · ".join(self._unit_text(item))  # nested: at most log2(nodes) deep
                words.append(f"({inner}) × {item.count:,}")
                continue
            name = str(names[k])
            k += 1
            if words and (words[-1] == name or words[-1].startswith(name + " ×")):
                n = 2 if words[-1] == name else int(words[-1].rsplit("×", 1)[1].replace(",", "")) + 1
                words[-1] = f"{name} ×{n}"
            else:
                words.append(name)
        return words

    def _unit_brief(self, rep: Repeat) -> list[str]:
        """One repetition's names, each without its `Backward0`, nested repeats as `(a·b)×k`."""
        words = []
        names = self._names_of(np.asarray([i for i in rep.unit if not isinstance(i, Repeat)], dtype=np.int64))
        k = 0
        for item in rep.unit:
            if isinstance(item, Repeat):
                words.append(f"({'·'.join(self._unit_brief(item))})×{item.count}")  # log2(n) deep at most
            else:
                words.append(brief_name(str(names[k])))
                k += 1
        return words

    def _names_of(self, nodes: np.ndarray) -> np.ndarray:
        """The shown names of `nodes` (forward ops in the forward view), as an object array."""
        labels = short_names(self.trace, nodes)
        if self.view == "forward":
            labels = np.asarray([forward_op(str(n)) for n in labels], dtype=object)
        return labels

    def _states_of(self, members: np.ndarray) -> tuple[str, int]:
        """`k done, j waiting …` of a folded box's nodes, and its state: the one they share, else counted."""
        kinds, per = np.unique(self.codes[members], return_counts=True)
        states = ", ".join(f"{k:,} {STATES[c]}" for c, k in zip(kinds.tolist(), per.tolist(), strict=True))
        return states, int(kinds[0]) if len(kinds) == 1 else STATE_CODE["counted"]

    # arrows -------------------------------------------------------------------------------------------------
    def _arrows(self) -> EdgeBlock:
        parent, child, slot, input_nr = self.edges
        if self.every:  # a node's row is the node: an arrow per edge, as the edges are
            forward = self.view == "forward"
            label = ("in ", Ints(slot)) if forward else (Ints(input_nr),)
            return EdgeBlock("next", child, parent, label) if forward else EdgeBlock("next", parent, child, label)
        f = self.folding
        gp, gc = f.group_of[parent], f.group_of[child]
        keep = (gp >= 0) & (gc >= 0) & (gp != gc)
        forward = self.view == "forward"
        numbers = (slot if forward else input_nr)[keep]
        gp, gc = gp[keep], gc[keep]
        if not len(gp):  # no arrow (one folded chain): the model drops the block; np.unique of nothing costs ~50 us
            return EdgeBlock("next", gp, gc)
        prefix: tuple[str, ...] = ("in ",) if forward else ()
        if len(f.members) != f.num_groups:
            # Arrows between two folded chains (or a chain and a node) are merged and counted; arrows between
            # plain nodes are all drawn, each with its own number (x * x has two edges to one node).
            sizes = np.diff(f.starts)
            plain = (sizes[gp] == 1) & (sizes[gc] == 1)
            pairs = np.where(plain, -1 - np.arange(len(gp)), gp * (f.num_groups + 1) + gc)
            _, first, count = np.unique(pairs, return_index=True, return_counts=True)
            in_edge_order = np.argsort(first, kind="stable")  # arrows in edge order, as the trace lists them
            first, count = first[in_edge_order], count[in_edge_order]
            top = int(numbers.max(initial=0)) + 1
            gp, gc = gp[first], gc[first]
            # A label per distinct value, not per value up to the largest: an input_nr is any int a writer gave
            used, codes = np.unique(np.where(count == 1, numbers[first], top + count), return_inverse=True)
            table = ["".join(prefix) + str(u) if u < top else f"×{u - top}" for u in used.tolist()]
            label: tuple[Piece, ...] = (Texts(codes, tuple(table)),)
        else:
            label = (*prefix, Ints(numbers))
        tails, heads = self.row_of_group[gp], self.row_of_group[gc]
        if forward:  # data flows from the input's producer to the op
            tails, heads = heads, tails
        return EdgeBlock("next", tails, heads, label)

    # the ready queues ---------------------------------------------------------------------------------------
    def _queue(self, qi: int, q, first_row: int) -> tuple[NodeBlock, EdgeBlock, EdgeBlock]:
        labels, nodes = [], []
        for i, t in enumerate(q.tasks):
            depth, seq = priority_cells(t.priority)
            # The seq_nr has a line of its own: the name is the column width's (labels.py).
            labels.append(f"{i + 1}. {self.labels.task(t.node, 'column')}\n"
                          + (f"depth {depth}, seq {seq}" if depth else "before every node task"))
            nodes.append(-1 if t.node is None else t.node)
        k = len(labels)
        rows = np.arange(k)
        node = np.asarray(nodes, dtype=np.int64)
        block = NodeBlock("task", f"q{qi}_", Ints(rows), (Texts(rows, tuple(labels)),), node,
                          np.full(k, -1, dtype=np.int8))
        order = EdgeBlock("order", first_row + rows[:-1], first_row + rows[1:], cluster=f"queue{qi}")
        group = np.append(self.folding.group_of, -1)[node]  # a wake-up task (-1) reads the appended -1
        shown = np.flatnonzero(group >= 0)
        points = EdgeBlock("points_at", first_row + shown, self.row_of_group[group[shown]], cluster=f"queue{qi}")
        return block, order, points


def _legend(states: np.ndarray | None = None, has_accumulation: bool = True) -> NodeBlock:
    """A box per state the picture's boxes are in (None: every state), saying what it means, and one for
    accumulation points if the picture has any: a five-box picture needs no thirteen-box key."""
    used = (tuple(range(len(STATES))) if states is None
            else tuple(np.flatnonzero(np.bincount(states[states >= 0], minlength=len(STATES))).tolist()))
    return _legend_of(used, has_accumulation)


@functools.cache
def _legend_of(used: tuple[int, ...], has_accumulation: bool) -> NodeBlock:
    """The legend of these states (a few hundred combinations at most: one block each, made once and kept, so
    that the DOT renderer can keep each legend's lines by its block: dot.py's _LEGEND_LINES)."""
    keys = (*(STATES[s] for s in used), *(("accumulation",) if has_accumulation else ()))
    accumulation = ("⊕ sums grads / AccumulateGrad",) if has_accumulation else ()
    texts = (*(STATE_TEXT[STATES[s]] for s in used), *accumulation)
    k = len(keys)
    rows = np.arange(k)
    state = np.asarray([*used, *((-1,) if has_accumulation else ())], dtype=np.int8)
    peripheries = np.asarray([1] * len(used) + ([2] if has_accumulation else []), dtype=np.int8)
    return NodeBlock("legend", "legend_", Texts(rows, keys), (Texts(rows, texts),), np.full(k, -1, np.int64),
                     state, peripheries)


LEGEND = _legend()
"""The full legend's boxes: every state and accumulation (a picture carries only the entries it uses)."""

RUNS_LISTED = 4
"""A node that ran more often lists its first runs' execution indices, then how many there were, then the last."""


def _earlier_runs(trace: Trace, nodes: np.ndarray, orders: np.ndarray) -> Texts:
    """Per node, the text before its last execution index (`orders`, -1: none): ` · #` for a node that ran once,
    ` · #7, #14, #` for one that ran again (an AccumulateGrad reused by several backward calls)."""
    ran = np.asarray(trace.columns["ev_node"][trace.steps_of(Kind.NODE_STARTED)], dtype=np.int64)
    codes = (orders >= 0).astype(np.int64)
    table = ["", " · #"]
    again = np.flatnonzero((np.bincount(ran, minlength=trace.num_nodes)[nodes] > 1) & (orders >= 0))
    if len(again):
        by_node = np.argsort(ran, kind="stable")  # execution indices grouped by node, ascending within a node
        sorted_nodes = ran[by_node]
        for row in again.tolist():
            lo, hi = np.searchsorted(sorted_nodes, [nodes[row], nodes[row] + 1])
            runs = by_node[lo:hi]
            runs = runs[runs < orders[row]].tolist()  # the runs before the last one, up to the step
            if not runs:
                continue
            shown = ", ".join(f"#{i}" for i in runs[:RUNS_LISTED])
            more = f", … {len(runs) + 1} runs" if len(runs) > RUNS_LISTED else ""
            codes[row] = len(table)
            table.append(f" · {shown}{more}, #")
    return Texts(codes, tuple(table))
