"""check_pass reports what a pass changed of seed 001's invariants, on engine graphs: a pass that changes nothing
is clean (whatever the graph held already); stale vals, new mutations, new input-output and output-output
aliasing, and seq_nr / partitioner_tag / custom lost on replaced nodes are each named at their node."""
from __future__ import annotations

import pytest

from agdb import engine
from agdb.tracer.fx import capture_joint
from agdb.tracer.fx.check_pass import check_pass

from .test_capture import f_diamond, leaf


def clone_graph():
    return capture_joint(lambda x: (x * 2).clone(), leaf(3))


def found(violations):
    return [(v.kind, v.node) for v in violations]


def move_after(g, node, anchor):
    """Put `node` (appended by create_node) right after `anchor`."""
    g.nodes.remove(node)
    g.nodes.insert(g.nodes.index(anchor) + 1, node)


# -- a pass that changes nothing ----------------------------------------------------------------------------
def mutates_input_mid_graph(x):
    """The user's own in-place copy into an input, with more forward ops after it."""
    y = x.clone()
    x.copy_(y * 0 + y)
    return (y * 2).sum()


def copy_epilogue(x):
    """An input mutation as AOT's epilogue: the copy_ is the graph's last op."""
    y = x.clone()
    x.copy_(y * 0 + y)
    return y


