"""topological_nr (engine-semantics §2): longest path to a sink, fixed when edges are attached; GraphRoot's topo.

Expected values are worked out by hand from the definition in engine-semantics §2.1/§2.4."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agdb import engine
from agdb.engine._node import Node
from tests.engine.helpers import GraphTaskRecorder, acc_of

gs = engine.autograd._get_sequence_nr


def topo(t):
    return t.grad_fn._topological_nr()


# -- sinks --------------------------------------------------------------------------------------------
def test_accumulate_grad_topo_zero():
    """engine-semantics §2.1/§8.1: AccumulateGrad (no next edges) has topo 0."""
    x = engine.randn(3, requires_grad=True)
    y = x.exp()
    acc = y.grad_fn.next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert acc._topological_nr() == 0


def test_node_with_only_none_edges_topo_zero():
    """engine-semantics §2.1: a node whose next edges are all None has topo 0."""
    n = Node(sequence_nr=0)
    n.set_next_edges([(None, 0), (None, 0)])
    assert n._topological_nr() == 0


def test_leaf_op_topo_one():
    """engine-semantics §2.1: an op whose only child is an AccumulateGrad has topo 1; a None edge does not count."""
    x = engine.randn(3, requires_grad=True)
    assert topo(x.exp()) == 1
    assert topo(engine.randn(3) * x) == 1  # ((None, 0), (Acc, 0))


# -- hand-built graphs from ops ----------------------------------------------------------------------
def test_chain_topos():
    """engine-semantics §2.1: a chain x→exp→sin→cos→sum has topos 1, 2, 3, 4 above Acc(x)=0."""
    x = engine.randn(3, requires_grad=True)
    a = x.exp()
    b = a.sin()
    c = b.cos()
    d = c.sum()
    assert [topo(t) for t in (a, b, c, d)] == [1, 2, 3, 4]
    assert acc_of(x)._topological_nr() == 0


def test_diamond_topos():
    """engine-semantics §2.1: diamond (§15 A): Exp 1, Sin 2, Cos 2, Add 3, Sum 4."""
    x = engine.randn(3, requires_grad=True)
    y = x.exp()
    u = y.sin()
    v = y.cos()
    w = u + v
    z = w.sum()
    assert [topo(t) for t in (y, u, v, w, z)] == [1, 2, 2, 3, 4]


def test_unequal_branch_lengths_take_longest():
    """engine-semantics §2.1: with branches of length 3 and 0 below an add, topo is 1 + the longer one."""
    x = engine.randn(3, requires_grad=True)
    long = x.exp().sin().cos()  # topo 3
    w = long + x  # children Cos (3) and Acc(x) (0)
    assert topo(long) == 3
    assert topo(w) == 4
    short = x.exp()  # topo 1
    w2 = short * long  # children Exp (1), Cos (3)
    assert topo(w2) == 4
    w3 = w2 + short  # children Mul (4), Exp (1)
    assert topo(w3) == 5


def test_unequal_branches_order_independent():
    """engine-semantics §2.2: topo is the max over children whichever argument slot holds the longer branch."""
    x = engine.randn(3, requires_grad=True)
    y = engine.randn(3, requires_grad=True)
    deep = y.exp().exp().exp().exp()  # topo 4
    shallow = x.sin()  # topo 1
    assert topo(shallow + deep) == 5
    assert topo(deep + shallow) == 5


# -- hand-built graphs from raw nodes -----------------------------------------------------------------
def _node(*children):
    n = Node(sequence_nr=0)
    n.set_next_edges([(c, 0) for c in children])
    return n


def test_raw_nodes_chain_diamond_unequal():
    """engine-semantics §2.1/§2.2: raw Node graphs: chain 0,1,2; diamond top 3; unequal branches take the longest."""
    sink = _node()
    a = _node(sink)
    b = _node(a)
    assert [sink._topological_nr(), a._topological_nr(), b._topological_nr()] == [0, 1, 2]

    s = _node()
    left = _node(s)
    right = _node(s)
    top = _node(left, right)
    root = _node(top)
    assert [left._topological_nr(), right._topological_nr(), top._topological_nr(),
            root._topological_nr()] == [1, 1, 2, 3]

    s2 = _node()
    c1 = _node(s2)
    c2 = _node(c1)
    c3 = _node(c2)  # topo 3
    mixed = Node(sequence_nr=0)
    mixed.set_next_edges([(s2, 0), (None, 0), (c3, 0), (c1, 0)])
    assert mixed._topological_nr() == 4


def test_reading_topo_freezes_node():
    """engine-semantics §2.3: once a node's topo was read (or it became a child), attaching edges raises the assertion."""
    child = _node()
    frozen = Node(sequence_nr=0)
    frozen._topological_nr()
    with pytest.raises(AssertionError, match="Cannot update a node's topological_nr after it already has a "
                                             "parent."):
        frozen.set_next_edges([(child, 0)])


