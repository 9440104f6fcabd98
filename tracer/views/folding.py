"""Folding a graph for a picture: repeated blocks into one box `× N`, linear chains into one box, shared leaves once.

A `Folding` groups the shown nodes; each group is one box. Renderers read it through the graph model
(tracer/views/graph_model.py): DOT today, the TUI's drawn graph later. The rule, which docs/folding.md states with
examples:

1. **Leaves.** A leaf is a node with no next edge to a node (an AccumulateGrad, or a node none of whose inputs
   needs grad). A leaf with two or more users (a weight every step uses) is *shared*: it is always a box of its
   own, drawn once, and the arrows into it are merged per box they come from, labelled with their count. An
   edge to a shared leaf never breaks a chain. A leaf with one user (a layer's own weight) goes with its user:
   into its user's repeat, or into the chain stage like any node.
2. **The sequence.** The shown nodes that are not leaves, in node order (the order the forward made them).
   Each gets a token: its name, its state at the step, its number of next edges, and per next edge its slot,
   input_nr and where it goes: for an edge to a leaf, the leaf's name; to a node with three or more users (a
   hub: a shared input, a residual stream), that node's name; to a node not shown, its name; to any other node,
   the distance back along the sequence. Distances make a repetition's edges to the repetition before it the
   same in every repetition.
3. **Repeats.** A run is a stretch of the sequence whose tokens repeat with period P >= 2, at least twice,
   whose unit is not itself a repetition of a shorter one. Candidate periods are the distances from each node
   to its eight previous nodes of the same token (the 64 commonest); per period, one vectorised comparison of
   the tokens with themselves shifted finds the maximal runs. Runs are taken greedily, the one covering the most
   nodes first (ties: the shorter period, then the earlier start); a run that overlaps one already taken is cut
   to its free stretches, which compete again. A taken run may then start earlier by up to one unit (P <=
   256): its first repetition may take its inputs from before the run (None, a leaf, a hub or an earlier
   node) wherever the later repetitions take them from the repetition before, so `h = f(h)` for N steps from
   a fresh `h` folds into N repetitions, not N - 1 and a remainder. Each run becomes one group: its nodes and
   the leaves only they use. Its unit (the second repetition, which is like all later ones) is described by
   the same rule, so nested repeats show as `(a · b) × 12` inside a label.
4. **Chains.** Among the nodes left, a link parent -> child joins them when it is the parent's only edge to a
   node that is not a shared leaf and the child's only user; chains of three or more nodes become one group.

Everything is near-linear: tokens, candidate periods and runs are numpy passes over the sequence (64 of them at
most per sequence), and a unit's description is made once per distinct token sequence.

Imports numpy and the tracer only; no renderer, no UI. Nothing recurses on the graph's depth; a repeat's
description recurses on its nesting, which is at most log2(nodes) deep (a nested unit is at most half its
parent's).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from agdb.tracer.store.trace import Trace
from agdb.tracer.views.selection import edges

MIN_CHAIN = 3
"""Chains shorter than this stay unfolded: folding two nodes into a summary hides more than it saves."""
HUB_USERS = 3
"""A node with this many users or more is a hub: an edge to it is told by its name, not its distance."""
PREVIOUS = 8
"""Candidate periods: distances to this many previous nodes of the same token."""
MAX_PERIODS = 64
"""At most this many candidate periods per sequence, the commonest distances."""
MAX_SHIFT = 256
"""Runs with a longer unit do not try an earlier start (the check costs the unit's length squared)."""


@dataclass(frozen=True, eq=False)
class Repeat:
    """`count` repetitions of one unit folded into one box.

    `unit` is one repetition in sequence order: a node, or a nested repeat. It is the second repetition, which
    all later ones are like; the first may take its inputs from before the run.
    """

    count: int
    unit: tuple[int | Repeat, ...]
    period: int  # sequence nodes per repetition (nested repeats counted in full, leaves not)


@dataclass(frozen=True)
class Folding:
    """Shown nodes grouped: group g holds `members[starts[g]:starts[g+1]]`; a group of one node is a plain box,
    a group in `repeats` a folded repeat, any other a linear chain, in chain order."""

    group_of: np.ndarray  # per node: its group, or -1 when not shown
    members: np.ndarray
    starts: np.ndarray
    repeats: Mapping[int, Repeat] = field(default_factory=dict)

    @property
    def num_groups(self) -> int:
        """How many boxes the picture draws."""
        return len(self.starts) - 1

    def group(self, g: int) -> np.ndarray:
        """The nodes of group `g`."""
        return self.members[self.starts[g]:self.starts[g + 1]]


def no_folding(nodes: np.ndarray, num_nodes: int) -> Folding:
    """Every shown node (`nodes`: distinct, ascending) in a group of its own."""
    members = np.asarray(nodes, dtype=np.int64)
    if len(members) == num_nodes:  # every node: node v is group v, as `members` already says
        return Folding(members, members, np.arange(len(nodes) + 1, dtype=np.int64))
    group_of = np.full(num_nodes, -1, dtype=np.int64)
    group_of[nodes] = np.arange(len(nodes))
    return Folding(group_of, members, np.arange(len(nodes) + 1, dtype=np.int64))


def fold(trace: Trace, nodes: np.ndarray, codes: np.ndarray | None = None, repeats: bool = True) -> Folding:
    """Fold the shown `nodes` (distinct, ascending) by the module's rule.

    Args:
        codes: each node's state code at the step (node_states.STATES); repetitions must agree on it, so a
            picture mid-backward keeps the running node and the done and waiting stretches apart.
        repeats: False folds only chains (and shares leaves), as the rule's steps 1 and 4.
    """
    g = _Graph(trace, np.asarray(nodes, dtype=np.int64), codes)
    runs: list[tuple[int, int, int, Repeat]] = []
    if repeats and len(g.seq) >= 4:
        finder = _Runs(g)
        runs = [(s, p, k, finder.repeat(s, p, k)) for s, p, k in finder.find(0, len(g.seq))]
    return _groups(g, runs)


# -- the graph as folding sees it ---------------------------------------------------------------------------
_LEAF, _HUB, _CUT, _BACK = 1, 2, 3, 4
"""Where a next edge goes: a leaf, a hub, a node not shown, a node back along the sequence (None edges are
not in the trace's edge columns: a slot without an edge is simply missing)."""


class _Graph:
    """The shown nodes' edges, leaves, sequence and tokens."""

    def __init__(self, trace: Trace, nodes: np.ndarray, codes: np.ndarray | None) -> None:
        n = trace.num_nodes
        c = trace.columns
        self.n, self.nodes = n, nodes
        self.shown = np.zeros(n, dtype=bool)
        self.shown[nodes] = True
        parent, child, slot, input_nr = edges(trace)
        self.is_leaf = np.bincount(parent, minlength=n) == 0
        mine = self.shown[parent]
        parent, child, slot, input_nr = parent[mine], child[mine], slot[mine], input_nr[mine]
        inner = self.shown[child]
        self.parent, self.child = parent[inner], child[inner]  # edges between shown nodes
        self.users = np.bincount(self.child, minlength=n)
        self.is_shared = self.shown & self.is_leaf & (self.users >= 2)
        self.seq = nodes[~self.is_leaf[nodes]]
        self.pos = np.full(n, -1, dtype=np.int64)
        self.pos[self.seq] = np.arange(len(self.seq))
        self._tokens(c, codes, parent, child, slot, input_nr)

    def _tokens(self, c: dict, codes: np.ndarray | None, parent: np.ndarray, child: np.ndarray, slot: np.ndarray,
                input_nr: np.ndarray) -> None:
        """Per sequence node its token (`tok`), and the parts the earlier-start check compares (`base`, and
        per edge from a sequence node its slot, kind, code and target position, grouped by node)."""
        names = np.asarray(c["node_name"], dtype=np.int64)
        seq = self.seq
        slots = np.diff(np.asarray(c["node_edge_start"], dtype=np.int64))
        state = np.zeros(len(seq), dtype=np.int64) if codes is None else np.asarray(codes, np.int64)[seq]
        self.base = _mix(_mix(_mix(names[seq]) ^ state.astype(np.uint64)) ^ slots[seq].astype(np.uint64))
        # Edges from shown nodes, which are sequence nodes (leaves have none), in node order, then slot order, as
        # the trace lists them: so a node's edges are one slice, and its token sums them.
        kind = np.full(len(child), _BACK, dtype=np.int64)
        kind[~self.shown[child]] = _CUT
        kind[self.shown[child] & (self.users[child] >= HUB_USERS)] = _HUB
        kind[self.is_leaf[child]] = _LEAF
        target = np.where(kind == _BACK, self.pos[child], -1)
        what = np.where(kind == _BACK, self.pos[parent] - target, names[child])
        code = _mix(_mix(_mix(kind.astype(np.uint64)) ^ what.astype(np.uint64)) ^ input_nr.astype(np.uint64))
        value = _mix(code ^ _mix(slot.astype(np.uint64) + np.uint64(7)))
        counts = np.bincount(self.pos[parent], minlength=len(seq))
        ends = np.cumsum(counts)
        sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(value, dtype=np.uint64)])
        with np.errstate(over="ignore"):
            self.tok = self.base + (sums[ends] - sums[ends - counts])
        self.edge_start = np.concatenate([[0], ends])
        self.edge_slot, self.edge_kind, self.edge_code, self.edge_target = slot, kind, code, target

    def edges_at(self, p: int) -> dict[int, tuple[int, int, int]]:
        """Sequence node p's edges by slot: (kind, code, target position or -1)."""
        lo, hi = int(self.edge_start[p]), int(self.edge_start[p + 1])
        return {s: (k, cd, t) for s, k, cd, t in zip(self.edge_slot[lo:hi].tolist(), self.edge_kind[lo:hi].tolist(),
                                                     self.edge_code[lo:hi].tolist(), self.edge_target[lo:hi].tolist(),
                                                     strict=True)}


