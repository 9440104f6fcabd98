"""tracer.views.folding: repeated blocks fold into one box `× N`, shared leaves are drawn once, chains as before.

Expected counts come from the trace's own node table (names in creation order, next edges), or from how the
program was written (so many steps, so many layers); never from tracer.views.folding itself. The programs run on
agdb's engine under `tracer.record()`; the 25,000-step loop is built with `TraceBuilder` (recording it takes
seconds), after a short recorded loop checked that the hand-built graph is the engine's.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agdb import engine, tracer
from agdb.tracer import TraceBuilder
from agdb.tracer.replay.node_states import node_states
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store.schema import UINT64_MAX, short_name
from agdb.tracer.views.dot import picture
from agdb.tracer.views.folding import Repeat, fold
from agdb.tracer.views.graph_model import backward_graph, final_states
from agdb.tracer.views.model import piece_text
from agdb.tracer.views.selection import edges, focus_nodes
from bench import fold_programs
from tests.strategies import programs
from tests.tracer.programs import run_program


# -- programs -------------------------------------------------------------------------------------------------
def record(program, *args):
    with tracer.record() as rec:
        program(engine, *args)
    return rec.trace


def mlp_forward(torch, activations):
    """One forward and backward of Linear layers of width 8, each followed by the activation named in
    `activations` ("relu", "tanh"), then a last Linear (4 classes) and CrossEntropyLoss."""
    nn = torch.nn
    torch.manual_seed(0)
    parts = []
    for a in activations:
        parts += [nn.Linear(8, 8), nn.ReLU() if a == "relu" else nn.Tanh()]
    model = nn.Sequential(*parts, nn.Linear(8, 4))
    loss = nn.CrossEntropyLoss()(model(torch.randn(5, 8)), torch.randint(0, 4, (5,)))
    loss.backward()


def loop_by_hand(steps):
    """The graph of fold_programs.rnn_loop(steps), node for node, as TraceBuilder nodes (no events)."""
    b = TraceBuilder()
    acc_w, acc_x = 2, 4  # numbered where the engine makes them: at the first step that uses each leaf
    key, h = 1, None
    for i in range(steps):
        mul, add, tanh = (1, 3, 5) if i == 0 else (key, key + 1, key + 2)
        b.node(mul, name="MulBackward0", seq_nr=3 * i, next_edges=[(h, 0), (acc_w, 0)])
        b.node(add, name="AddBackward0", seq_nr=3 * i + 1, next_edges=[(mul, 0), (acc_x, 0)])
        b.node(tanh, name="TanhBackward0", seq_nr=3 * i + 2, next_edges=[(add, 0)])
        key, h = tanh + 1, tanh
    for leaf in (acc_w, acc_x):
        b.node(leaf, name="torch::autograd::AccumulateGrad", seq_nr=UINT64_MAX)
    b.node(key, name="SumBackward0", seq_nr=3 * steps, next_edges=[(h, 0)])
    return b.finish()


# -- helpers --------------------------------------------------------------------------------------------------
def names(trace):
    return [short_name(trace.node(i).name) for i in range(trace.num_nodes)]


def nodes_named(trace, name):
    """The nodes called `name`, in creation (node) order."""
    return [i for i, n in enumerate(names(trace)) if n == name]


def graph_edges(trace):
    return list(zip(*(a.tolist() for a in edges(trace)[:2]), strict=True))


def repeats_by_first(folding):
    """The repeat groups as (group, Repeat), ordered by their first node."""
    return sorted(folding.repeats.items(), key=lambda kv: int(folding.group(kv[0])[0]))


def unit_names(trace, rep):
    """One repetition's items as text: a name, or `(...) × k` for a nested repeat."""
    return [f"({' '.join(unit_names(trace, i))}) × {i.count}" if isinstance(i, Repeat)
            else short_name(trace.node(i).name) for i in rep.unit]


def assert_every_edge_drawn(trace, model, folding):
    """Each edge between two groups is counted in exactly one arrow between their boxes (labels `×k` count k,
    others 1), and the arrows count nothing else; the rest lie inside one box."""
    ids = [b.id(i) for b in model.nodes for i in range(len(b))]
    box_of_group = {int(folding.group_of[b.node[i]]): b.id(i)
                    for b in model.nodes if b.kind in ("node", "chain", "repeat") for i in range(len(b))}
    want: dict[tuple[str, str], int] = {}
    inside = 0
    for p, c in graph_edges(trace):
        gp, gc = int(folding.group_of[p]), int(folding.group_of[c])
        if gp == gc:
            inside += 1
        else:
            pair = (box_of_group[gp], box_of_group[gc])
            want[pair] = want.get(pair, 0) + 1
    got: dict[tuple[str, str], int] = {}
    for e in model.edges:
        if e.kind != "next":
            continue
        for i, (t, h) in enumerate(zip(e.tail.tolist(), e.head.tolist(), strict=True)):
            label = "".join(piece_text(p, i) for p in e.label)
            m = re.fullmatch(r"×(\d+)", label)
            got[(ids[t], ids[h])] = got.get((ids[t], ids[h]), 0) + (int(m[1]) if m else 1)
    assert got == want
    assert inside + sum(got.values()) == len(graph_edges(trace))