# -- the path property on random graphs -----------------------------------------------------------------
def _longest_path(node, memo):
    """Reference: longest path (in edges) from `node` down to a sink, over non-None edges."""
    if node in memo:
        return memo[node]
    best = 0
    for child, _ in node.next_functions:
        if child is not None:
            best = max(best, _longest_path(child, memo) + 1)
    memo[node] = best
    return best


def _descendants(node, memo):
    if node in memo:
        return memo[node]
    out = set()
    for child, _ in node.next_functions:
        if child is not None:
            out.add(child)
            out |= _descendants(child, memo)
    memo[node] = out
    return out


_OPS = st.lists(
    st.tuples(st.sampled_from(["exp", "sin", "add", "mul", "mixed"]), st.integers(0, 1000), st.integers(0, 1000)),
    min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.integers(1, 4))
def test_topo_is_longest_path_and_decreases_along_paths(ops, n_leaves):
    """engine-semantics §2.1: on random op graphs topo == longest path to a sink, and a path X→Y implies topo(X) > topo(Y)."""
    pool = [engine.randn(2, requires_grad=True) for _ in range(n_leaves)]
    for op, i, j in ops:
        a = pool[i % len(pool)]
        b = pool[j % len(pool)]
        if op == "exp":
            pool.append(a.exp())
        elif op == "sin":
            pool.append(a.sin())
        elif op == "add":
            pool.append(a + b)
        elif op == "mul":
            pool.append(a * b)
        else:
            pool.append(engine.randn(2) * a)
    nodes = set()
    for t in pool:
        nodes.add(t.grad_fn if t.grad_fn is not None else acc_of(t))
    lp_memo, desc_memo = {}, {}
    all_nodes = set(nodes)
    for n in nodes:
        all_nodes |= _descendants(n, desc_memo)
    for n in all_nodes:
        assert n._topological_nr() == _longest_path(n, lp_memo)
        for d in _descendants(n, desc_memo):
            assert n._topological_nr() > d._topological_nr()


# -- GraphRoot ----------------------------------------------------------------------------------------
def test_graph_root_topo_is_one_plus_max_root_topo():
    """engine-semantics §2.4/§3.1 step 7: a two-root backward makes a GraphRoot with topo 1 + max(root topos)."""
    x = engine.randn(3, requires_grad=True)
    y1 = x.exp().sum()  # topo 2
    y2 = x.sin().cos().exp().sum()  # topo 4
    assert (topo(y1), topo(y2)) == (2, 4)
    rec = GraphTaskRecorder()
    s = gs()
    with engine.add_observer(rec):
        engine.autograd.backward([y1, y2])
    assert gs() - s == 1
    assert len(rec.tasks) == 1
    root = rec.tasks[0].graph_root
    assert root is not y1.grad_fn and root is not y2.grad_fn
    assert root._sequence_nr() == s
    assert root._topological_nr() == 5
    assert [e[0] for e in root.next_functions] == [y1.grad_fn, y2.grad_fn]


def test_graph_root_topo_with_equal_roots_order_reversed():
    """engine-semantics §2.4: GraphRoot's topo is 1 + the max root topo, whichever root comes first."""
    x = engine.randn(3, requires_grad=True)
    y1 = x.sin().cos().exp().sum()  # topo 4
    y2 = x.exp().sum()  # topo 2
    y3 = (x * 2).sum()  # topo 2
    rec = GraphTaskRecorder()
    with engine.add_observer(rec):
        engine.autograd.backward([y1, y2, y3])
    assert rec.tasks[0].graph_root._topological_nr() == 5


def test_graph_root_over_leaf_roots_has_topo_one():
    """engine-semantics §2.4: a GraphRoot whose roots are AccumulateGrads (topo 0) has topo 1."""
    a = engine.randn(3, requires_grad=True)
    b = engine.randn(3, requires_grad=True)
    rec = GraphTaskRecorder()
    with engine.add_observer(rec):
        engine.autograd.backward([a, b], [engine.ones(3), engine.ones(3)])
    assert rec.tasks[0].graph_root._topological_nr() == 1
    assert a.grad.tolist() == [1.0, 1.0, 1.0]


def test_single_root_uses_root_node_no_graph_root():
    """engine-semantics §3.1 step 7: a single-root backward uses the root node itself as graph root; no GraphRoot, no bump."""
    x = engine.randn(3, requires_grad=True)
    y = x.exp().sum()
    rec = GraphTaskRecorder()
    s = gs()
    with engine.add_observer(rec):
        y.backward()
    assert gs() == s
    assert rec.tasks[0].graph_root is y.grad_fn
    assert rec.tasks[0].graph_root._topological_nr() == 2
