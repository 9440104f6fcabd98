"""Compare two traces (`agdb diff A B`): agdb's engine against real torch, or two versions of one program.

Never imports torch, the engine, textual or rich. Two traces are aligned by thread (the n-th thread that took
a seq_nr in A with the n-th in B) and by *relative* seq_nr (a node's number minus its thread's first), since
two runs rarely start their counters at the same value. Five aspects are compared, each reporting its first
difference:
- node names: the node that took each relative seq_nr;
- seq_nr assignment: how many numbers each thread took, and where one run took more (a shift: "B took one
  more seq_nr at model.py:12, so every later seq_nr is one higher");
- culprit lines: the line blamed for each relative seq_nr (by source text, else file and line: _line_key);
- graph edges: each node's next edges (children by relative seq_nr; an AccumulateGrad by its name only, not its
  leaf's: a leaf bound only in a function that returned before the backward call has a name on the engine and
  none on the bridge, NOTE [leaf names]), for the nodes whose edges both traces have (a bridge knows a
  node's edges once a backward's walk met it), and how many distinct AccumulateGrads ran in each;
- execution order: the nodes the backward calls ran, in order (name and relative seq_nr; name only once the
  assignment differs).

Within a thread, seq_nrs are lined up as a diff tool lines up two files (`align`): by the longest common
subsequence of (node name, source text), so that an op added to the script is one inserted row and every later row
still pairs with its counterpart; a line added without a grad op changes only line numbers, which the culprit lines
aspect reports as a shift, not as a difference. The node runs are aligned alike.

Nodes are compared by their recorded short names, and written for people by the `labels` each side is read with
(tracer/views/labels.py's NodeLabels: `MulBackward0 seq 3`, `AccumulateGrad fc1.weight`), so the text names a node
as every other view does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, TypeVar

from agdb.tracer.store.schema import UINT64_MAX, Kind, short_name

ASPECTS = ("node names", "seq_nr assignment", "culprit lines", "graph edges", "execution order")


ALIGN_MOST = 1_000
"""Rows added or removed (between the common head and tail) past which two sides are paired by position instead:
the alignment's time grows with their number times the rows."""
T = TypeVar("T")


def align(xs: Sequence[T], ys: Sequence[T], key: Callable[[T], Any],
          alike: Callable[[T, T], bool] | None = None) -> list[tuple[int | None, int | None]]:
    """Index pairs lining up xs and ys as a diff tool does: a longest common subsequence of their keys (Myers'
    shortest edit script) pairs up, a row on one side only pairs with None. Between two common rows, a row removed
    and a row added that are `alike` pair up as one changed row (a node whose line was edited). Past ALIGN_MOST
    rows added or removed, the rows between the common head and tail pair by position.
    """
    kx, ky = [key(x) for x in xs], [key(y) for y in ys]
    head = 0
    while head < min(len(kx), len(ky)) and kx[head] == ky[head]:
        head += 1
    tail = 0
    while tail < min(len(kx), len(ky)) - head and kx[-1 - tail] == ky[-1 - tail]:
        tail += 1
    mx, my = kx[head:len(kx) - tail], ky[head:len(ky) - tail]
    middle = _shortest_edit(mx, my, ALIGN_MOST)
    if middle is None:
        n = min(len(mx), len(my))
        middle = [(k, k) for k in range(n)] + [(k, None) for k in range(n, len(mx))] + \
                 [(None, k) for k in range(n, len(my))]
    if alike is not None:
        middle = _changed_rows(middle, lambda i, j: alike(xs[head + i], ys[head + j]))
    return ([(i, i) for i in range(head)]
            + [(None if i is None else head + i, None if j is None else head + j) for i, j in middle]
            + [(len(kx) - tail + k, len(ky) - tail + k) for k in range(tail)])