# -- tests ----------------------------------------------------------------------------------------------------
def test_hand_built_loop_is_the_engines():
    """The hand-built loop graph has the recorded loop's names and next edges, node for node."""
    recorded, hand = record(fold_programs.rnn_loop, 20), loop_by_hand(20)
    assert names(recorded) == names(hand)
    assert [recorded.node(i).next_edges for i in range(recorded.num_nodes)] == \
        [hand.node(i).next_edges for i in range(hand.num_nodes)]


def test_loop_folds_into_one_repeat_of_every_step():
    """A 40-step loop h = tanh(h * w + x): one repeat `× 40` of Mul · Add · Tanh holding every step's nodes
    (the first step's h is no node: its inputs come from before the run), the two shared leaves drawn once
    with one arrow each counting all 40 edges, and SumBackward0: 4 boxes."""
    t = record(fold_programs.rnn_loop, 40)
    folding = fold(t, np.arange(t.num_nodes))
    [(g, rep)] = folding.repeats.items()
    steps = nodes_named(t, "TanhBackward0")
    assert rep.count == len(steps) == 40 and rep.period == 3
    assert unit_names(t, rep) == ["MulBackward0", "AddBackward0", "TanhBackward0"]
    in_steps = set(nodes_named(t, "MulBackward0") + nodes_named(t, "AddBackward0") + steps)
    assert set(folding.group(g).tolist()) == in_steps
    model = backward_graph(t, collapse=True)
    assert model.num_boxes == folding.num_groups == 4
    assert_every_edge_drawn(t, model, folding)
    [block] = [b for b in model.nodes if b.kind == "repeat"]
    assert block.label_text(0).split("\n")[:2] == ["× 40: 3 nodes each", "MulBackward0 · AddBackward0 · TanhBackward0"]
    users = {leaf: sum(1 for _, c in graph_edges(t) if c == leaf) for leaf in nodes_named(t, "AccumulateGrad")}
    assert sorted(users.values()) == [40, 40]
    assert model.num_arrows == 3  # Sum -> block, block -> each leaf


def test_25000_step_loop_folds_to_four_boxes():
    """The issue's 25,000-step loop (75,003 nodes): fewer than 10 boxes, namely 4: one repeat × 25,000, the shared
    weight's and input's AccumulateGrads, SumBackward0. (Chains alone fold it too, as one 75,001-node chain,
    since edges to shared leaves do not break chains; the repeat says what repeats, and how often.)"""
    t = loop_by_hand(25_000)
    everything = np.arange(t.num_nodes)
    assert t.num_nodes == 75_003
    assert np.diff(fold(t, everything, repeats=False).starts).tolist() == [1, 1, 75_001]
    folding = fold(t, everything)
    assert folding.num_groups == 4 < 10
    [rep] = folding.repeats.values()
    assert rep.count == len(nodes_named(t, "TanhBackward0")) == 25_000


def test_mlp_layers_fold_with_their_own_leaves():
    """A 6-layer MLP (5 Linear+ReLU, then Linear): the first five layers fold into `× 5` of T · Addmm · Relu,
    with their own 10 AccumulateGrads inside; the last layer and the loss stay outside."""
    t = record(mlp_forward, ["relu"] * 5)
    folding = fold(t, np.arange(t.num_nodes))
    [(g, rep)] = folding.repeats.items()
    relus = nodes_named(t, "ReluBackward0")
    assert rep.count == len(relus) == 5
    assert unit_names(t, rep) == ["TBackward0", "AddmmBackward0", "ReluBackward0"]
    members = set(folding.group(g).tolist())
    layers = [i for i in range(t.num_nodes) if names(t)[i] in ("TBackward0", "AddmmBackward0")]
    assert members >= set(relus) | set(layers[:10]) and not members & set(layers[10:])
    own = [m for m in members if names(t)[m] == "AccumulateGrad"]
    assert len(own) == 10
    assert_every_edge_drawn(t, backward_graph(t, collapse=True), folding)