GRAPHS = {
    "diamond": lambda: capture_joint(f_diamond, leaf(4), leaf(4)),
    "linear": lambda: capture_joint(engine.nn.Linear(4, 2), leaf(3, 4)),
    "user_mutation": lambda: capture_joint(mutates_input_mid_graph, engine.randn(3)),
    "copy_epilogue": lambda: capture_joint(copy_epilogue, engine.randn(3)),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_identity_pass_is_clean(name):
    """No pass, and a pass returning a fresh copy, break nothing: not even on a graph whose own in-place op would
    break the mutation rule (the invariants are compared before and after)."""
    g = GRAPHS[name]()
    assert check_pass(g, lambda graph: None) == []
    assert check_pass(g, lambda graph: graph.copy()) == []


def test_user_mutation_graph_breaks_the_rule_itself():
    """What the identity pass is not blamed for: the graph's copy_ is followed by forward ops."""
    g = GRAPHS["user_mutation"]()
    copy = g.node("copy_")
    later = g.nodes[g.nodes.index(copy) + 1:]
    assert any(n.op == "call_function" and n.meta["partitioner_tag"] == "is_forward" for n in later)


# -- (a) aliasing -------------------------------------------------------------------------------------------
def test_outputs_made_to_alias_each_other():
    """A CSE that merges two clones makes two outputs one tensor: named at the later output."""
    g = capture_joint(lambda x: (x.clone(), x.clone()), engine.randn(3))

    def cse(graph):
        graph.replace_all_uses_with(graph.node("clone_1"), graph.node("clone"))
        graph.erase_node(graph.node("clone_1"))

    violations = check_pass(g, cse)
    assert found(violations) == [("new_alias", "clone")]
    assert "outputs 0 (clone) and 1 (clone) now share storage" in violations[0].message


def test_outputs_that_alias_already_are_not_blamed():
    """y and y.t() share storage before the pass; a pass that rewrites y's op keeps them so, and is clean."""
    def f(x):
        y = x * 2
        return y, y.t()

    assert check_pass(capture_joint(f, leaf(2, 3)), replace_mul_by_add(copy_meta=True)) == []


def test_clone_removed_makes_output_alias_input():
    """Removing the clone of an input makes the output the input itself: named at the output."""
    def drop_clone(graph):
        c = graph.node("clone")
        graph.replace_all_uses_with(c, c.args[0])
        graph.erase_node(c)

    violations = check_pass(capture_joint(lambda x: x.clone(), leaf(3)), drop_clone)
    assert found(violations) == [("new_alias", "primals_1")]
    assert "shares storage with input primals_1" in violations[0].message


# -- (b) mutation -------------------------------------------------------------------------------------------
def test_inserted_mutation_is_caught():
    """A pass that adds an in-place op before the end is named; the graph's val still matches."""
    def add_inplace(graph):
        mul = graph.node("mul")
        n = graph.create_node("call_function", "engine.mul_", (mul, 3.0), meta={"val": mul.meta["val"]})
        move_after(graph, n, mul)

    assert found(check_pass(clone_graph(), add_inplace)) == [("mutation", "mul_")]


def test_copy_into_an_input_is_an_epilogue_only_at_the_end_of_the_forward_part():
    """A copy_ into an input after the forward ops (backward nodes may follow, as the forward graph ends there) is
    AOT's epilogue; the same copy_ before a forward op is a mutation."""
    def copy_after(anchor):
        def pass_(graph):
            mul = graph.node("mul")
            n = graph.create_node("call_function", "engine.copy_", (graph.node("primals_1"), mul),
                                  meta={"val": dict(mul.meta["val"]), "partitioner_tag": "is_forward"})
            move_after(graph, n, graph.node(anchor) if anchor else graph.nodes[-3])  # before the output
        return pass_

    assert check_pass(clone_graph(), copy_after("clone")) == []  # the last forward op
    assert check_pass(clone_graph(), copy_after(None)) == []  # the very end
    assert found(check_pass(clone_graph(), copy_after("mul"))) == [("mutation", "copy_")]


def test_identity_rewrite_with_a_copy_into_an_input_mid_graph_is_caught():
    """`y = x.clone(); x.copy_(y * 0 + y)` before `mul` leaves x's value alone, but mutates before forward ops."""
    def rewrite(graph):
        x, mul = graph.node("primals_1"), graph.node("mul")

        def new(target, *args):
            n = graph.create_node("call_function", target, args,
                                  meta={"val": dict(x.meta["val"]), "partitioner_tag": "is_forward"})
            graph.nodes.remove(n)
            graph.nodes.insert(graph.nodes.index(mul), n)
            return n

        y = new("engine.clone", x)
        new("engine.copy_", x, new("engine.add", new("engine.mul", y, 0), y))

    assert found(check_pass(clone_graph(), rewrite)) == [("mutation", "copy_")]


# -- (c) stale val ------------------------------------------------------------------------------------------
def test_stale_val_is_caught():
    """A pass that changes what a node computes but not its meta['val'] is named with both shapes."""
    def sum_instead(graph):
        graph.node("sin").target = "engine.sum"

    violations = check_pass(capture_joint(f_diamond, leaf(4), leaf(4)), sum_instead)
    assert found(violations) == [("stale_val", "sin")]
    assert "says shape [4], stride [1] but it computes shape [], stride []" in violations[0].message


# -- (d) meta on replaced nodes -------------------------------------------------------------------------------
def test_dropped_seq_nr_is_caught():
    """Deleting a node's seq_nr in place is named, with the key and the number it had."""
    def drop(graph):
        del graph.node("sin").meta["seq_nr"]

    g = capture_joint(f_diamond, leaf(4), leaf(4))
    violations = check_pass(g, drop)
    assert found(violations) == [("lost_meta", "sin")]
    assert "meta['seq_nr']" in violations[0].message and repr(g.node("sin").meta["seq_nr"]) in violations[0].message


def replace_mul_by_add(copy_meta):
    """x * 2 -> x + x as a new node that takes over the old one's users (replace_all_uses_with)."""
    def pass_(graph):
        mul = graph.node("mul")
        meta = dict(mul.meta) if copy_meta else {"val": dict(mul.meta["val"])}
        add = graph.create_node("call_function", "engine.add", (mul.args[0], mul.args[0]), meta=meta)
        move_after(graph, add, mul)
        graph.replace_all_uses_with(mul, add)
        graph.erase_node(mul)
    return pass_


def test_replacement_without_meta_is_caught_per_key():
    """The new node stands where `mul` was: it lacks mul's seq_nr and partitioner_tag (one violation each)."""
    violations = check_pass(clone_graph(), replace_mul_by_add(copy_meta=False))
    assert found(violations) == [("lost_meta", "add"), ("lost_meta", "add")]
    assert ["seq_nr" in violations[0].message, "partitioner_tag" in violations[1].message] == [True, True]
    assert "mul, which it replaced" in violations[0].message


def test_replacement_keeping_meta_is_clean():
    assert check_pass(clone_graph(), replace_mul_by_add(copy_meta=True)) == []


def test_custom_annotation_lost_on_a_rewritten_chain():
    """sin(a) + a rewritten as new nodes: the new add replaced the old one (the output's user reads it) and the
    new sin the old sin (the new add reads it where the old add read sin); the new sin lacks `custom`."""
    g = capture_joint(f_diamond, leaf(4), leaf(4))
    g.node("sin").meta["custom"] = {"stage": 1}

    def rewrite(graph):
        sin, add = graph.node("sin"), graph.node("add")
        keep = {k: v for k, v in sin.meta.items() if k != "custom"}
        sin2 = graph.create_node("call_function", "engine.sin", sin.args, meta=keep)
        add2 = graph.create_node("call_function", "engine.add", (sin2, add.args[1]), meta=dict(add.meta))
        move_after(graph, sin2, add)
        move_after(graph, add2, sin2)
        graph.replace_all_uses_with(add, add2)
        graph.erase_node(add)
        graph.erase_node(sin)

    violations = check_pass(g, rewrite)
    assert found(violations) == [("lost_meta", "sin_1")]
    assert "meta['custom']" in violations[0].message and "sin, which it replaced" in violations[0].message


def test_violation_json_shape():
    v = check_pass(clone_graph(), replace_mul_by_add(copy_meta=False))[0]
    assert set(v.to_json()) == {"kind", "node", "message"}
