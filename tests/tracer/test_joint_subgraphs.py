"""A joint graph with nested subgraphs (a region inside a region): the joint view's clusters sit inside their
parent's, in DOT and in the JSON picture; the TUI's joint panel lists the subgraphs' nodes and finds partners
across graphs, as torch's copy_fwd_metadata_to_bw_nodes does (the first forward node of a number, in walk order)."""
from __future__ import annotations

from agdb import engine as torch
from agdb import tracer
from agdb.app.app import AgdbApp
from agdb.tracer.fx.graph import Graph
from agdb.tracer.views.dot import render
from agdb.tracer.views.joint import joint_model, with_joint
from agdb.tracer.views.json_render import to_json
from agdb.widgets.joint_graph import JointGraphView

FW = {"partitioner_tag": "is_forward"}
BW = {"partitioner_tag": "is_backward"}


def _family() -> tuple[Graph, list]:
    """joint: invoke (fw 10) and its backward invoke_1 (bw 10); outer: its forward mm (fw 11) and backward mm_1
    (bw 11) with an inner region holding sin (fw 12) and cos (bw 12, custom lost)."""
    joint = Graph()
    x = joint.placeholder("primals_1", meta=dict(FW))
    inv = joint.create_node("call_function", "invoke_subgraph", (x,), name="invoke", meta={**FW, "seq_nr": 10})
    inv1 = joint.create_node("call_function", "invoke_subgraph", (inv,), name="invoke_1", meta={**BW, "seq_nr": 10})
    joint.output([inv, inv1])
    outer = Graph()
    a = outer.placeholder("arg0_1")
    mm = outer.create_node("call_function", "aten.mm.default", (a, a), name="mm", meta={**FW, "seq_nr": 11})
    mm1 = outer.create_node("call_function", "aten.mm.default", (mm, a), name="mm_1", meta={**BW, "seq_nr": 11})
    outer.output([mm1])
    inner = Graph()
    b = inner.placeholder("arg0_1")
    sin = inner.create_node("call_function", "aten.sin.default", (b,), name="sin",
                            meta={**FW, "seq_nr": 12, "custom": {"stage": 3}})
    cos = inner.create_node("call_function", "aten.cos.default", (sin,), name="cos", meta={**BW, "seq_nr": 12})
    inner.output([cos])
    return joint, [("c0.joint/outer", "", "outer", outer), ("c0.joint/outer/inner", "c0.joint/outer", "inner", inner)]


def _saved(joint, subgraphs):
    with tracer.record() as rec:
        (torch.randn(3, requires_grad=True) * 2).sum().backward()
    return with_joint(rec.trace, joint, subgraphs)


def test_clusters_of_subgraphs_nest_in_dot_and_json():
    joint, subs = _family()
    trace = _saved(joint, subs)
    from agdb.tracer.views.joint import joint_of_trace

    model = joint_model(joint_of_trace(trace))
    parents = {c.label: c.parent for c in model.clusters}
    assert parents["subgraph outer"] == "" and parents["subgraph inner"] != ""
    dot = render(model)
    depth, depth_of = 0, {}  # the digraph is depth 1, a top-level cluster 2, a cluster inside one 3
    for line in dot.splitlines():
        depth += line.count("{")
        for label in ("subgraph outer", "subgraph inner"):
            if f'label="{label}"' in line:
                depth_of[label] = depth
        depth -= line.count("}")
    assert depth_of == {"subgraph outer": 2, "subgraph inner": 3} and depth == 0
    clusters = {c["label"]: c for c in to_json(model)["clusters"]}
    assert clusters["subgraph inner"]["parent"] == model.clusters[[c.label for c in model.clusters]
                                                                  .index("subgraph outer")].id
    assert "custom stage=3" in dot


async def test_joint_panel_lists_subgraph_nodes_and_partners_across_graphs():
    joint, subs = _family()
    app = AgdbApp(trace=_saved(joint, subs), title="nested")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("9")
        await pilot.pause()
        view = app.screen.query_one(JointGraphView)
        names = [view.names[n] for n in view.nodes]
        assert names == ["invoke", "invoke_1", "outer.mm", "outer.mm_1", "inner.sin", "inner.cos"]
        view.cursor = names.index("inner.sin")
        await pilot.pause()
        assert {names[i] for i in range(len(names)) if view.is_partner(i)} == {"inner.cos"}
        assert "inner.cos" in view.row_text(names.index("inner.cos")).plain
        assert view.row_text(names.index("inner.cos")).plain.lstrip().startswith("│ !")  # custom lost: flagged
        assert view.row_text(names.index("inner.sin")).plain.rstrip(" │").endswith("= sin(arg0_1) {stage=3}")