def _shortest_edit(a: list, b: list, most: int) -> list[tuple[int | None, int | None]] | None:
    """Myers' O((N+M)·D) diff: a, b lined up with the fewest rows added or removed (D), or None past `most`."""
    n, m = len(a), len(b)
    v = {1: 0}  # diagonal k -> the furthest x reached on it
    rounds: list[dict[int, int]] = []
    for d in range(min(n + m, most) + 1):
        rounds.append(dict(v))
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[k] = x
            if x >= n and y >= m:
                return _edit_path(rounds, n, m)
    return None


def _changed_rows(pairs: list, alike: Callable[[int, int], bool]) -> list[tuple[int | None, int | None]]:
    """`pairs` with each run of one-sided rows between two common ones re-paired: a removed row and a later added
    one that are alike become one row, in order on both sides; the others stay one-sided."""
    out: list[tuple[int | None, int | None]] = []
    gap: list[tuple[int | None, int | None]] = []
    for pair in [*pairs, None]:
        if pair is not None and None in pair:
            gap.append(pair)
            continue
        removed = [i for i, _ in gap if i is not None]
        added = [j for _, j in gap if j is not None]
        r = a = 0  # the next removed and added rows not yet written
        for i in removed:
            found = next((n for n in range(a, len(added)) if alike(i, added[n])), None)
            if found is None:
                continue
            while removed[r] != i:  # the removed rows before this one, then the added ones before its match
                out.append((removed[r], None))
                r += 1
            out.extend((None, added[n]) for n in range(a, found))
            out.append((i, added[found]))
            r, a = r + 1, found + 1
        out.extend((i, None) for i in removed[r:])
        out.extend((None, j) for j in added[a:])
        if pair is not None:
            out.append(pair)
        gap = []
    return out


def _edit_path(rounds: list[dict[int, int]], x: int, y: int) -> list[tuple[int | None, int | None]]:
    """The pairs of Myers' path, walked back from (x, y) through the furthest points of each round."""
    out: list[tuple[int | None, int | None]] = []
    for d in range(len(rounds) - 1, -1, -1):
        v, k = rounds[d], x - y
        prev_k = k + 1 if k == -d or (k != d and v[k - 1] < v[k + 1]) else k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x, y = x - 1, y - 1
            out.append((x, y))
        if d > 0:
            out.append((None, prev_y) if x == prev_x else (prev_x, None))
        x, y = prev_x, prev_y
    out.reverse()
    return out


class Labels(Protocol):
    """How a side names its nodes for people: tracer.views.labels.NodeLabels of its trace."""

    def label(self, node: int, width: Any = "list") -> str:
        """The node's name at a width (`list`, or `column` beside a seq_nr)."""
        ...


@dataclass(frozen=True)
class Bump:
    """One seq_nr a thread handed out, relative to the thread's first."""

    seq: int
    name: str  # the short name, compared
    where: str  # file name:line, or "?"
    source: str
    label: str = ""  # the node's name for people, beside its relative seq_nr (labels' column width)


@dataclass(frozen=True)
class Run:
    """One node run: name and relative seq_nr (None for AccumulateGrad and other nodes with no number)."""

    name: str  # the short name, compared
    seq: int | None
    graph_task: int
    label: str = ""  # the node's name for people (labels' list width)


@dataclass
class Side:
    """What one trace contributes: bumps per aligned thread, node runs in order."""

    label: str
    source: str
    threads: list[str] = field(default_factory=list)
    bumps: list[list[Bump]] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    edges: dict[tuple[int, int], tuple] = field(default_factory=dict)  # (thread, relative seq_nr) -> next edges
    edge_labels: dict[tuple[int, int], tuple[str, ...]] = field(default_factory=dict)  # each edge's child, for people
    accumulate_grads: int = 0  # distinct AccumulateGrad nodes that ran (a bridge knows no other)


@dataclass
class Aspect:
    name: str
    equal: bool
    summary: str
    first: dict[str, Any] | None = None  # where it first differs: index, what A and B have there


