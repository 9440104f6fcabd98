"""tracer.views.dot: the DOT picture of a trace's graph, checked by parsing Graphviz's own JSON rendering.

Expected values come from the trace's node table, its raw events and Replay's EngineState, or are derived
by hand; never from tracer.views.dot itself. The demo is recorded on a fresh thread, so its seq_nrs are stable and
its DOT text can be pinned as snapshots (refresh with `pytest tests/tracer/test_dot.py --snapshot-update`).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from agdb import engine as torch
from agdb import tracer
from agdb.app import demo_program as app_demo
from agdb.app.demo import record_example
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.schema import UINT64_MAX
from agdb.tracer.views.dot import ViewError, picture, to_dot
from agdb.tracer.views.labels import NodeLabels

DEMO = record_example()
DEMO_LABELS = NodeLabels(DEMO)
STEPS = {
    "tie": next(e.step for e in DEMO if isinstance(e, ev.TaskPushed) and e.queue_length >= 2),
    "pruning": next(e.step for e in DEMO if isinstance(e, ev.DependenciesComputed) and e.pruned),
    "reentrant": next(e.step for e in DEMO if isinstance(e, ev.GraphTaskStarted) and e.reentrant_depth > 0) + 6,
    "end": None,
}


def short(name):
    return name.removeprefix("torch::autograd::")


def render(dot_text):
    """Lay out with `dot -Tjson`: (boxes name -> (class, label lines), arrows [(tail, head, label)], clusters)."""
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    out = subprocess.run(["dot", "-Tjson"], input=dot_text, capture_output=True, text=True, check=True).stdout
    g = json.loads(out)
    objs = g["objects"]
    name = {o["_gvid"]: o["name"] for o in objs}
    clusters = {o["name"]: {name[i] for i in o.get("nodes", [])} for o in objs[:g.get("_subgraph_cnt", 0)]}
    boxes = {o["name"]: (o.get("class"), [d["text"] for d in o.get("_ldraw_", []) if d["op"] == "T"])
             for o in objs[g.get("_subgraph_cnt", 0):]}
    arrows = [(name[e["tail"]], name[e["head"]], e.get("label")) for e in g.get("edges", [])]
    return boxes, arrows, clusters


def graph_arrows(arrows):
    """Arrows between graph boxes (n*, chain*), leaving out the queue and the legend."""
    return [a for a in arrows if re.fullmatch(r"(n|chain)\d+", a[0]) and re.fullmatch(r"(n|chain)\d+", a[1])]


def next_edges(trace):
    """{(parent, child): [(slot, input_nr), ...]} from the node table, None children left out."""
    out: dict = {}
    for p in range(trace.num_nodes):
        for slot, (child, nr) in enumerate(trace.node(p).next_edges):
            if child is not None:
                out.setdefault((p, child), []).append((slot, nr))
    return out


def expected_states(trace, step):
    """Node -> state for the clear cases, from Replay (or the raw events when step is None); None if unclear."""
    started = [e for e in trace if isinstance(e, ev.NodeStarted) and (step is None or e.step <= step)]
    if step is None:
        ran = {e.node for e in started}
        pruned = {n for e in trace if isinstance(e, ev.DependenciesComputed) for n in e.pruned}
        needed = {e.graph_task: set(e.needed) | {c[0] for c in e.captured}
                  for e in trace if isinstance(e, ev.ExecInfoComputed)}
        skipped = {n for e in trace if isinstance(e, ev.DependenciesComputed) and e.graph_task in needed
                   for n, _ in e.dependencies if n not in needed[e.graph_task]}
        out = {}
        for v in range(trace.num_nodes):
            out[v] = ("done" if v in ran else "pruned" if v in pruned - skipped
                      else "skipped" if v in skipped - pruned else "unreached" if v not in pruned | skipped else None)
        return out
    st = Replay(trace).state_at(step)
    ran_in = {(e.graph_task, e.node) for e in started}
    running = {v for _, v in st.running}
    ready = {t.node for q in st.ready_queues for t in q.tasks if t.node is not None}
    made = {e.node for e in trace if isinstance(e, ev.NodeCreated) and e.step <= step}
    unmade = {e.node for e in trace if isinstance(e, ev.NodeCreated)} - made
    last_pruned = {n: e.step for e in trace if isinstance(e, ev.DependenciesComputed) and e.step <= step
                   for n in e.pruned}
    last_ran = {e.node: e.step for e in started}
    was_pruned = {n for n, s in last_pruned.items() if s > last_ran.get(n, -1)}  # pruned since it last ran
    # to_push: a counted node whose count reached 0 (at its last parent's NodeFinished) and whose push comes
    # after this step, in a running graph task; counted by hand from the events.
    running_tasks = {gt.graph_task for gt in st.graph_tasks}
    left, zero_at, spent = {}, {}, set()
    for e in trace:
        if isinstance(e, ev.DependenciesComputed):
            left.update({(e.graph_task, n): k for n, k in e.dependencies})
        elif isinstance(e, ev.NodeFinished):
            for child, _ in trace.node(e.node).next_edges:
                if (e.graph_task, child) in left:
                    left[(e.graph_task, child)] -= 1
                    if left[(e.graph_task, child)] == 0:
                        zero_at[(e.graph_task, child)] = e.step
        elif isinstance(e, ev.TaskPushed) and zero_at.get((e.graph_task, e.node), step + 1) <= step < e.step:
            if e.graph_task in running_tasks:
                spent.add(e.node)
    out = {}
    for v in range(trace.num_nodes):
        live = [gt for gt in st.graph_tasks if v in dict(gt.dependencies)]
        if v in running:
            out[v] = "running"
        elif v in ready:
            out[v] = "ready"
        elif v in spent:
            out[v] = "to_push"
        elif any(v in gt.pruned for gt in st.graph_tasks):
            out[v] = "pruned"
        elif v in st.not_ready:
            out[v] = "waiting"
        elif v in unmade:
            out[v] = "not_created"
        elif not live:
            out[v] = ("pruned" if v in was_pruned else "done" if v in st.executed
                      else "unreached" if v in made else None)
        elif any((gt.graph_task, v) in ran_in for gt in live):
            out[v] = "done"
        elif v in st.executed:
            out[v] = None  # ran in an earlier graph task, counted again: see test_rerun_node_is_not_done
        elif len(live) == 1 and (live[0].needed or live[0].captured):
            gt = live[0]
            out[v] = "captured" if v in gt.captured else "counted" if v in gt.needed else "skipped"
        else:
            out[v] = "counted"
    return out


@pytest.mark.parametrize("moment", list(STEPS))
def test_backward_picture_matches_trace(moment):
    """Every node's box, label (an AccumulateGrad's with its leaf's name), state class, next edges, pruned cluster
    and ready queue agree with the trace."""
    step = STEPS[moment]
    boxes, arrows, clusters = render(to_dot(DEMO, step))
    states = expected_states(DEMO, step)
    for v in range(DEMO.num_nodes):
        info = DEMO.node(v)
        cls, lines = boxes[f"n{v}"]
        leaf = DEMO.index.leaf_labels.get(v)  # an AccumulateGrad: its leaf's name (the demo's x, w and inner)
        assert (leaf is not None) == (short(info.name) == "AccumulateGrad")
        # the name as every view writes it: an AccumulateGrad by its leaf, a numbered node with its seq_nr
        assert lines[0] == short(info.name) + (f" {leaf}" if leaf is not None else f" seq {info.seq_nr}")
        assert info.seq_nr != UINT64_MAX or leaf is not None  # the demo has no Error node
        # every execution index the node had by then: a reused AccumulateGrad ran once per backward call
        assert re.fullmatch(rf"topo {info.topological_nr}( · #\d+(, #\d+)*)?", lines[1]), lines[1]
        if states[v] is not None:
            assert cls == f"agdb-{states[v]}", (v, info.name)
    assert not [b for b in boxes if b.startswith("chain")]
    expected = sorted((f"n{p}", f"n{c}", str(nr)) for (p, c), e in next_edges(DEMO).items() for _, nr in e)
    assert sorted(graph_arrows(arrows)) == expected  # one arrow per next edge, even two to the same node
    set_apart = {f"n{v}" for v, s in states.items() if s in ("pruned", "skipped")}
    assert clusters.get("cluster_pruned", set()) == set_apart
    queues = Replay(DEMO).state_at(step).ready_queues if step is not None else ()
    for i, q in enumerate(queues):
        members = sorted((n for n in boxes if n.startswith(f"q{i}_")), key=lambda n: int(n.split("_")[1]))
        assert clusters.get(f"cluster_queue{i}", set()) == set(members)
        assert [boxes[m][1][0] for m in members] == [f"{k + 1}. {short(t.name)}" for k, t in enumerate(q.tasks)]
        assert {(f"q{i}_{k}", f"n{t.node}") for k, t in enumerate(q.tasks)} <= {(a, b) for a, b, _ in arrows}
    assert "cluster_legend" in clusters


def test_demo_moments_cover_the_interesting_states():
    """The chosen steps show a two-task queue, topological pruning, and a node to push under a running one; some
    step shows a node waiting for a second grad (the diamond's ExpBackward0)."""
    assert [len(q.tasks) for q in Replay(DEMO).state_at(STEPS["tie"]).ready_queues if q.tasks] == [2]
    pruned = next(e for e in DEMO if isinstance(e, ev.DependenciesComputed) and e.pruned).pruned
    assert expected_states(DEMO, STEPS["pruning"])[pruned[0]] == "pruned"
    re_states = expected_states(DEMO, STEPS["reentrant"]).values()
    assert "to_push" in re_states and "running" in re_states
    replay = Replay(DEMO)
    assert any(v in replay.state_at(s).not_ready and expected_states(DEMO, s)[v] == "waiting"
               for s in range(len(DEMO)) if isinstance(DEMO[s], ev.BufferWritten) for v in [DEMO[s].node])
    assert "skipped" in expected_states(DEMO, None).values()


def test_forward_view_reverses_edges():
    """The forward view draws child -> parent arrows labelled `in {slot}`, and boxes carry the forward op."""
    boxes, arrows, _ = render(to_dot(DEMO, view="forward"))
    for v in range(DEMO.num_nodes):
        info = DEMO.node(v)
        leaf = DEMO_LABELS.distinction(v) if info.forward_op == "leaf" else ""
        assert boxes[f"n{v}"][1][0] == f"{info.forward_op} {leaf}".rstrip()  # a leaf says which
        assert f"line {info.lineno}: " in boxes[f"n{v}"][1][2]
    expected = sorted((f"n{c}", f"n{p}", f"in {slot}") for (p, c), e in next_edges(DEMO).items() for slot, _ in e)
    assert sorted(graph_arrows(arrows)) == expected


@pytest.mark.parametrize("radius, names", [
    (0, {"CosBackward0"}),
    (1, {"CosBackward0", "MulBackward0", "SinBackward0"}),
    (2, {"CosBackward0", "MulBackward0", "SinBackward0", "SumBackward0", "Acc_w", "ExpBackward0"}),
    (3, {"CosBackward0", "MulBackward0", "SinBackward0", "SumBackward0", "Acc_w", "ExpBackward0", "Acc_x"}),
], ids=["r0", "r1", "r2", "r3"])
def test_focus_draws_the_neighbourhood(small, radius, names):
    """focus/radius draws exactly the nodes within `radius` edges of the focus, and the arrows among them."""
    t, idx = small
    p = picture(t, focus=idx["CosBackward0"], radius=radius)
    boxes, arrows, _ = render(p.dot)
    want = {f"n{idx[n]}" for n in names}
    assert {b for b in boxes if re.fullmatch(r"n\d+", b)} == want and p.num_boxes == len(want)
    links = [("SumBackward0", "MulBackward0"), ("MulBackward0", "CosBackward0"), ("MulBackward0", "Acc_w"),
             ("CosBackward0", "SinBackward0"), ("SinBackward0", "ExpBackward0"), ("ExpBackward0", "Acc_x")]
    assert {(a, b) for a, b, _ in graph_arrows(arrows)} == {
        (f"n{idx[a]}", f"n{idx[b]}") for a, b in links if a in names and b in names}


def chain_trace(n):
    """x * 1.0001 n times, summed, backward: AccumulateGrad + n MulBackward0 + SumBackward0 in one line."""
    with tracer.record() as rec:
        y = torch.tensor([1.0, 2.0], requires_grad=True)
        for _ in range(n):
            y = y * 1.0001
        y.sum().backward()
    return rec.trace


def test_collapse_folds_a_long_chain():
    """collapse folds a 52-node linear chain into one chain box saying how many nodes it holds."""
    t = chain_trace(50)
    assert t.num_nodes == 52
    p = picture(t, collapse=True)
    boxes, arrows, _ = render(p.dot)
    graph = [b for b in boxes if re.fullmatch(r"(n|chain)\d+", b)]
    assert len(graph) == 1 and graph[0].startswith("chain") and p.num_boxes == 1
    cls, lines = boxes[graph[0]]
    assert lines[0] == "52 nodes in a chain" and "agdb-done" in cls.split()
    assert graph_arrows(arrows) == [] and p.num_arrows == 0
    assert len(p.dot) < 4000 < len(to_dot(t))


def test_long_chain_draws_without_recursion():
    """A 5,000-node chain draws, folded or not and mid-trace, under a recursion limit of 200."""
    t = chain_trace(4998)
    assert t.num_nodes == 5000
    replay_state = Replay(t).state_at(len(t) // 2)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        folded = picture(t, collapse=True)
        full = picture(t)
        mid = picture(t, step=len(t) // 2, collapse=True, state=replay_state)
    finally:
        sys.setrecursionlimit(old)
    assert folded.num_boxes == 1 and full.num_boxes == 5000 and full.num_arrows == 4999
    assert mid.num_boxes >= 1


@pytest.mark.parametrize("kwargs, match", [
    ({"view": "joint"}, r"holds no joint graph.*agdb fx.*--view backward or --view forward"),
    ({"view": "sideways"}, r"unknown view 'sideways': choose one of backward, forward, joint"),
    ({"step": len(DEMO)}, rf"step {len(DEMO)} is outside this trace's steps 0\.\.{len(DEMO) - 1}"),
    ({"step": -1}, rf"step -1 is outside this trace's steps 0\.\.{len(DEMO) - 1}"),
    ({"focus": DEMO.num_nodes},
     rf"node {DEMO.num_nodes} is not in this trace \(its nodes are 0\.\.{DEMO.num_nodes - 1}\)"),
    ({"focus": -1}, r"node -1 is not in this trace"),
], ids=["joint", "unknown-view", "step-past-end", "negative-step", "focus-past-end", "negative-focus"])
def test_view_errors(kwargs, match):
    """Impossible pictures raise ViewError (a ValueError) whose message names the valid choices."""
    with pytest.raises(ViewError, match=match) as info:
        picture(DEMO, **kwargs)
    assert isinstance(info.value, ValueError)


def test_rerun_node_is_not_done():
    """In a second backward through a retained graph, nodes it has not run yet are drawn counted, not done."""
    with tracer.record() as rec:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        z = x.exp().sum()
        z.backward(retain_graph=True)
        z.backward()
    t = rec.trace
    second = [e for e in t if isinstance(e, ev.DependenciesComputed)][1]
    boxes, _, _ = render(to_dot(t, second.step))
    for node, _count in second.dependencies:
        assert boxes[f"n{node}"][0] == "agdb-counted"


class DotSnapshot(SingleFileSnapshotExtension):
    """One .dot text file per snapshot, readable and renderable on its own."""

    _write_mode = WriteMode.TEXT
    _file_extension = "dot"


@pytest.mark.parametrize("moment, view", [("tie", "backward"), ("pruning", "backward"),
                                          ("reentrant", "backward"), ("reentrant", "forward")])
def test_dot_snapshot(snapshot, moment, view):
    """The demo's DOT text at a telling step is as pinned, and holds no path or memory address."""
    text = to_dot(DEMO, STEPS[moment], view=view)
    demo_file = Path(app_demo.__file__).resolve()
    assert str(demo_file.parent) not in text and demo_file.name not in text
    assert not re.search(r"0x[0-9a-fA-F]{4,}|(?<![\w.])/(?:[\w.-]+/)+[\w.-]+", text)
    if view == "forward":  # the culprit lines: line number and source only
        for v in range(DEMO.num_nodes):
            assert f"line {DEMO.node(v).lineno}: {DEMO.node(v).source[:20]}" in text
    assert text == snapshot.use_extension(DotSnapshot)


@pytest.mark.parametrize("values", [[0, 5, 3], [70_000, 1, 69_999], [2**20 + 5, 7], [], [12, 2**20 - 1, 0]])
def test_number_texts_are_the_decimal_text_of_each_value(values):
    """dot._texts keeps the texts of small ints between pictures and grows its table on demand; whatever it
    held before, each value comes out as str(value), past the table's limit too."""
    import numpy as np

    from agdb.tracer.views.dot import _texts

    assert _texts(np.asarray(values, dtype=np.int64)) == [str(v) for v in values]
    assert _texts(np.asarray(values[::-1], dtype=np.int64)) == [str(v) for v in values[::-1]]
