"""tracer/fx/invariants.py on its own: graphs with aten targets and a runner that only reports value summaries
(what a torch fake-tensor runner will give), and the engine's graphs re-run by EngineRunner."""
from __future__ import annotations

import pytest

from agdb import engine
from agdb.tracer.fx import capture_joint
from agdb.tracer.fx.check_pass import EngineRunner, check_pass
from agdb.tracer.fx.graph import Graph
from agdb.tracer.fx.invariants import changes, invariants, is_epilogue, is_inplace, replaced_nodes

from .corpus import PROGRAMS


def summary(shape, storage, stride=None):
    return {"shape": shape, "stride": stride or [1] * len(shape), "dtype": "float32", "storage": storage}


class TableRunner:
    """A runner that reads each node's summary from a table (by node name): no graph is executed."""

    def __init__(self, table):
        self.table = table

    def run(self, graph):
        return {n.name: self.table.get(n.name) for n in graph.nodes if n.op != "output"}

    def mutates(self, node):
        return is_inplace(node)


def aten_graph():
    """def f(x): y = x.clone(); z = y.mul(2); return (y, z)  -- as aten nodes."""
    g = Graph()
    x = g.placeholder("x", {"val": summary([3], 0)})
    y = g.create_node("call_function", "aten.clone.default", (x,), name="clone",
                      meta={"val": summary([3], 1), "seq_nr": 0})
    z = g.create_node("call_function", "aten.mul.Tensor", (y, 2), name="mul",
                      meta={"val": summary([3], 2), "seq_nr": 1})
    g.output((y, z))
    return g


TABLE = {"x": summary([3], 0), "clone": summary([3], 1), "mul": summary([3], 2)}


def test_aten_names_are_read_for_mutations_and_the_epilogue():
    g = aten_graph()
    add_ = g.create_node("call_function", "aten.add_.Tensor", (g.node("mul"), 1), name="add_")
    copy = g.create_node("call_function", "aten.copy_.default", (g.node("x"), g.node("clone")), name="copy_")
    for n in (add_, copy):  # before the output
        g.nodes.remove(n)
        g.nodes.insert(g.nodes.index(g.output_node), n)
    assert is_inplace(add_) and is_inplace(copy) and not is_inplace(g.node("clone"))
    assert is_epilogue(copy, g) and not is_epilogue(add_, g)
    assert not is_inplace(g.create_node("call_function", "aten._unsafe_view.default", (g.node("mul"), [3])))


def test_output_aliasing_from_storage_numbers_only():
    """Two outputs with one storage number alias; the diff names the later output."""
    g = aten_graph()
    before = invariants(g, TableRunner(TABLE).run(g))
    after_table = {**TABLE, "mul": summary([3], 1)}  # as if mul were now a view of the clone
    after = invariants(g, TableRunner(after_table).run(g))
    assert before.output_aliases == set() and after.output_aliases == {(0, 1)}
    assert [(v.kind, v.node) for v in changes(g, before, g, after)] == [("new_alias", "mul")]


def test_check_pass_takes_another_runner():
    """check_pass with a runner of its own: a pass that drops mul's seq_nr, on an aten graph nothing executes."""
    def drop(graph):
        del graph.node("mul").meta["seq_nr"]

    found = check_pass(aten_graph(), drop, runner=TableRunner(TABLE))
    assert [(v.kind, v.node) for v in found] == [("lost_meta", "mul")]


def test_replaced_nodes_follow_uses_and_outputs():
    """A new node in an output position replaces the old one there; a kept node is not 'replaced'."""
    before = aten_graph()
    after = before.copy()
    mul = after.node("mul")
    add = after.create_node("call_function", "aten.add.Tensor", (after.node("clone"), after.node("clone")),
                            name="add")
    after.nodes.remove(add)
    after.nodes.insert(after.nodes.index(mul), add)
    after.replace_all_uses_with(mul, add)
    after.erase_node(mul)
    assert replaced_nodes(before, after) == {"add": "mul"}


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_captured_graphs_rerun_to_their_vals(program):
    """Every corpus graph, run again by EngineRunner, computes the shapes, strides and dtypes its vals record."""
    target, args = program(engine)
    g = capture_joint(target, *args)
    assert invariants(g, EngineRunner(g).run(g)).stale == {}


def test_a_transposed_tangent_keeps_its_strides():
    """The tangent of y.t() is made with y.t()'s strides, as the capture made it: its grad's val matches."""
    def f(x):
        y = x * 2
        return y, y.t()

    g = capture_joint(f, engine.randn(2, 3, requires_grad=True))
    inv = invariants(g, EngineRunner(g).run(g))
    assert inv.stale == {} and inv.output_aliases == {(0, 1)}