@dataclass(frozen=True)
class LineShift:
    """How B's culprit line numbers moved against A's while every line is the same by source text."""

    by: tuple[int, ...]  # the distinct moves (B's line number minus A's), ascending, none zero
    partly: bool  # some lines did not move

    def __str__(self) -> str:
        """`shifted by +1`, `shifted by -2 and +1 where they moved`: the words `agdb diff` prints."""
        return "shifted by " + " and ".join(f"{d:+}" for d in self.by) + (" where they moved" if self.partly else "")


@dataclass(frozen=True)
class Comparison:
    """What `compare` finds: each aspect of ASPECTS, and the rows it lined up, for a view to lay out unchanged."""

    aspects: list[Aspect]
    bumps: list[tuple[int, Bump | None, Bump | None]]  # bump_pairs
    runs: list[tuple[Run | None, Run | None]]  # run_pairs, by name only when `shifted`
    shifted: bool  # the seq_nr assignment differs
    line_shift: LineShift | None  # the culprit lines are equal, and B's line numbers moved

    @property
    def equal(self) -> bool:
        """Whether every aspect is equal."""
        return all(x.equal for x in self.aspects)


def side_of(trace: Any, label: str, labels: Labels) -> Side:
    """The comparable content of a trace (`label` names the trace, `labels` its nodes)."""
    side = Side(label, trace.source)
    rows: dict[int, int] = {}
    bases: dict[int, int] = {}
    for step in trace.steps_of(Kind.SEQ_NR_BUMPED):
        e = trace[int(step)]
        row = rows.get(e.thread)
        if row is None:
            row = rows[e.thread] = len(side.bumps)
            side.bumps.append([])
            side.threads.append(trace.threads[e.thread][1] if e.thread < len(trace.threads) else str(e.thread))
            bases[e.thread] = e.old
        where = f"{os.path.basename(e.filename)}:{e.lineno}" if e.filename else "?"
        name = short_name(e.node_name)
        shown = labels.label(e.node, "column") if e.node >= 0 else name
        side.bumps[row].append(Bump(e.old - bases[e.thread], name, where, e.source, shown))
    first_base = next(iter(bases.values()), 0)
    ran: set[int] = set()  # the AccumulateGrads that ran
    for step in trace.steps_of(Kind.NODE_STARTED):
        step = int(step)
        node = trace.event_node(step)
        info = trace.node(node)
        seq = None
        if info.seq_nr != UINT64_MAX:
            seq = info.seq_nr - bases.get(info.thread, first_base)
        elif info.name.endswith("AccumulateGrad"):
            ran.add(node)
        side.runs.append(Run(short_name(info.name), seq, int(trace.columns["ev_task"][step]), labels.label(node)))
    side.accumulate_grads = len(ran)
    _graph_of(trace, side, rows, bases, labels)
    return side


def _graph_of(trace: Any, side: Side, rows: dict[int, int], bases: dict[int, int], labels: Labels) -> None:
    """The side's edges, nodes known by (aligned thread, relative seq_nr), and each edge's child for people."""
    def known(node: int) -> Any:
        info = trace.node(node)
        if info.seq_nr == UINT64_MAX or info.thread not in rows:
            return short_name(info.name)
        return rows[info.thread], info.seq_nr - bases[info.thread]

    def shown(child: int | None) -> str:
        if child is None:
            return "None"
        key = known(child)
        return labels.label(child) if isinstance(key, str) else f"relative seq_nr {key[1]}"

    for node in range(trace.num_nodes):
        info = trace.node(node)
        if info.seq_nr != UINT64_MAX and info.next_edges and info.thread in rows:
            side.edges[known(node)] = tuple((None if child is None else known(child), nr)
                                            for child, nr in info.next_edges)
            side.edge_labels[known(node)] = tuple(shown(child) for child, _ in info.next_edges)


def compare(a: Side, b: Side) -> Comparison:
    """Each aspect of ASPECTS, equal or with its first difference, and the rows lined up to find them."""
    pairs = bump_pairs(a, b)
    assignment = _assignment(a, b, pairs)
    shifted = not assignment.equal
    runs = run_pairs(a, b, shifted)
    lines, line_shift = _lines(pairs)
    aspects = [_names(a, pairs), assignment, lines, _graph(a, b, shifted), _order(a, runs, shifted)]
    return Comparison(aspects, pairs, runs, shifted, line_shift)


