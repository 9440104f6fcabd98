"""DOT text of a trace's graph at a step: labelled, styled by state, with the ready queue and a legend.

Imports numpy and the tracer only: this is pure text making. Running Graphviz's `dot` on the text is
the app's business (app/export.py), because it is slow and needs a program that may be missing.
Nothing here recurses on the graph's depth; nodes and edges are read from the trace's columns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .graph_views import Folding, edges, focus_nodes, fold_chains, no_folding
from .node_states import STATE_CODE, STATES, node_states
from .replay import EngineState, Replay
from .schema import Kind
from .trace import Trace, forward_op

View = Literal["backward", "forward", "joint"]
VIEWS: tuple[View, ...] = ("backward", "forward", "joint")
_UINT64_MAX = 2**64 - 1

STATE_STYLE = {
    "unreached": 'color="#9e9e9e", fontcolor="#757575", fillcolor="#ffffff"',
    "counted": 'color="#424242", fillcolor="#ffffff"',
    "waiting": 'color="#b7950b", fillcolor="#fff3c4"',
    "ready": 'color="#1e8449", fillcolor="#c8f7c5", penwidth=2',
    "running": 'color="#1f618d", fillcolor="#9ad0ff", penwidth=3',
    "done": 'color="#7f8c8d", fillcolor="#e8e8e8", fontcolor="#555555"',
    "pruned": 'color="#c0392b", fillcolor="#fdecea", fontcolor="#c0392b", style="rounded,filled,dashed"',
    "skipped": 'color="#c0392b", fillcolor="#ffffff", fontcolor="#c0392b", style="rounded,filled,dotted"',
    "captured": 'color="#6c3483", fillcolor="#e0c8ff", penwidth=2',
}
"""Graphviz attributes per node state (the TUI's graph panel shows the same states)."""
STATE_TEXT = {"unreached": "not reached", "counted": "counted", "waiting": "waiting (not_ready)",
              "ready": "ready (in a queue)", "running": "running", "done": "done",
              "pruned": "pruned: topo < min_topo_nr", "skipped": "skipped by exec_info",
              "captured": "captured (autograd.grad)"}


LARGE = 100
"""Pictures with more boxes than this are laid out with straight edges (see _Drawing.text)."""


class ViewError(ValueError):
    """The view asked for cannot be drawn from this trace; the message says what to do instead."""


@dataclass(frozen=True, slots=True)
class Picture:
    """What `picture` decided to draw: the DOT text and how many boxes and arrows it holds."""

    dot: str
    num_boxes: int
    num_arrows: int


def to_dot(trace: Trace, step: int | None = None, view: View = "backward", focus: int | None = None,
           radius: int = 2, collapse: bool = False, state: EngineState | None = None) -> str:
    """The DOT text of `view` after event `step` (None: after the whole trace). See `picture`."""
    return picture(trace, step, view, focus, radius, collapse, state).dot


def picture(trace: Trace, step: int | None = None, view: View = "backward", focus: int | None = None,
            radius: int = 2, collapse: bool = False, state: EngineState | None = None) -> Picture:
    """Draw the trace's graph.

    Args:
        step: the event after which states are shown; None means the whole trace has run.
        view: `backward` (nodes and next edges), `forward` (forward ops, data flowing from inputs), or
            `joint` (needs the FX graphs, not yet in agdb).
        focus, radius: draw only the nodes within `radius` edges of node `focus`.
        collapse: fold linear chains into one summary box each.
        state: the EngineState at `step`, when the caller already has it (saves a replay).

    Raises:
        ViewError: an unknown or unavailable view, a step outside the trace, a focus node not in it.
    """
    if view not in VIEWS:
        raise ViewError(f"unknown view {view!r}: choose one of {', '.join(VIEWS)}")
    if view == "joint":
        raise ViewError("the joint forward/backward view needs the FX graphs, which agdb does not build yet; "
                        "draw --view backward or --view forward")
    if step is not None and not 0 <= step < len(trace):
        raise ViewError(f"step {step} is outside this trace's steps 0..{len(trace) - 1}")
    if focus is not None and not 0 <= focus < trace.num_nodes:
        raise ViewError(f"node {focus} is not in this trace (its nodes are 0..{trace.num_nodes - 1})")
    codes, order, state = _states(trace, step, state)
    nodes = (focus_nodes(trace, focus, radius) if focus is not None
             else np.arange(trace.num_nodes, dtype=np.int64))
    folding = fold_chains(trace, nodes) if collapse else no_folding(nodes, trace.num_nodes)
    title = _title(trace, step, view, focus, radius, collapse)
    return _Drawing(trace, codes, order, folding, view, focus).text(title, state)


# -- states -----------------------------------------------------------------------------------------------
def _states(trace: Trace, step: int | None,
            state: EngineState | None) -> tuple[np.ndarray, np.ndarray, EngineState | None]:
    """(state code per node, execution index per node, the EngineState or None for 'after the trace')."""
    if step is not None:
        state = state if state is not None and state.step == step else Replay(trace).state_at(step)
        codes, order = node_states(trace, state)
        return codes, order, state
    return (*_final_states(trace), None)


def _final_states(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """After the whole trace: done, or why not (pruned, skipped by exec_info, captured), else not reached."""
    n = trace.num_nodes
    c = trace.columns
    codes = np.full(n, STATE_CODE["unreached"], dtype=np.int8)
    ran = np.asarray(c["ev_node"][trace.steps_of(Kind.NODE_STARTED)], dtype=np.int64)
    order = np.full(n, -1, dtype=np.int64)
    order[ran] = np.arange(len(ran))
    for task_rows, code in _why_not_run(trace):
        codes[task_rows] = code
    codes[ran] = STATE_CODE["done"]
    captured = np.asarray(c["captured_node"], dtype=np.int64)
    codes[captured[captured >= 0]] = STATE_CODE["captured"]
    return codes, order


def _why_not_run(trace: Trace) -> list[tuple[np.ndarray, int]]:
    """Per graph task: the nodes exec_info skipped, and those topological_nr pruned."""
    c = trace.columns
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


# -- drawing ------------------------------------------------------------------------------------------------
def _q(text: str) -> str:
    """A DOT double-quoted string's inside."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _short(name: str) -> str:
    return name.replace("torch::autograd::", "")


def _title(trace: Trace, step: int | None, view: str, focus: int | None, radius: int, collapse: bool) -> str:
    when = f"after step {step} of {len(trace)}" if step is not None else f"after all {len(trace)} events"
    around = f", within {radius} edges of node {focus}" if focus is not None else ""
    folded = ", linear chains folded" if collapse else ""
    return f"agdb: {view} graph {when}{around}{folded}"


class _Drawing:
    """Builds the DOT lines for one picture; the steps are methods so each stays short."""

    def __init__(self, trace: Trace, codes: np.ndarray, order: np.ndarray, folding: Folding, view: str,
                 focus: int | None) -> None:
        self.trace, self.codes, self.order, self.folding, self.view, self.focus = (
            trace, codes, order, folding, view, focus)
        c = trace.columns
        # Per distinct string, then spread to the nodes: a 100k-node graph has a few dozen distinct names.
        distinct = trace.distinct_names()
        short = np.empty(len(trace.strings), dtype=object)
        short[distinct] = [_q(_short(trace.strings[i])) for i in distinct]
        self.names_arr = short[c["node_name"]]
        self.is_accumulate = trace.nodes_named(lambda s: s.endswith("AccumulateGrad"))
        seqs = self.seq_codes = np.asarray(c["node_seq"], dtype=np.int64)
        self.seq_of = lambda v: "max" if seqs[v] < 0 else str(int(seqs[v]))
        parent, child, slot, input_nr = edges(trace)
        self.edges = parent, child, slot, input_nr
        self.users = np.bincount(child, minlength=trace.num_nodes)

    def text(self, title: str, state: EngineState | None) -> Picture:
        by_state, num_boxes = self._boxes()
        # Past a few hundred boxes, routing curved edges around many long ones takes dot minutes (a 200-box
        # folded 100k-node graph: over 60 s); straight edges and a bounded crossing search take about 1 s.
        quick = ", splines=line, mclimit=0.2, nslimit=1, nslimit1=1" if num_boxes > LARGE else ""
        lines = ["digraph agdb {",
                 f'  graph [label="{_q(title)}", labelloc=t, fontname="Helvetica", rankdir=TB{quick}];',
                 '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
                 '  edge [fontname="Helvetica", fontsize=9, color="#555555"];']
        set_apart = [code for code in (STATE_CODE["pruned"], STATE_CODE["skipped"]) if code in by_state]
        for code, group in by_state.items():
            if code not in set_apart:
                lines.extend(_state_subgraph(code, group))
        if set_apart:
            lines.append('  subgraph cluster_pruned { label="not run: pruned by topological_nr or skipped by '
                         'exec_info"; style=dashed; color="#c0392b"; fontcolor="#c0392b";')
            for code in set_apart:
                lines.extend(_state_subgraph(code, by_state[code]))
            lines.append("  }")
        arrows, num_arrows = self._arrows()
        lines.append(arrows)
        if state is not None:
            lines.extend(self._queues(state))
        lines.extend(_legend())
        lines.append("}")
        body = [line for line in lines if line]
        body.append("")  # the text ends with a newline (`+ "\n"` would copy the whole text once more)
        return Picture("\n".join(body), num_boxes, num_arrows)

    # boxes ---------------------------------------------------------------------------------------------------
    def _boxes(self) -> tuple[dict[int, list[str]], int]:
        """Box lines by state code (each entry may hold many lines), and how many boxes there are."""
        f = self.folding
        sizes = np.diff(f.starts)
        singles = f.members[f.starts[:-1][sizes == 1]]
        codes = self.codes[singles]
        by_state: dict[int, list[str]] = {}
        for code in np.flatnonzero(np.bincount(codes, minlength=len(STATES))).tolist():  # np.unique: slower
            vs = singles[codes == code]
            by_state[code] = ([self._single_boxes(vs)] if self.view == "backward"
                              else [self._box(int(v))[0] for v in vs.tolist()])
        chains = np.flatnonzero(sizes > 1).tolist()
        for g in chains:
            line, code = self._chain_box(g)
            by_state.setdefault(code, []).append(line)
        return dict(sorted(by_state.items())), len(singles) + len(chains)

    def _marks(self, vs: np.ndarray) -> tuple[list[str], list[str]]:
        """Per node: the label's last line for accumulation points, and the extra attributes."""
        is_acc = self.is_accumulate[vs]
        sums = (self.users[vs] >= 2) & ~is_acc
        lines, extras = [""] * len(vs), [""] * len(vs)
        for i in np.flatnonzero(is_acc).tolist():  # few: one per leaf
            lines[i], extras[i] = "\\naccumulates into .grad", ", peripheries=2"
        for i, u in zip(np.flatnonzero(sums).tolist(), self.users[vs][sums].tolist(), strict=True):
            lines[i], extras[i] = "\\n⊕ sums %d grads" % u, ", peripheries=2"
        if self.focus is not None:
            for i in np.flatnonzero(vs == self.focus).tolist():
                extras[i] += ", penwidth=4"
        return lines, extras

    def _single_boxes(self, vs: np.ndarray) -> str:
        """The backward view's boxes of `vs`, as one block of lines (the hot path on 100k-node graphs).

        Built by interleaving whole columns of pieces and joining once: per node, only C-level work
        (int to str, list slicing), about 3x faster than one f-string per node.
        """
        c = self.trace.columns
        n = len(vs)
        seqs = self.seq_codes[vs]
        seq_text = _texts(seqs)
        for i in np.flatnonzero(seqs < 0).tolist():
            seq_text[i] = "max"
        orders = self.order[vs]
        hashes, ran = ["\\n#"] * n, _texts(orders)
        for i in np.flatnonzero(orders < 0).tolist():
            hashes[i] = ran[i] = ""
        marks, extras = self._marks(vs)
        columns = (_texts(vs), self.names_arr[vs].tolist(), seq_text,
                   _texts(np.asarray(c["node_topo"])[vs]), hashes, ran, marks, extras)
        # 13 pieces a box: "    n" is printed once and then as the tail of the box before ("];\n    n").
        fixed = ("];\n    n", ' [label="', "\\nseq ", " · topo ", None, None, None, '"', None)
        pieces: list = [None] * (n * 13)
        slot = 0
        for k in range(8):
            if fixed[k] is not None:
                pieces[slot::13] = [fixed[k]] * n
                slot += 1
            pieces[slot::13] = columns[k]
            slot += 1
        pieces[0] = "    n"
        # No style here: each box sits in its state's subgraph, whose node defaults carry the style.
        pieces.append("];")  # no newline after the last box: lines are joined with one later
        return "".join(pieces)

    def _box(self, v: int) -> tuple[str, int]:
        code = int(self.codes[v])
        info = self.trace.node(v)
        where = f"line {info.lineno}: {info.source[:48].rstrip()}" if info.lineno else ""
        label = f"{_q(info.forward_op)}\\nseq {self.seq_of(v)}\\n{_q(where)}"
        lines, extras = self._marks(np.array([v]))
        return f'    n{v} [label="{label}{lines[0]}"{extras[0]}];', code

    def _chain_box(self, g: int) -> tuple[str, int]:
        members = self.folding.group(g)
        labels = self.names_arr[members]
        if self.view == "forward":
            labels = np.asarray([forward_op(str(n)) for n in labels], dtype=object)
        names, counts = np.unique(labels, return_counts=True)
        ops = ", ".join(f"{n} ×{k}" for n, k in sorted(zip(names.tolist(), counts.tolist(), strict=True),
                                                          key=lambda p: -p[1])[:4])
        codes = self.codes[members]
        kinds, per = np.unique(codes, return_counts=True)
        states = ", ".join(f"{k} {STATES[c]}" for c, k in zip(kinds.tolist(), per.tolist(), strict=True))
        code = int(kinds[0]) if len(kinds) == 1 else STATE_CODE["counted"]
        first, last = int(members[0]), int(members[-1])
        label = (f"{len(members)} nodes in a chain\\n{ops}\\nseq {self.seq_of(first)} … {self.seq_of(last)}"
                 f"\\n{states}")
        return (f'    chain{g} [label="{label}", class="agdb-chain agdb-{STATES[code]}", shape=box3d];', code)

    # arrows --------------------------------------------------------------------------------------------------
    def _box_id(self, groups: np.ndarray) -> list[str]:
        names = self.__dict__.get("_group_names")
        if names is None:
            f = self.folding
            sizes = np.diff(f.starts).tolist()
            firsts = f.members[f.starts[:-1]].tolist()
            names = self._group_names = [f"n{v}" if k == 1 else f"chain{g}"
                                         for g, (v, k) in enumerate(zip(firsts, sizes, strict=True))]
        return [names[g] for g in groups.tolist()]

    def _arrows(self) -> tuple[str, int]:
        parent, child, slot, input_nr = self.edges
        f = self.folding
        gp, gc = f.group_of[parent], f.group_of[child]
        keep = (gp >= 0) & (gc >= 0) & (gp != gc)
        if not keep.any():
            return "", 0
        forward = self.view == "forward"
        numbers = slot if forward else input_nr
        small = [("in %d" if forward else "%d") % i for i in range(int(numbers.max(initial=0)) + 1)]
        if len(f.members) == f.num_groups:  # nothing folded: one arrow per next edge, named by node
            tails, heads = parent[keep], child[keep]
            if forward:  # data flows from the input's producer to the op
                tails, heads = heads, tails
            numbers = numbers[keep].tolist()
            # 5 pieces an arrow: each label piece also closes its line and opens the next ('0"];\n  n').
            closing = [f'{text}"];\n  n' for text in small]
            pieces: list = [None] * (len(tails) * 5)
            pieces[0::5], pieces[2::5] = _texts(tails), _texts(heads)
            pieces[1::5], pieces[3::5] = [" -> n"] * len(tails), [' [label="'] * len(tails)
            pieces[4::5] = map(closing.__getitem__, numbers)
            pieces[0], pieces[-1] = "  n" + pieces[0], small[numbers[-1]] + '"];'
            return "".join(pieces), len(tails)
        gp, gc, numbers = gp[keep], gc[keep], numbers[keep]
        # Arrows between two folded chains (or a chain and a node) are merged and counted; arrows between
        # plain nodes are all drawn, each with its own input_nr (x * x has two edges to one node).
        sizes = np.diff(f.starts)
        plain = (sizes[gp] == 1) & (sizes[gc] == 1)
        pairs = np.where(plain, -1 - np.arange(len(gp)), gp * (f.num_groups + 1) + gc)
        _, first, count = np.unique(pairs, return_index=True, return_counts=True)
        order = np.argsort(first, kind="stable")  # arrows in edge order, as the trace lists them
        first, count = first[order], count[order]
        tails, heads = self._box_id(gp[first]), self._box_id(gc[first])
        labels = [small[i] if k == 1 else f"×{k}" for i, k in zip(numbers[first].tolist(), count.tolist(), strict=True)]
        if forward:
            tails, heads = heads, tails
        return "\n".join(f'  {t} -> {h} [label="{lab}"];' for t, h, lab in zip(tails, heads, labels, strict=True)), \
            len(labels)

    # the ready queue -----------------------------------------------------------------------------------------
    def _queues(self, state: EngineState) -> list[str]:
        out = []
        for qi, q in enumerate(state.ready_queues):
            if not q.tasks:
                continue
            out.append(f'  subgraph cluster_queue{qi} {{ label="ready queue {_q(self.trace.queue_label(q.name))}: '
                       f'pops top first"; style=filled; fillcolor="#f4f9f4"; color="#1e8449";')
            for i, t in enumerate(q.tasks):
                depth, seq = t.priority
                seq_text = "max" if seq == _UINT64_MAX else str(seq)
                name = _short(t.name) if t.name else "(wake-up)"
                out.append(f'    q{qi}_{i} [label="{i + 1}. {_q(name)}\\ndepth {depth}, seq {seq_text}", '
                           f'shape=box, style="filled", fillcolor="#c8f7c5", class="agdb-queue"];')
            out.extend(f"    q{qi}_{i} -> q{qi}_{i + 1} [style=invis];" for i in range(len(q.tasks) - 1))
            out.append("  }")
            for i, t in enumerate(q.tasks):
                if t.node is not None and self.folding.group_of[t.node] >= 0:
                    box = self._box_id(np.array([self.folding.group_of[t.node]]))[0]
                    out.append(f"  q{qi}_{i} -> {box} [style=dotted, color=\"#1e8449\", constraint=false];")
        return out


_NUMBER_TEXT_LIMIT = 1 << 20
_NUMBER_TEXT = np.zeros(0, dtype=object)
"""str(i) for small ints, kept between pictures: turning 100k ints into text is a large part of a picture.
An object array, so that a fancy index picks the texts in C, with no Python int made per value."""


def _texts(values: np.ndarray) -> list[str]:
    """The decimal text of each value (negative values come out wrong: callers overwrite them)."""
    global _NUMBER_TEXT
    values = np.asarray(values)
    top = int(values.max()) if len(values) else -1
    if top >= _NUMBER_TEXT_LIMIT:  # seq_nrs of a long-running program: not worth keeping that many
        return list(map(str, values.tolist()))
    known = _NUMBER_TEXT
    if top >= len(known):
        size = min(max(top + 1, 2 * len(known)), _NUMBER_TEXT_LIMIT)
        grown = np.empty(size, dtype=object)
        grown[:len(known)] = known
        grown[len(known):] = list(map(str, range(len(known), size)))
        _NUMBER_TEXT = known = grown  # one assignment: a picture drawn in a worker thread sees either array
    return known[np.maximum(values, 0)].tolist()


def _state_subgraph(code: int, boxes: list[str]) -> list[str]:
    """An anonymous subgraph whose node defaults style its boxes by their state."""
    state = STATES[code]
    return [f'  subgraph {{ node [class="agdb-{state}", {STATE_STYLE[state]}];', *boxes, "  }"]


def _legend() -> list[str]:
    out = ['  subgraph cluster_legend { label="legend"; style=rounded; color="#bbbbbb"; fontsize=10;']
    for state in STATES:
        out.append(f'    legend_{state} [label="{STATE_TEXT[state]}", class="agdb-legend", {STATE_STYLE[state]}];')
    out.append('    legend_accumulation [label="⊕ sums grads / AccumulateGrad", peripheries=2, fillcolor="#ffffff",'
               ' class="agdb-legend"];')
    names = [f"legend_{s}" for s in STATES] + ["legend_accumulation"]
    out.extend(f"    {a} -> {b} [style=invis];" for a, b in zip(names, names[1:], strict=False))
    out.append("  }")
    return out