def test_irregular_layer_splits_the_repeat():
    """Linear+ReLU x4, Linear+Tanh, Linear+ReLU x3, Linear: `× 4`, the Tanh layer unfolded, `× 3`."""
    t = record(mlp_forward, ["relu"] * 4 + ["tanh"] + ["relu"] * 3)
    folding = fold(t, np.arange(t.num_nodes))
    reps = repeats_by_first(folding)
    assert [r.count for _, r in reps] == [4, 3]
    relus = nodes_named(t, "ReluBackward0")
    [tanh] = nodes_named(t, "TanhBackward0")
    first, second = (set(folding.group(g).tolist()) for g, _ in reps)
    assert set(relus[:4]) <= first and set(relus[4:]) <= second
    assert folding.group_of[tanh] not in folding.repeats
    assert max(first) < tanh < min(n for n in second if names(t)[n] != "AccumulateGrad")
    assert_every_edge_drawn(t, backward_graph(t, collapse=True), folding)


def test_training_steps_fold_with_layers_nested():
    """3 training steps of a 4-layer MLP: one repeat `× 3` whose unit holds `(T · Addmm · Relu) × 3`; each of
    the 8 parameters' AccumulateGrads (used by every step) is drawn once, with an arrow counting 3 edges."""
    t = record(fold_programs.mlp_training, 4, 3)
    folding = fold(t, np.arange(t.num_nodes))
    [(g, rep)] = folding.repeats.items()
    assert rep.count == 3 == len(nodes_named(t, "NllLossBackward0"))
    assert unit_names(t, rep) == ["(TBackward0 AddmmBackward0 ReluBackward0) × 3", "TBackward0", "AddmmBackward0",
                                  "LogSoftmaxBackward0", "NllLossBackward0"]
    leaves = nodes_named(t, "AccumulateGrad")
    assert len(leaves) == 8 and all(folding.group(folding.group_of[v]).tolist() == [v] for v in leaves)
    model = backward_graph(t, collapse=True)
    assert model.num_boxes == 9
    assert_every_edge_drawn(t, model, folding)
    assert "(TBackward0 · AddmmBackward0 · ReluBackward0) × 3" in next(
        b for b in model.nodes if b.kind == "repeat").label_text(0)


def test_non_repeating_graph_is_unchanged(small):
    """x.exp().sin().cos() * w holds no repeat and no shared leaf: folding gives the chain folding's groups, and
    with nothing to chain either (Sum -> Mul -> two leaves) every node keeps its own box."""
    t, _ = small
    everything = np.arange(t.num_nodes)
    with_repeats, chains_only = fold(t, everything), fold(t, everything, repeats=False)
    assert not with_repeats.repeats
    assert with_repeats.members.tolist() == chains_only.members.tolist()
    assert with_repeats.starts.tolist() == chains_only.starts.tolist()
    with tracer.record() as rec:
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        w = engine.tensor([3.0, 4.0], requires_grad=True)
        (x * w).sum().backward()
    plain = rec.trace
    assert fold(plain, np.arange(plain.num_nodes)).num_groups == plain.num_nodes == 4


def test_repeats_keep_the_states_of_a_step_apart():
    """Mid-backward of a 30-step loop, repetitions must share their states: the running node is in no repeat,
    and each repeat's nodes are in one state."""
    t = record(fold_programs.rnn_loop, 30)
    tanhs = nodes_named(t, "TanhBackward0")
    middle = next(e.step for e in t if type(e).__name__ == "NodeStarted" and e.node == tanhs[15])
    state = Replay(t).state_at(middle)
    model = backward_graph(t, step=middle, collapse=True, state=state)
    codes, _ = node_states(t, state)
    folding = fold(t, np.arange(t.num_nodes), codes)
    assert folding.group_of[tanhs[15]] not in folding.repeats
    assert len(folding.repeats) >= 2
    for g in folding.repeats:
        inner = [v for v in folding.group(g).tolist() if names(t)[v] != "AccumulateGrad"]
        assert len(set(codes[inner].tolist())) == 1
    assert_every_edge_drawn(t, model, folding)


@pytest.mark.parametrize("view", ["backward", "forward"])
def test_repeat_box_in_dot(view):
    """The DOT text draws the repeat once, as a 3-D box with its count, in either view."""
    p = picture(record(fold_programs.rnn_loop, 12), view=view, collapse=True)
    [line] = [ln for ln in p.dot.splitlines() if re.match(r"\s*repeat\d+ \[", ln)]
    assert "× 12: 3 nodes each" in line and "shape=box3d" in line and "agdb-repeat" in line
    assert ("mul · add · tanh" if view == "forward" else "MulBackward0 · AddBackward0 · TanhBackward0") in line


# -- properties -----------------------------------------------------------------------------------------------
def flat_names(trace, rep):
    """One repetition's node names, nested repeats spelled out."""
    out = []
    for item in rep.unit:
        out.extend(flat_names(trace, item) * item.count if isinstance(item, Repeat) else [names(trace)[item]])
    return out