def bump_pairs(a: Side, b: Side) -> list[tuple[int, Bump | None, Bump | None]]:
    """Each thread's seq_nrs lined up (`align` by node name and source text): (thread, A's, B's), None on the side
    that has no counterpart."""
    out: list[tuple[int, Bump | None, Bump | None]] = []
    for t, xs, ys in _pairs(a, b):
        out.extend((t, None if i is None else xs[i], None if j is None else ys[j])
                   for i, j in align(xs, ys, _bump_key, alike=lambda x, y: x.name == y.name))
    return out


def run_pairs(a: Side, b: Side, shifted: bool) -> list[tuple[Run | None, Run | None]]:
    """The node runs lined up (`align`): by name and relative seq_nr, by name only once the assignment differs."""
    key = (lambda r: r.name) if shifted else (lambda r: (r.name, r.seq))
    return [(None if i is None else a.runs[i], None if j is None else b.runs[j])
            for i, j in align(a.runs, b.runs, key)]


def _bump_key(x: Bump) -> Any:
    return x.name, _line_key(x)


def _graph(a: Side, b: Side, shifted: bool) -> Aspect:
    if shifted:  # relative seq_nrs no longer name the same nodes on both sides
        return Aspect("graph edges", True, "not compared: the seq_nr assignment differs")
    if a.accumulate_grads != b.accumulate_grads:
        return Aspect("graph edges", False, f"A ran {a.accumulate_grads} AccumulateGrad node(s), B "
                      f"{b.accumulate_grads}", {"accumulate_grads": [a.accumulate_grads, b.accumulate_grads]})
    both = sorted(set(a.edges) & set(b.edges))
    for t, i in both:
        x, y = a.edges[t, i], b.edges[t, i]
        if x != y:
            name = _bump_name(a, t, i)
            return Aspect("graph edges", False, f"thread {t}, relative seq_nr {i} ({name}): "
                          f"A → {_edges_text(x, a.edge_labels[t, i])}, B → {_edges_text(y, b.edge_labels[t, i])}",
                          {"thread": t, "seq_nr": i, "a": _edges_json(x), "b": _edges_json(y)})
    return Aspect("graph edges", True, f"equal: the edges of {len(both)} node(s) both traces know, "
                  f"{a.accumulate_grads} AccumulateGrad(s) run")


def _bump_name(side: Side, t: int, i: int) -> str:
    bumps = side.bumps[t] if t < len(side.bumps) else []
    return bumps[i].label if i < len(bumps) else "?"


def _edges_text(edges: tuple, children: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"{child}:{nr}" for child, (_, nr) in zip(children, edges, strict=True)) + "]"


def _edges_json(edges: tuple) -> list:
    return [{"node": c if c is None or isinstance(c, str) else {"thread": c[0], "seq_nr": c[1]}, "input_nr": nr}
            for c, nr in edges]


def _pairs(a: Side, b: Side):
    for t in range(max(len(a.bumps), len(b.bumps))):
        yield t, (a.bumps[t] if t < len(a.bumps) else []), (b.bumps[t] if t < len(b.bumps) else [])


def _bump_json(bump: Bump | None) -> dict | None:
    return None if bump is None else {"seq_nr": bump.seq, "node": bump.name, "label": bump.label,
                                      "line": bump.where, "source": bump.source}


def _names(a: Side, pairs: list) -> Aspect:
    """The node of each lined-up seq_nr; rows on one side only are the assignment's to report."""
    both = [(t, x, y) for t, x, y in pairs if x is not None and y is not None]
    for t, x, y in both:
        if x.name != y.name:
            return Aspect("node names", False, f"thread {t}, relative seq_nr {x.seq}: A {_said(x)}, B {_said(y)}",
                          {"thread": t, "seq_nr": x.seq, "a": _bump_json(x), "b": _bump_json(y)})
    alone = len(pairs) - len(both)
    more = f" (and {alone} seq_nr(s) on one side only: see the seq_nr assignment)" if alone else ""
    return Aspect("node names", True, f"equal: {len(both)} seq_nrs on {len(a.bumps)} thread(s){more}")


