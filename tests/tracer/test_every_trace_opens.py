"""Every trace agdb's Recorder (attached at any moment) or TraceBuilder writes opens in every view, and the loader
refuses, in one line naming the file, what a view could not read: a malformed `meta`, a summary group of the
wrong size, input slots the file does not back.

"Opens in every view" is `use_everywhere` (tests/tracer/loader_fuzz.py): decode, replay every step, `show` (text,
JSON, a step), `culprits`, `export` and the TUI headless, each without a traceback.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agdb import engine, tracer
from agdb.tracer import TraceBuilder
from agdb.tracer.replay.forward_map import ForwardMap
from agdb.tracer.store.schema import DERIVED_COLUMNS, SUMMARY_KINDS, Kind
from agdb.tracer.store.tracefile import TraceFormatError, load, save
from tests.engine.helpers import run_in_thread
from tests.tracer.loader_fuzz import _Raw, run_isolated, use_everywhere

ACC = "torch::autograd::AccumulateGrad"


def one_backward(acc_inputs: int = 1):
    """A hand-written trace of `(w * 2).sum().backward()` reduced to two nodes: Mul -> AccumulateGrad."""
    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    q = b.queue(f"cpu:{m}")
    b.node_created(thread=m, node=1, name="MulBackward0", seq_nr=0, topological_nr=1, next_edges=[(2, 0)])
    b.node_created(thread=m, node=2, name=ACC, seq_nr=2**64 - 1, topological_nr=0, num_inputs=acc_inputs)
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.dependencies_computed(thread=m, graph_task=1, min_topo_nr=0, dependencies=[(1, 0), (2, 1)])
    b.task_pushed(thread=m, graph_task=1, node=1, queue=q, seq_nr=0, queue_length=1)
    b.task_popped(thread=m, graph_task=1, node=1, queue=q, queue_length=0)
    b.node_started(thread=m, graph_task=1, node=1, inputs=[np.ones(2)])
    b.node_finished(thread=m, graph_task=1, node=1, outputs=[np.ones(2)])
    b.buffer_written(thread=m, graph_task=1, node=2, slot=0, is_accumulation=False)
    b.task_pushed(thread=m, graph_task=1, node=2, queue=q, seq_nr=2**64 - 1, queue_length=1)
    b.task_popped(thread=m, graph_task=1, node=2, queue=q, queue_length=0)
    b.node_started(thread=m, graph_task=1, node=2, inputs=[np.ones(2)])
    b.grad_accumulated(thread=m, graph_task=1, node=2, grad=np.ones(2))
    b.node_finished(thread=m, graph_task=1, node=2, outputs=[])
    b.graph_task_finished(thread=m, graph_task=1)
    return b.finish()


def _columns(trace) -> dict:
    return {k: np.array(v) for k, v in trace.columns.items() if k not in DERIVED_COLUMNS}


def _write(tmp_path: Path, trace, columns: dict | None = None, meta: dict | None = None) -> Path:
    """`trace` (its columns or meta replaced) written by agdb's own `save`: every checksum is right."""
    path = tmp_path / "case.agdb"
    save(_Raw(_columns(trace) if columns is None else columns, list(trace.strings),
              trace.meta if meta is None else meta, len(trace)), path)
    return path


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(TraceFormatError) as e:
        load(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for word in words:
        assert word in message
    return message


# -- F5: nodes that no event made ------------------------------------------------------------------------------
def test_recorder_attached_after_the_forward_opens_everywhere(tmp_path):
    """A Recorder attached between the forward and the backward sees no node made: every view still opens, and the
    forward-ops map lists every node once, none flagged as made in a backward."""
    def record():
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        loss = (x.exp() * x).sum()
        with tracer.record() as rec:
            loss.backward()
        return rec.trace

    trace = run_in_thread(record)
    assert not len(trace.steps_of(Kind.SEQ_NR_BUMPED, Kind.NODE_CREATED))  # the case: nothing made while recording
    forward = ForwardMap(trace)
    assert sorted(int(forward.op(r).node) for r in range(len(forward))) == list(range(trace.num_nodes))
    assert not any("in_backward" in forward.op(r).flags for r in range(len(forward)))
    path = tmp_path / "attached.agdb"
    save(trace, path)
    use_everywhere(path, tui=True)


def test_builder_trace_of_described_nodes_opens_everywhere(tmp_path):
    """A TraceBuilder trace whose nodes are only described with `node()` (no bump, no creation) opens everywhere."""
    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    b.node(1, name="MulBackward0", seq_nr=1, next_edges=[(2, 0)])
    b.node(2, name=ACC, seq_nr=2**64 - 1)
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.graph_task_finished(thread=m, graph_task=1)
    path = tmp_path / "described.agdb"
    save(b.finish(), path)
    assert sorted(op.op for op in map(ForwardMap(load(path)).op, range(2))) == ["leaf", "mul"]
    use_everywhere(path, tui=True)


# -- F6: meta ------------------------------------------------------------------------------------------------------
GOOD_DIVERGENCES = [
    {"graph_task": 1, "step": 3, "expected": 0, "observed": 1},
    {"kind": "graph_task", "graph_task": 1, "step": 4, "node": 1, "expected_id": 7, "observed_id": 8},
    {"kind": "running_node", "graph_task": 1, "step": 5, "node": -1, "running_seq_nr": 2},
    {"kind": "witness", "against": "model", "graph_task": 1, "step": 6, "index": 0, "expected": 1, "observed": -1},
]
GOOD_COMPILES = [{"index": 0, "compile_id": "0/0", "function": "f", "file": "f.py", "line": 3, "inference": False,
                  "aot_id": 0, "graphs": ["c0.joint", "c0.forward", "c0.backward"], "joint": "fx_joint"}]
GOOD_COMPILE_TIME = [{"compile_id": "0/0", "function": "f", "file": "f.py", "line": 3, "kind": "grad",
                      "roots": ["SumBackward0"], "num_roots": 1, "inputs": ["torch::autograd::Error"], "num_inputs": 1}]


def test_well_formed_bridge_meta_opens_everywhere(tmp_path):
    """Divergences of every kind, graph tasks with a witness and bridge errors, as the bridge writes them, load and
    every view (the TUI says where the model diverged) opens."""
    trace = one_backward()
    meta = {**trace.meta, "divergences": GOOD_DIVERGENCES, "bridge_errors": ["a hook failed"],
            "graph_tasks": [{"graph_task": 1, "torch_id": 3, "parent_torch_id": None, "reentrant_depth": 0,
                             "execution_order": {"length": 2, "model": "agrees", "observed": 1}}],
            "omitted": {"graph_tasks": 1, "events": 4}, "compile_time_calls": GOOD_COMPILE_TIME,
            "compiled_functions": [{"node": 0, "aot_id": 0}], "compiles": GOOD_COMPILES,
            "compile_time_seq_nrs": [[0, 0, 6], [0, 7, 16]]}
    path = _write(tmp_path, trace, meta=meta)
    assert load(path).meta["divergences"] == GOOD_DIVERGENCES
    assert load(path).meta["compile_time_calls"] == GOOD_COMPILE_TIME
    use_everywhere(path, tui=True)


@pytest.mark.parametrize("key, value, words", [
    ("divergences", [{"step": 1}], ("meta.divergences[0]", "graph_task")),
    ("divergences", [{"kind": "graph_task", "graph_task": 1, "step": 2, "node": 1}], ("expected_id",)),
    ("divergences", [{"graph_task": 1, "step": 2, "expected": 99, "observed": 0}], ("expected",)),
    ("divergences", [{"kind": "witness", "graph_task": 1, "step": 2, "index": 0, "expected": 0, "observed": 0,
                      "against": "x"}], ("against",)),
    ("divergences", [{"kind": "nonsense", "graph_task": 1, "step": 2}], ("kind",)),
    ("divergences", {"graph_task": 1}, ("meta.divergences", "list")),
    ("divergences", ["x"], ("meta.divergences[0]",)),
    ("graph_tasks", [{"graph_task": 1, "execution_order": 3}], ("meta.graph_tasks[0]", "execution_order")),
    ("graph_tasks", [{"graph_task": 1, "execution_order": {"model": "agrees"}}], ("execution_order",)),
    ("graph_tasks", "none", ("meta.graph_tasks",)),
    ("omitted", {"graph_tasks": "2"}, ("meta.omitted",)),
    ("bridge_errors", [1], ("meta.bridge_errors",)),
    ("source", 3, ("meta.source",)),
    ("compile_time_calls", -1, ("meta.compile_time_calls", "count")),
    ("compile_time_calls", [{**GOOD_COMPILE_TIME[0], "kind": "run"}], ("meta.compile_time_calls[0]", "kind")),
    ("compile_time_calls", [{**GOOD_COMPILE_TIME[0], "roots": [1]}], ("roots",)),
    ("compile_time_calls", [{**GOOD_COMPILE_TIME[0], "num_inputs": 0}], ("num_inputs",)),
    ("compile_time_calls", [{**GOOD_COMPILE_TIME[0], "line": "3"}], ("line",)),
    ("compiled_functions", [{"node": 99, "aot_id": 0}], ("meta.compiled_functions[0]", "node row")),
    ("compiled_functions", [{"node": 0}], ("meta.compiled_functions[0]", "aot_id")),
    ("compiles", [{"compile_id": "0/0"}], ("meta.compiles[0]", "index")),
    ("compiles", [{**GOOD_COMPILES[0], "aot_id": "0"}], ("meta.compiles[0]", "aot_id")),
    ("compiles", [{**GOOD_COMPILES[0], "graphs": [0]}], ("meta.compiles[0]", "graphs")),
    ("compiles", [{**GOOD_COMPILES[0], "joint": 3}], ("meta.compiles[0]", "joint")),
    ("compile_time_seq_nrs", [[0, 6, 0]], ("meta.compile_time_seq_nrs", "start <= stop")),
])
def test_malformed_meta_is_refused_in_one_line(tmp_path, key, value, words):
    """A `meta` key a view reads, in a form it cannot read (written with agdb's own `save`), is refused on load
    naming the key; before, a malformed `divergences` crashed the TUI (KeyError: 'graph_task', TypeError)."""
    trace = one_backward()
    _refused(_write(tmp_path, trace, meta={**trace.meta, key: value}), *words)


# -- F7: a summary group of the wrong size ---------------------------------------------------------------------
@pytest.mark.parametrize("moved", [-1, 1])
def test_grad_accumulated_group_of_other_than_one_summary_is_refused(tmp_path, moved):
    """A GradAccumulated group with no summary (or two), the count moved to its neighbour so that every total and
    checksum holds, is refused on load; before, it loaded and `show --step`, `export --step` and the TUI failed."""
    trace = one_backward()
    columns = _columns(trace)
    kinds = columns["ev_kind"]
    groups = [s for s in range(len(kinds)) if kinds[s] in SUMMARY_KINDS]
    group = next(i for i, s in enumerate(groups) if kinds[s] == Kind.GRAD_ACCUMULATED)
    assert columns["s_count"][group] == 1 and columns["s_count"][group + 1] == 0  # NodeFinished of the leaf: none
    columns["s_count"][group] += moved
    columns["s_count"][group + 1] -= moved
    if moved > 0:  # a NodeFinished group cannot go below 0: take the summary from the NodeStarted before instead
        columns["s_count"][group + 1] += moved
        columns["s_count"][group - 1] -= moved
    _refused(_write(tmp_path, trace, columns), "GradAccumulated", "tensor summaries", f"step {groups[group]}")


# -- F8: input slots the file does not back --------------------------------------------------------------------
def test_node_of_a_billion_input_slots_is_refused(tmp_path):
    """A node of 10**9 input slots in a 15-event trace (written with TraceBuilder) is refused on load; before, it
    loaded and `show --all` built a list of 10**9 slots for its input buffer (15.7 GB)."""
    path = tmp_path / "slots.agdb"
    save(one_backward(acc_inputs=10**9), path)
    _refused(path, "input slots")


def test_node_of_many_input_slots_still_opens(tmp_path):
    """A node of 60,000 input slots (an unbind of a 60,000-row tensor) in a small trace still opens everywhere."""
    path = tmp_path / "wide.agdb"
    save(one_backward(acc_inputs=60_000), path)
    assert load(path).node(1).num_inputs == 60_000
    use_everywhere(path, tui=False)


# -- F13: the header before the body ---------------------------------------------------------------------------
_LOAD = ("import sys\nfrom agdb.tracer.store.tracefile import TraceFormatError, load\n"
         "try:\n    load(sys.argv[1])\nexcept TraceFormatError as e:\n    print('refused', e)\n")


def _sparse(path: Path, start: bytes, size: int) -> Path:
    """A file of `size` bytes that starts with `start` and holds zeros after it, which take no disk space."""
    with open(path, "wb") as f:
        f.write(start)
        f.truncate(size)
    return path


@pytest.mark.parametrize("start, size, words", [
    (b"", 30 * 1024**3, "does not start with"),  # 30 GB of zeros
    (None, 3 * 1024**3, "bytes follow the last column"),  # a valid trace and 3 GB of zeros after it
])
def test_a_huge_file_is_refused_from_its_first_bytes(tmp_path, start, size, words):
    """A 30 GB file of zeros, or a valid trace followed by 3 GB, is refused from its magic or its header before
    its body is read: in a process of 2 GB of address space (tests/tracer/loader_fuzz.run_isolated). Before, the
    loader read the whole file first: a MemoryError traceback there, and 3 GB read and held in a larger one."""
    if start is None:
        save(one_backward(), tmp_path / "valid.agdb")
        start = (tmp_path / "valid.agdb").read_bytes()
    path = _sparse(tmp_path / "huge.agdb", start, size)
    done = run_isolated(_LOAD, str(path), timeout=120)
    assert done.returncode == 0 and done.stdout.startswith(f"refused {path}: ") and words in done.stdout, \
        done.stderr[-500:]


# -- F14: control characters in names --------------------------------------------------------------------------
@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\r"])
def test_graphviz_draws_names_that_hold_control_characters(tmp_path, char):
    """A NUL (or another control character) in a node, leaf, thread or file name gives DOT text that Graphviz
    itself lays out into well-formed SVG, the character shown as a visible escape; before, a NUL ended dot's
    input mid-string (`syntax error`)."""
    import shutil
    import subprocess
    import xml.dom.minidom

    from agdb.tracer.views.dot import render
    from agdb.tracer.views.graph_model import graph_model

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    b = TraceBuilder(source="test")
    m = b.thread(f"Main{char}Thread")
    frame = b.frame(f"a{char}.py", 1, f"f{char}", f"y{char} = 1")
    b.node_created(thread=m, node=1, name=f"Mul{char}Backward0", seq_nr=0, topological_nr=1, next_edges=[(2, 0)],
                   frame=frame)
    b.node_created(thread=m, node=2, name=ACC, seq_nr=2**64 - 1, topological_nr=0)
    b.leaf_name(2, f"w{char}x")
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.graph_task_finished(thread=m, graph_task=1)
    trace = b.finish()
    for view in ("backward", "forward"):
        text = render(graph_model(trace, 0, view))
        assert char not in text
        done = subprocess.run(["dot", "-Tsvg"], input=text.encode("utf-8"), capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()[-300:]
        svg = xml.dom.minidom.parseString(done.stdout)  # raises on a character XML cannot hold
        shown = "".join(t.data for t in _text_nodes(svg))
        assert f"Mul\\x{ord(char):02x}Backward0" in shown or view == "forward"


def _text_nodes(node):
    for child in node.childNodes:
        if child.nodeType == child.TEXT_NODE:
            yield child
        yield from _text_nodes(child)


def test_an_edge_past_its_childs_slots_opens_everywhere(tmp_path):
    """TraceBuilder lets a writer describe a node with fewer input slots than its edges feed (and write a grad to
    such a slot): the trace opens everywhere, the buffer shown with the slot the grad reached. Before, the loader
    refused what the builder wrote."""
    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    b.node_created(thread=m, node=1, name="MulBackward0", seq_nr=0, topological_nr=1, next_edges=[(2, 3)])
    b.node_created(thread=m, node=2, name="SumBackward0", seq_nr=1, topological_nr=0, num_inputs=1)
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.dependencies_computed(thread=m, graph_task=1, min_topo_nr=0, dependencies=[(1, 0), (2, 1)])
    b.buffer_written(thread=m, graph_task=1, node=2, slot=3, is_accumulation=False)
    path = tmp_path / "past.agdb"
    save(b.finish(), path)
    trace = load(path)
    assert trace.node(0).next_edges == ((1, 3),)
    from agdb.tracer.replay.replay import Replay

    state = Replay(trace).state_at(len(trace) - 1)
    assert state.graph_tasks[0].filled_slots(1) == (False, False, False, True)
    use_everywhere(path, tui=True)


def test_counted_pruned_and_needed_nodes_never_seen_are_left_out(tmp_path):
    """A DependenciesComputed or ExecInfoComputed naming a node the builder never saw leaves that node out (it
    wrote -1, which every view read as the last node, or crashed on with none); the loader refuses such a -1."""
    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    b.node_created(thread=m, node=1, name="MulBackward0", seq_nr=0, topological_nr=1)
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.dependencies_computed(thread=m, graph_task=1, min_topo_nr=0, dependencies=[(1, 0), (7, 1)], pruned=[7])
    b.exec_info_computed(thread=m, graph_task=1, needed=[7, 1])
    trace = b.finish()
    ev = trace[2], trace[3]
    assert ev[0].dependencies == ((0, 0),) and ev[0].pruned == () and ev[1].needed == (0,)
    path = _write(tmp_path, trace)
    use_everywhere(path, tui=False)
    columns = _columns(trace)
    columns["needed_node"] = np.array([-1])
    _refused(_write(tmp_path, trace, columns), "needed_node")


@pytest.mark.parametrize("view", ["backward", "forward"])
@pytest.mark.parametrize("collapse", [False, True])
def test_a_picture_of_no_node_with_a_queued_wake_up_task_draws(view, collapse):
    """A trace whose only graph task named a root never seen (so the trace has no node) but queued a wake-up task
    draws a picture of that one queue entry, folded or not; before, the graph model indexed an empty table."""
    from agdb.tracer.views.graph_model import graph_model

    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    q = b.queue(f"cpu:{m}")
    b.graph_task_started(thread=m, graph_task=1, graph_root=6)
    b.task_pushed(thread=m, graph_task=1, node=None, queue=q, seq_nr=0, queue_length=1)
    trace = b.finish()
    assert trace.num_nodes == 0 and len(trace) == 1
    model = graph_model(trace, 0, view, None, 2, collapse)
    tasks = [block for block in model.nodes if block.kind == "task"]
    assert [len(block) for block in tasks] == [1]


def test_a_capture_of_no_node_marks_no_node(tmp_path):
    """A grad captured for an input with no node of its own (captured node -1) leaves every node's state as it was
    (before, the last node showed as captured, or, in a trace of no node, the views failed)."""
    from agdb.tracer.replay.node_states import STATE_CODE, node_states
    from agdb.tracer.replay.replay import Replay

    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    b.node_created(thread=m, node=1, name="MulBackward0", seq_nr=0, topological_nr=1, next_edges=[(2, 0)])
    b.node_created(thread=m, node=2, name=ACC, seq_nr=2**64 - 1, topological_nr=0)
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    b.dependencies_computed(thread=m, graph_task=1, min_topo_nr=0, dependencies=[(1, 0), (2, 1)])
    b.exec_info_computed(thread=m, graph_task=1, needed=[1, 2], captured=[(9, 0, 0)])
    trace = b.finish()
    assert trace[4].captured == ((-1, 0, 0),)
    codes, _ = node_states(trace, Replay(trace).state_at(4))
    assert STATE_CODE["captured"] not in codes.tolist()
    path = tmp_path / "capture.agdb"
    save(trace, path)
    use_everywhere(path, tui=False)
    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    b.leaf_name(1, "w")
    b.graph_task_started(thread=m, graph_task=1, graph_root=1)
    b.exec_info_computed(thread=m, graph_task=1, captured=[(1, 0, 0)])
    save(b.finish(), path)
    use_everywhere(path, tui=False)


def test_a_huge_input_nr_draws_folded(tmp_path):
    """An edge's input_nr is any int a writer gave (2**40 here, past its child's slots): the folded picture labels
    the arrow with it, with no table as long as the number (before, a list of 2**40 labels: MemoryError)."""
    from agdb.tracer.views.graph_model import graph_model

    b = TraceBuilder(source="test")
    m = b.thread("MainThread")
    for key in range(1, 6):  # a chain 1 -> ... -> 5 folds; its last edge feeds slot 2**40 of node 6, which 7 feeds too
        b.node_created(thread=m, node=key, name="MulBackward0", seq_nr=10 - key, topological_nr=6 - key,
                       next_edges=[(key + 1, 2**40 if key == 5 else 0)])
    b.node_created(thread=m, node=6, name="SumBackward0", seq_nr=0, topological_nr=0)
    b.node_created(thread=m, node=7, name="AddBackward0", seq_nr=11, topological_nr=1, next_edges=[(6, 0)])
    b.graph_task_started(thread=m, graph_task=1, graph_root=1, roots=[(1, 0)])
    path = tmp_path / "input_nr.agdb"
    save(b.finish(), path)
    model = graph_model(load(path), 0, "backward", None, 2, True)
    labels = [t for e in model.edges for piece in (e.label or ()) if hasattr(piece, "table") for t in piece.table]
    assert sorted(labels) == ["0", str(2**40)]
    use_everywhere(path, tui=False)


@pytest.mark.parametrize("edit", ["node_inputs", "slot"])
def test_slot_counts_that_overflow_a_sum_are_refused(tmp_path, edit):
    """Input slots whose total would wrap around int64 (two nodes of 2**62 + 2**61 slots; or a grad written to slot
    2**63 - 1, whose + 1 wraps) are refused like any other count the file does not back."""
    trace = one_backward()
    columns = _columns(trace)
    if edit == "node_inputs":
        columns["node_inputs"] = np.array([2**62 + 2**61] * 2, dtype=np.int64)
    else:
        a = columns["ev_a"].astype(np.int64)
        a[np.flatnonzero(columns["ev_kind"] == Kind.BUFFER_WRITTEN)[0]] = 2**63 - 1
        columns["ev_a"] = a
    _refused(_write(tmp_path, trace, columns), "input slots")