_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 of each value: tokens are sums and xors of these, so equal parts give equal tokens and a
    collision needs two 64-bit values to meet by chance."""
    with np.errstate(over="ignore"):
        x = np.asarray(x).astype(np.uint64) + _GOLD
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


# -- repeats ------------------------------------------------------------------------------------------------
class _Runs:
    """Finds the runs of a stretch of the sequence (step 3 of the rule) and describes their units."""

    def __init__(self, g: _Graph) -> None:
        self.g = g
        self._described: dict[bytes, tuple] = {}  # a unit's token bytes -> its runs, relative to its start

    def find(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """The runs taken in positions lo..hi-1: (start, period, count), by start."""
        tok = self.g.tok[lo:hi]
        heap = [(-(span // p) * p, p, lo + a, span) for p in _periods(tok) for a, span in _spans(tok, p)]
        heapq.heapify(heap)
        free = np.ones(hi - lo, dtype=bool)
        taken = []
        while heap:
            _, p, a, span = heapq.heappop(heap)
            here = free[a - lo:a - lo + span]
            if here.all():
                start = self._earliest(a, p, lo, free)
                count = (a + span - start) // p
                free[start - lo:start - lo + count * p] = False
                taken.append((start, p, count))
                continue
            for s, e in _true_runs(here):  # cut to the free stretches, which compete again
                if e - s >= 2 * p:
                    heapq.heappush(heap, (-((e - s) // p) * p, p, a + s, e - s))
        return sorted(taken)

    def _earliest(self, a: int, p: int, lo: int, free: np.ndarray) -> int:
        """The earliest start in a - p .. a (not before lo, over free positions) whose first repetition
        matches the second but for inputs from before the run."""
        if p > MAX_SHIFT:
            return a
        g = self.g
        first = max(a - p, lo)
        unlike = np.flatnonzero(g.base[first:a] != g.base[first + p:a + p])  # names or states differ: no start
        for s in range(first + (int(unlike[-1]) + 1 if len(unlike) else 0), a):  # at or before these
            if free[s - lo:a - lo].all() and all(self._first_like(x, p, s) for x in range(s, a)):
                return s
        return a

    def _first_like(self, x: int, p: int, s: int) -> bool:
        """Whether sequence node x, in the first repetition of a run starting at s, is like x + p: the same but
        where x + p's edge goes back before s + p (to the repetition before), x's may come from anywhere before
        the run (no edge, a leaf, a hub, a node not shown, or a node before s)."""
        g = self.g
        y = x + p
        if g.base[x] != g.base[y]:
            return False
        ex, ey = g.edges_at(x), g.edges_at(y)
        for slot in ex.keys() | ey.keys():
            a, b = ex.get(slot), ey.get(slot)
            if b is not None and b[0] == _BACK and b[2] < s + p:
                if a is not None and a[0] == _BACK and a[2] >= s:
                    return False
            elif a is None or b is None or a[1] != b[1]:
                return False
        return True

    def repeat(self, start: int, p: int, count: int) -> Repeat:
        """The Repeat of a run: its unit is the second repetition, described by the same rule."""
        unit_lo = start + p
        return Repeat(count, self._items(unit_lo, unit_lo + p), p)

    def _items(self, lo: int, hi: int) -> tuple[int | Repeat, ...]:
        """Positions lo..hi-1 as nodes and nested repeats (made once per distinct token sequence)."""
        key = self.g.tok[lo:hi].tobytes()
        runs = self._described.get(key)
        if runs is None:
            found = self.find(lo, hi) if hi - lo >= 4 else []
            runs = self._described[key] = tuple((s - lo, p, k) for s, p, k in found)
        out: list[int | Repeat] = []
        at = lo
        for rel, p, k in runs:
            out.extend(self.g.seq[at:lo + rel].tolist())
            out.append(self.repeat(lo + rel, p, k))  # nested: at most log2(hi - lo) deep
            at = lo + rel + p * k
        out.extend(self.g.seq[at:hi].tolist())
        return tuple(out)


def _periods(tok: np.ndarray) -> list[int]:
    """Candidate periods of a token sequence: distances from each position to its PREVIOUS previous
    positions of the same token, from 2 to half the length, the MAX_PERIODS commonest (ties: the shorter)."""
    n = len(tok)
    order = np.argsort(tok, kind="stable")
    ordered = tok[order]
    found = []
    for k in range(1, min(PREVIOUS, n - 1) + 1):
        same = ordered[k:] == ordered[:-k]
        found.append(order[k:][same] - order[:-k][same])
    d = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    d = d[(d >= 2) & (d <= n // 2)]
    if not len(d):
        return []
    counts = np.bincount(d)
    seen = np.flatnonzero(counts)
    best = seen[np.lexsort((seen, -counts[seen]))][:MAX_PERIODS]
    return sorted(best.tolist())


def _spans(tok: np.ndarray, p: int) -> list[tuple[int, int]]:
    """The maximal stretches (start, length) of period p holding at least two units, whose unit is not a
    repetition of a shorter one."""
    out = []
    for s, e in _true_runs(tok[:-p] == tok[p:]):
        if e - s >= p and _is_primitive(tok[s:s + p]):
            out.append((s, e - s + p))
    return out


def _true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each maximal stretch of True."""
    d = np.diff(mask.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist(), strict=True))