def _said(bump: Bump | None) -> str:
    return "nothing" if bump is None else f"{bump.label} at {bump.where}"


def _assignment(a: Side, b: Side, pairs: list) -> Aspect:
    if len(a.bumps) != len(b.bumps):
        return Aspect("seq_nr assignment", False, f"A has {len(a.bumps)} numbering thread(s), B {len(b.bumps)}",
                      {"threads": [len(a.bumps), len(b.bumps)]})
    for t, xs, ys in _pairs(a, b):
        rows = [(x, y) for u, x, y in pairs if u == t]
        inserted = [y for x, y in rows if x is None]
        removed = [x for x, y in rows if y is None]
        if not inserted and not removed:
            if [x.name for x in xs] == [y.name for y in ys]:
                continue
            i = next(k for k, (x, y) in enumerate(zip(xs, ys, strict=False)) if x.name != y.name)
            return Aspect("seq_nr assignment", False, f"thread {t}: A and B took {len(xs)} seq_nrs each, for "
                          f"other nodes from relative {i} on",
                          {"thread": t, "seq_nr": i, "shift": 0, "counts": [len(xs), len(ys)], "culprit": None,
                           "inserted": [], "removed": []})
        parts = [_took(who, extra) for who, extra in (("B", inserted), ("A", removed)) if extra]
        first = min(inserted + removed, key=lambda bump: bump.seq)
        shift = len(inserted) - len(removed)
        if not removed and _contiguous(inserted):
            parts.append(f"B's later seq_nrs are {shift} higher")
        elif not inserted and _contiguous(removed):
            parts.append(f"B's later seq_nrs are {-shift} lower")
        else:
            parts.append(f"the other {len(rows) - len(inserted) - len(removed)} line up")
        return Aspect("seq_nr assignment", False, f"thread {t}: " + "; ".join(parts),
                      {"thread": t, "seq_nr": first.seq, "shift": shift, "counts": [len(xs), len(ys)],
                       "culprit": _bump_json(first), "inserted": [_bump_json(y) for y in inserted],
                       "removed": [_bump_json(x) for x in removed]})
    counts = [len(x) for x in a.bumps]
    return Aspect("seq_nr assignment", True, f"equal: {sum(counts)} seq_nrs, same numbers for the same nodes")


def _took(who: str, extra: list[Bump]) -> str:
    """`B took 2 more seq_nr(s) at relative 3 (MulBackward0 at m.py:5), 4 (…)`: the first few, then a count."""
    shown = ", ".join(f"{bump.seq} ({bump.label} at {bump.where})" for bump in extra[:3])
    more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
    return f"{who} took {len(extra)} more seq_nr(s) at relative {shown}{more}"


def _contiguous(bumps: list[Bump]) -> bool:
    return bool(bumps) and bumps[-1].seq - bumps[0].seq == len(bumps) - 1


def same_line(x: Bump | None, y: Bump | None) -> bool:
    """Whether two bumps blame the same line (_line_key)."""
    return x is not None and y is not None and _line_key(x) == _line_key(y)


def same_run(x: Run | None, y: Run | None, shifted: bool) -> bool:
    """Whether two node runs agree: by name and relative seq_nr, by name only once the assignment differs."""
    return x is not None and y is not None and x.name == y.name and (shifted or x.seq == y.seq)


def _line_key(x: Bump) -> Any:
    """What a culprit line is compared by: its source text where it has source, so that two versions of a script
    agree on a line they share whatever its file name (`train.py`, `train_v2.py`) and number (a line added above
    it); else its file name and line."""
    source = x.source.strip()
    return source if source else x.where