def assert_repeats_honest(trace, folding, shown):
    """Each repeat holds `count` repetitions of its unit's names in node order, and from the second on, each
    node's next edges match the one a repetition earlier: to the node `period` sequence nodes on, to a leaf or
    a hub (3+ users) of the same name, to the same unshown node name, or none. The sequence: shown nodes with
    an edge to a node, in node order (the rule's step 2), worked out here from `Trace.node`."""
    infos = [trace.node(i) for i in range(trace.num_nodes)]
    is_leaf = [all(c is None for c, _ in info.next_edges) for info in infos]
    users = [0] * trace.num_nodes
    for i in shown:
        for c, _ in infos[i].next_edges:
            if c is not None and c in shown:
                users[c] += 1
    seq = [i for i in sorted(shown) if not is_leaf[i]]
    pos = {v: k for k, v in enumerate(seq)}

    def shape(v, k):
        c, nr = infos[v].next_edges[k]
        if c is None:
            return None
        if c not in shown or is_leaf[c] or users[c] >= 3:
            return ("named", names(trace)[c], nr)
        return ("back", pos[v] - pos[c], nr)

    for g, rep in folding.repeats.items():
        inner = [v for v in sorted(folding.group(g).tolist()) if not is_leaf[v]]
        assert len(inner) == rep.count * rep.period
        assert [pos[v] for v in inner] == list(range(pos[inner[0]], pos[inner[0]] + len(inner)))  # in a row
        unit = flat_names(trace, rep)
        assert len(unit) == rep.period and rep.count >= 2
        for r in range(rep.count):
            assert [names(trace)[v] for v in inner[r * rep.period:(r + 1) * rep.period]] == unit
        for a, b in zip(inner[rep.period:], inner[2 * rep.period:], strict=False):
            assert len(infos[a].next_edges) == len(infos[b].next_edges)
            assert all(shape(a, k) == shape(b, k) for k in range(len(infos[a].next_edges)))
        leaves = [v for v in folding.group(g).tolist() if is_leaf[v]]
        assert all(users[v] == 1 for v in leaves)  # a repeat holds only the leaves only it uses


def assert_partition(trace, folding, shown):
    """Every shown node is in exactly one group, and groups hold nothing else."""
    assert sorted(folding.members.tolist()) == sorted(shown)
    assert all(folding.group_of[v] >= 0 for v in shown)
    assert sum(1 for v in range(trace.num_nodes) if folding.group_of[v] >= 0) == len(shown)


@given(programs())
def test_random_programs_fold_honestly(program):
    """On random engine programs, whole or around a node: the groups partition the shown nodes, every edge is
    drawn, and every repeat is what its label says."""
    t = run_program(program).trace
    codes, _ = final_states(t)  # as the picture folds them: repetitions agree on their states
    for focus in (None, t.num_nodes // 2):
        nodes = np.arange(t.num_nodes) if focus is None else focus_nodes(t, focus, 1)
        folding = fold(t, nodes, codes)
        assert_partition(t, folding, set(nodes.tolist()))
        assert_repeats_honest(t, folding, set(nodes.tolist()))
        if focus is None:
            assert_every_edge_drawn(t, backward_graph(t, collapse=True), folding)


BODY = {"exp": lambda h, w, x: h.exp() * 0.1, "tanh": lambda h, w, x: h.tanh(), "mul_w": lambda h, w, x: h * w,
        "add_x": lambda h, w, x: h + x, "add_h": lambda h, w, x: h + h.sin(), "stack": lambda h, w, x: (
            engine.stack([h, w, x]).sum(0))}


@given(st.lists(st.sampled_from(sorted(BODY)), min_size=1, max_size=4), st.integers(2, 6))
def test_loops_of_random_bodies_fold_honestly(body, steps):
    """`for _ in range(steps): h = body(h)` with shared w and x: a valid, honest folding that draws every edge
    and has fewer boxes than nodes."""
    with tracer.record() as rec:
        w = engine.tensor([0.5, 0.25], requires_grad=True)
        x = engine.tensor([0.1, 0.2], requires_grad=True)
        h = x * 1.0
        for _ in range(steps):
            for op in body:
                h = BODY[op](h, w, x)
        h.sum().backward()
    t = rec.trace
    folding = fold(t, np.arange(t.num_nodes), final_states(t)[0])
    assert_partition(t, folding, set(range(t.num_nodes)))
    assert_repeats_honest(t, folding, set(range(t.num_nodes)))
    model = backward_graph(t, collapse=True)
    assert_every_edge_drawn(t, model, folding)
    assert model.num_boxes < t.num_nodes
