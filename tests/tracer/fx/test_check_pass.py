"""check_pass catches the three broken invariants of seed 001 and accepts a correct pass."""
from __future__ import annotations

from agdb.tracer.fx import capture_joint
from agdb.tracer.fx.check_pass import check_pass

from .test_capture import f_diamond, leaf


def clone_graph():
    return capture_joint(lambda x: (x * 2).clone(), leaf(3))


def drop_clone(g):
    """Turn `y.clone()` into `y`."""
    c = g.node("clone")
    g.replace_all_uses_with(c, c.args[0])
    g.erase_node(c)


def test_clone_removed_makes_output_alias_input():
    """Removing the clone of an input makes the output alias it: named at the output."""
    g = capture_joint(lambda x: x.clone(), leaf(3))
    found = check_pass(g, drop_clone)
    assert [(v.kind, v.node) for v in found] == [("new_alias", "primals_1")]


def test_inserted_mutation_is_caught():
    """A pass that adds an in-place op before the end is named; the graph's val still matches."""
    def add_inplace(g):
        mul = g.node("mul")
        n = g.create_node("call_function", "engine.mul_", (mul, 3.0), meta={"val": mul.meta["val"]})
        g.nodes.remove(n)
        g.nodes.insert(g.nodes.index(mul) + 1, n)

    found = check_pass(clone_graph(), add_inplace)
    assert [(v.kind, v.node) for v in found] == [("mutation", "mul_")]


def test_stale_val_is_caught():
    """A pass that changes what a node computes but not its meta['val'] is named with both shapes."""
    def sum_instead(g):
        g.node("sin").target = "engine.sum"

    found = check_pass(capture_joint(f_diamond, leaf(4), leaf(4)), sum_instead)
    assert found[0].kind == "stale_val" and found[0].node == "sin" and "shape [4]" in found[0].message


def test_correct_pass_is_accepted():
    """Replacing x * 2 by x + x keeps shapes, mutates nothing and aliases nothing."""
    def mul_to_add(g):
        m = g.node("mul")
        m.target, m.args = "engine.add", (m.args[0], m.args[0])

    assert check_pass(clone_graph(), mul_to_add) == []
    assert check_pass(clone_graph(), lambda g: None) == []


def test_trailing_copy_epilogue_is_allowed_but_not_earlier():
    """A copy_ at the very end (AOT's input-mutation epilogue) is no violation; the same copy_ before other
    ops is."""
    def epilogue(g, at_end=True):
        clone = g.node("clone")
        n = g.create_node("call_function", "engine.copy_", (g.node("primals_1"), clone),
                          meta={"val": dict(clone.meta["val"])})
        g.nodes.remove(n)
        g.nodes.insert(g.nodes.index(g.output_node) if at_end else g.nodes.index(clone) + 1, n)

    assert check_pass(clone_graph(), epilogue) == []
    found = check_pass(clone_graph(), lambda g: epilogue(g, at_end=False))
    assert [(v.kind, v.node) for v in found] == [("mutation", "copy_")]
