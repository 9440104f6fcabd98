"""Walking the graph of a backward call from its roots (no recursion): each node's key (NOTE [node identity]), its
edges and input count, the bridge's hooks on it, and its facts for the builder; and the walks kept for a retained
graph's next backward.

NOTE [node identity]
torch hands out a fresh Python wrapper for a node whenever it is read, and the wrappers are not weak-
referenceable, so a node is known by what does not change: its (thread, seq_nr) for nodes that took a number,
its leaf tensor (held weakly) for AccumulateGrad, as long as that node lives. A leaf has one AccumulateGrad at a
time, but a new one once the last died (a training loop that frees each step's graph before the next forward
makes one per step): the node's pre-hook dict, which dies with the node and which the bridge refers to weakly,
tells (`acc_alive`). Within one walk the wrappers are held, so two nodes that share a seq_nr
(`_set_sequence_nr`) still get two keys. No wrapper outlives the call that read it.

Loaded through bridge.py only (the nodes it walks are torch's); never imports textual or rich.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from array import array
from typing import Any

import numpy as np

from agdb.tracer.recording.builder import Bump, NodeFacts
from agdb.tracer.sources.torch.columns import Edges, SeqNrs
from agdb.tracer.sources.torch.forward import Forward
from agdb.tracer.sources.torch.hooks import LEAN, Hooks
from agdb.tracer.sources.torch.model import Graph
from agdb.tracer.sources.torch.naming import LeafNames
from agdb.tracer.sources.torch.state import NODE, BridgeState, ThreadState
from agdb.tracer.store.schema import UINT64_MAX

_new = tuple.__new__  # NodeFacts made without its class's Python-level __new__ (NOTE [builder fast path])
_chain = itertools.chain.from_iterable


def _flat(edges: tuple) -> tuple:
    """A node's next edges as the builder stores them, flat; a node with one edge shares the walk's pair (a deep
    chain's nodes all have one)."""
    return edges[0] if len(edges) == 1 else tuple(_chain(edges))
UNNUMBERED = -1
"""What the witness holds for a node with no seq_nr and no leaf, such as torch::autograd::Error (witness_key)."""


class Walk:
    """What one walk found: each node's key by its wrapper, the graph, and the nodes it hooked.

    torch's node wrappers hash and compare by identity, so `key_of` is keyed by the wrapper itself (an id() would be an
    int of its own per node, 32 B): it holds the wrappers, so each names one node for as long as the walk is kept
    (NOTE [node identity])."""

    def __init__(self, seq_nrs: SeqNrs) -> None:
        self.key_of: dict[Any, int] = {}
        self.graph = Graph(seq_nrs, {}, {})  # its edges are Edges.of what the walk found (Walker._walk_into)
        self.hooked: list = []  # the nodes this walk hooked: key, pre-hook dict, ... (NOTE [hooked nodes] in hooks.py)


class Walker:
    """Walks graphs, gives nodes their keys (NOTE [node identity]) and describes them to the builder."""

    def __init__(self, shared: BridgeState, hooks: Hooks, forward: Forward, leaf_names: LeafNames) -> None:
        self.shared = shared
        self.b = shared.b
        self.raw = shared.raw
        self._keys = shared.keys
        self._seq_keys = shared.seq_keys
        self._acc_keys = shared.acc_keys
        self._acc_alive = shared.acc_alive
        self._is_acc = shared.is_acc
        self._unnamed = shared.unnamed
        self._type_names = shared.type_names
        self._handles = shared.handles
        self._hook = hooks.hook
        self._gap = forward.gap
        self._leaf_name = leaf_names.leaf_name
        # Whether the trace has a key's edges, indexed by key (1 B a key): an increment writes a node's facts with
        # none (its edges are not known then); the first walk that meets it writes them (describe).
        self._described = bytearray()
        self._seq_nrs = shared.seq_nrs
        self._walks: dict[tuple, Graph] = {}  # (thread row, start nodes' keys) -> the graph walked from them

    # -- the graph -----------------------------------------------------------------------------------------------
    def walk(self, state: ThreadState, nodes: list) -> Walk:
        """Every node reachable from `nodes`, in one pass: keys, edges, hooks, and facts for nodes new to the trace."""
        walk = Walk(self._seq_nrs)
        new: list = []  # flat: node, key, node, key, ... (not a tuple a node: a million-node walk's)
        LEAN.thread = threading.get_ident()
        try:
            self._walk_into(state, walk, nodes, new)
        finally:
            LEAN.thread = None
        self.describe(new, walk.graph, state)
        del new
        return walk

    def _walk_into(self, state: ThreadState, walk: Walk, nodes: list, new: list) -> None:
        row = state.row
        key_of = walk.key_of
        graph = walk.graph
        seqs, edges_of, inputs_of = graph.seq, {}, graph.num_inputs
        seq_col = seqs.col  # written in place (grown by seqs.grow, which extends it)
        one_key, one_child, one_nr = array("q"), array("q"), array("q")  # the nodes with one next edge (Edges)
        used: set[int] = set()
        stack = []
        key_fn, hook, described, hooked = self.key, self._hook, self._described, walk.hooked
        mode = self.shared.mode or self.shared.line_mode  # a custom Function's backward runs with it
        for n in nodes:
            if n is not None and n not in key_of:
                key, seq = key_fn(n, row, used)
                key_of[n] = key
                seqs[key] = seq
                stack.append((n, key))
        while stack:
            n, key = stack.pop()
            edges = []
            for c, nr in n.next_functions:
                if c is None:
                    edges.append((0, nr))
                    continue
                ck = key_of.get(c)
                if ck is None:
                    ck, cseq = key_fn(c, row, used)
                    key_of[c] = ck
                    if ck >= len(seq_col):
                        seqs.grow(ck)
                    seq_col[ck] = cseq
                    stack.append((c, ck))
                edges.append((ck, nr))
                if nr and inputs_of.get(ck, 1) <= nr:  # only counts above 1: a deep graph's nodes mostly have one
                    inputs_of[ck] = nr + 1
            if len(edges) == 1:
                one_key.append(key)
                one_child.append(edges[0][0])
                one_nr.append(edges[0][1])
            else:
                edges_of[key] = tuple(edges)
            hook(n, key, state, hooked, mode)
            if key >= len(described) or not described[key]:
                new += n, key
        walk.graph = Graph(seqs, Edges.of(edges_of, one_key, one_child, one_nr), inputs_of)

    def describe(self, new: list, graph: Graph, state: ThreadState) -> None:
        """Node facts for nodes the trace has not described yet: their edges, input count and real name (an increment
        wrote a guess, or `?`). While a reconstruction is pending (a backward call in progress: a reentrant one's
        walk; or calls deferred), a node the trace does not have yet is logged, to be made in its place (node)."""
        b, row = self.b, state.row
        pending = state.log if state.log or state.calls else None
        facts_of, bumps, unnamed, type_names = self.raw.node_facts, self.raw.bumps, self._unnamed, self._type_names
        packed = self.raw.nodes.present  # NOTE [packed node facts]: those facts are rewritten together, below
        keys, names, flats = [], [], []
        described = self._described
        if new:
            top = max(itertools.islice(new, 1, None, 2)) + 1
            if top > len(described):
                described.extend(bytes(max(top - len(described), len(described))))
        seq_col, edges_of, inputs_of = graph.seq.col, graph.edges, graph.num_inputs
        if isinstance(edges_of, Edges):  # read inline below
            one_child, one_nr, base, other = edges_of.child, edges_of.nr, edges_of.base, edges_of.other
        else:  # a small graph's dict
            one_child, one_nr, base, other = (), (), 0, edges_of
        pairs = iter(new)
        for n, key in zip(pairs, pairs, strict=True):
            name = type_names.get(type(n))
            if name is None:
                name = type_names[type(n)] = n.name()
            bump = bumps.get(key)
            if bump is not None and bump.name != name:
                bumps[key] = _new(Bump, (name, bump.seq_nr, bump.frame))
            unnamed.discard(key)
            described[key] = 1
            old = facts_of.get(key)
            seq = seq_col[key]
            if old is not None or key < len(packed) and packed[key]:
                # Made while recording: its name and edges now; its creation step, thread and line as they were.
                # The fields of TraceBuilder.node, written here (a walk's edges are already (key or 0, int) pairs);
                # node() writes them the same way for a node described from the log. The edges flat, as _flat makes
                # them, read from the graph's Edges inline (a call per node costs the walk).
                i = key - base
                if 0 <= i < len(one_child) and one_child[i] >= 0:
                    flat = (one_child[i], one_nr[i])
                else:
                    edges = other[key]
                    flat = edges[0] if len(edges) == 1 else tuple(_chain(edges))
                if old is None:  # packed: its seq_nr and input count are read below, for all at once
                    keys.append(key)
                    names.append(name)
                    flats.append(flat)
                    continue
                if old.seq_nr == seq:  # the increment's int: not a second one per node
                    seq = old.seq_nr
                facts_of[key] = _new(NodeFacts, (name, seq, 0, "cpu", old.thread, flat, old.frame, old.step,
                                                 inputs_of.get(key, 1)))
            elif pending is not None:  # after what the log holds (its increment may be there)
                pending.append((NODE, state, key, name, seq, edges_of[key], inputs_of.get(key, 1)))
            else:  # met first by a walk (an AccumulateGrad, or a node made before recording)
                b.node_created(thread=row, node=key, name=name, seq_nr=seq, topological_nr=0,
                               next_edges=edges_of[key], num_inputs=inputs_of.get(key, 1))
        if keys:
            seqs = np.frombuffer(seq_col, dtype=np.uint64)[np.asarray(keys, dtype=np.int64)]
            self.raw.nodes.write(keys, name=names, seq_nr=seqs, topological_nr=0, device="cpu", next_edges=flats,
                                 num_inputs=list(map(inputs_of.get, keys, itertools.repeat(1))))

    def node(self, state: ThreadState, frame: int, key: int, name: str, seq: int, edges: tuple,
             num_inputs: int) -> None:
        """A node a walk met while a reconstruction was pending, in its place: made now if no increment of the log
        made it (an AccumulateGrad), else given its edges and real name. A numbered node whose increment nobody
        saw (hooks that push no mode: values=False) takes it here first, as a gap. The writes are describe's
        per-node ones, which that loop keeps inline: a call per node there costs the 100k wide graph's
        registration 4-7% (a 10 µs/node target it sits just under)."""
        b, raw = self.b, self.raw
        if seq != UINT64_MAX and seq >= state.rlast and key not in raw.nodes:
            self._gap(state, seq + 1, frame)
        facts = raw.nodes.get(key)
        if facts is None:
            b.node_created(thread=state.row, node=key, name=name, seq_nr=seq, topological_nr=0, next_edges=edges,
                           num_inputs=num_inputs)
            return
        raw.node_facts[key] = _new(NodeFacts, (name, seq, facts.topological_nr, facts.device, facts.thread,
                                               _flat(edges), facts.frame, facts.step, num_inputs))
        bump = raw.bumps.get(key)
        if bump is not None and bump.name != name:
            raw.bumps[key] = bump._replace(name=name)
        self._unnamed.discard(key)

    # -- node identity -------------------------------------------------------------------------------------------
    def key(self, n: Any, row: int, used: set[int]) -> tuple[int, int]:
        """(key, seq_nr) of a node (NOTE [node identity]), made if it has none; `used` holds the keys the walk gave,
        so that two nodes with one seq_nr get two."""
        seq = n._sequence_nr()
        if seq == UINT64_MAX:
            var = getattr(n, "variable", None)
            if var is None:
                return next(self._keys), seq  # an Error node: no number, no leaf
            known = self._acc_keys.get(id(var))
            if known is not None and known[0]() is var:
                alive = self._acc_alive.get(known[1])
                if alive is None or alive() is not None:  # the same node (NOTE [node identity])
                    return known[1], seq
                del self._acc_alive[known[1]]  # that one died: this leaf's new one takes its place
            key = next(self._keys)
            self._acc_keys[id(var)] = (weakref.ref(var), key)
            self._is_acc.add(key)
            self._leaf_name(key, var)
            return key, seq
        keys = self._seq_keys[row]
        key = keys.get(seq)
        if key is None or key in used:
            key = next(self._keys)
            keys.setdefault(seq, key)
        used.add(key)
        return key, seq

    def lookup(self, n: Any, row: int) -> int:
        """The key a walk gave node `n` (0 if none did), making none (NOTE [node identity])."""
        seq = n._sequence_nr()
        if seq != UINT64_MAX:
            return self._seq_keys[row].get(seq, 0)
        var = getattr(n, "variable", None)
        known = self._acc_keys.get(id(var)) if var is not None else None
        return known[1] if known is not None and known[0]() is var else 0

    def witness_key(self, n: Any, row: int) -> int:
        """`lookup`, for a node of torch's execution order (NOTE [witness] in backward.py): a node with no number
        and no leaf (an Error node) has no identity a later read can find (NOTE [node identity]), so it is
        UNNUMBERED, which the comparison matches with an unnumbered node the model popped in its place."""
        key = self.lookup(n, row)
        if key == 0 and n._sequence_nr() == UINT64_MAX and getattr(n, "variable", None) is None:
            return UNNUMBERED
        return key

    def leaf_key(self, leaf: Any) -> int | None:
        """The key of the AccumulateGrad a walk met for `leaf`, or None."""
        known = self._acc_keys.get(id(leaf))
        return known[1] if known is not None and known[0]() is leaf else None

    # -- walks kept ----------------------------------------------------------------------------------------------
    def cached(self, state: ThreadState, starts: list) -> Graph | None:
        """The graph a former call walked from the same nodes, while they live (a live node keeps everything below
        it alive and unchanged): a second backward over a retained graph does not walk it again."""
        keys = tuple(self.key(n, state.row, set())[0] for n in starts)
        found = self._walks.get((state.row, keys))  # per thread: the hooks log into the walking thread's log
        if found is None:
            return None
        for key in keys:
            ref = self._handles.get(key)
            if ref is None or ref() is None:
                del self._walks[(state.row, keys)]
                return None
        return found

    def remember(self, state: ThreadState, starts: list, key_of: dict, graph: Graph) -> None:
        """Keep the walk of a retained graph, for the next backward over it (cached)."""
        if len(self._walks) >= 64:  # forget the walks of graphs that are gone
            for row, keys in list(self._walks):
                if any(self._handles.get(k) is None or self._handles[k]() is None for k in keys):
                    del self._walks[(row, keys)]
        self._walks[(state.row, tuple(key_of[n] for n in starts))] = graph

    def forget(self) -> None:
        """Forget every walk kept, and the leaves' AccumulateGrads (the recording ended)."""
        self._walks.clear()
        self._acc_keys.clear()