def _line_number(x: Bump) -> int | None:
    number = x.where.rpartition(":")[2]
    return int(number) if number.isdigit() else None


def _lines(pairs: list) -> tuple[Aspect, LineShift | None]:
    """The line blamed for each lined-up seq_nr, by source text; line numbers that moved are said (and returned),
    not a difference."""
    shifts: set[int] = set()
    for t, x, y in pairs:
        if x is None or y is None:
            continue
        if not same_line(x, y):
            return Aspect("culprit lines", False, f"thread {t}, relative seq_nr {x.seq}: A {_said(x)}, B {_said(y)}",
                          {"thread": t, "seq_nr": x.seq, "a": _bump_json(x), "b": _bump_json(y)}), None
        numbers = _line_number(x), _line_number(y)
        if None not in numbers and x.source.strip():
            shifts.add(numbers[1] - numbers[0])
    moved = tuple(sorted(d for d in shifts if d))
    if not moved:
        return Aspect("culprit lines", True, "equal: every seq_nr blamed on the same line"), None
    shift = LineShift(moved, 0 in shifts)
    return Aspect("culprit lines", True, f"equal by source text: every seq_nr blamed on the same line, B's "
                  f"line numbers {shift}"), shift


def _run_json(run: Run | None) -> dict | None:
    return None if run is None else {"node": run.name, "label": run.label, "seq_nr": run.seq,
                                     "graph_task": run.graph_task}


def _order(a: Side, pairs: list[tuple[Run | None, Run | None]], shifted: bool) -> Aspect:
    """The node runs, lined up (`run_pairs`): by name and relative seq_nr; by name only when the seq_nr assignment
    already differs (`shifted`: from there on every relative seq_nr may be off, which that aspect has said)."""
    tasks = len({r.graph_task for r in a.runs})
    for i, (x, y) in enumerate(pairs):
        if x is not None and y is not None and not same_run(x, y, shifted):
            return Aspect("execution order", False, f"node run {i}: A ran {_ran(x)}, B ran {_ran(y)}",
                          {"index": i, "a": _run_json(x), "b": _run_json(y), "inserted": [], "removed": []})
    inserted = [(i, y) for i, (x, y) in enumerate(pairs) if x is None]
    removed = [(i, x) for i, (x, y) in enumerate(pairs) if y is None]
    if inserted or removed:
        i, run = min(inserted + removed, key=lambda pair: pair[0])
        who, other = ("B", "A") if run in [y for _, y in inserted] else ("A", "B")
        count = len(inserted) + len(removed)
        more = f" ({count - 1} more run(s) on one side only)" if count > 1 else ""
        return Aspect("execution order", False, f"node run {i}: {who} ran {_ran(run)}, which {other} did not "
                      f"run{more}; the other {len(pairs) - count} runs line up in order",
                      {"index": i, "a": _run_json(run if who == "A" else None),
                       "b": _run_json(run if who == "B" else None),
                       "inserted": [_run_json(y) for _, y in inserted], "removed": [_run_json(x) for _, x in removed]})
    how = ", by name (their seq_nrs are assigned differently)" if shifted else ""
    return Aspect("execution order", True, f"equal{how}: {len(a.runs)} node runs in {tasks} graph task(s)")


def _ran(run: Run | None) -> str:
    if run is None:
        return "nothing more"
    return f"{run_text(run)} in graph task {run.graph_task}"


def run_text(run: Run) -> str:
    """A node run for people: its label, and its relative seq_nr (what the two traces are aligned by)."""
    return run.label + ("" if run.seq is None else f" (relative seq_nr {run.seq})")


def to_json(a: Side, b: Side, aspects: list[Aspect]) -> dict:
    """The `agdb.diff/1` object `agdb diff --json` prints."""
    return {"format": "agdb.diff/1", "equal": all(x.equal for x in aspects),
            "a": {"trace": a.label, "source": a.source}, "b": {"trace": b.label, "source": b.source},
            "aspects": {x.name: {"equal": x.equal, "summary": x.summary, "first": x.first} for x in aspects}}