def _is_primitive(unit: np.ndarray) -> bool:
    """Whether `unit` is not a shorter unit repeated (checked for each prime factor of its length)."""
    p = len(unit)
    for q in _prime_factors(p):
        d = p // q
        if np.array_equal(unit[d:], unit[:-d]):
            return False
    return True


def _prime_factors(n: int) -> list[int]:
    out, f = [], 2
    while f * f <= n:
        if n % f == 0:
            out.append(f)
            while n % f == 0:
                n //= f
        f += 1
    if n > 1:
        out.append(n)
    return out


# -- groups -------------------------------------------------------------------------------------------------
def _groups(g: _Graph, runs: list[tuple[int, int, int, Repeat]]) -> Folding:
    """Repeats (with the leaves only they use) as groups, then chains among the other shown nodes."""
    n = g.n
    block = np.full(n, -1, dtype=np.int64)
    for r, (s, p, k, _) in enumerate(runs):
        block[g.seq[s:s + p * k]] = r
    # A leaf with one user goes with its user's repeat.
    single = g.is_leaf[g.child] & (g.users[g.child] == 1)
    leaf, owner = g.child[single], block[g.parent[single]]
    block[leaf[owner >= 0]] = owner[owner >= 0]
    rest = g.shown & (block < 0)
    # Chains among the rest: a link is the parent's only edge to a node that is not a shared leaf, and the
    # child's only user.
    counted = ~g.is_shared[g.child]
    children = np.bincount(g.parent[counted], minlength=n)
    linked = rest[g.parent] & rest[g.child] & (children[g.parent] == 1) & (g.users[g.child] == 1) & counted
    next_in_chain = np.full(n, -1, dtype=np.int64)
    next_in_chain[g.parent[linked]] = g.child[linked]
    has_prev = np.zeros(n, dtype=bool)
    has_prev[g.child[linked]] = True
    follow = next_in_chain.tolist()
    flat: list[int] = []
    sizes: list[int] = []
    for head in g.nodes[rest[g.nodes] & ~has_prev[g.nodes]].tolist():  # one pass over the nodes: no recursion
        chain = [head]
        nxt = follow[head]
        while nxt >= 0:
            chain.append(nxt)
            nxt = follow[nxt]
        flat.extend(chain)
        sizes.extend([len(chain)] if len(chain) >= MIN_CHAIN else [1] * len(chain))
    repeats = {}
    if runs:  # each repeat: its sequence nodes in order, then its leaves
        mine = np.flatnonzero(block >= 0)
        is_leaf = g.pos[mine] < 0
        by_run = mine[np.lexsort((np.where(is_leaf, mine, g.pos[mine]), is_leaf, block[mine]))]
        flat.extend(by_run.tolist())
        first = len(sizes)
        sizes.extend(np.bincount(block[mine], minlength=len(runs)).tolist())
        repeats = {first + r: rep for r, (_, _, _, rep) in enumerate(runs)}
    starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    starts[1:] = np.cumsum(sizes)
    members = np.asarray(flat, dtype=np.int64)
    group_of = np.full(n, -1, dtype=np.int64)
    group_of[members] = np.repeat(np.arange(len(sizes)), sizes)
    return Folding(group_of, members, starts, repeats)
