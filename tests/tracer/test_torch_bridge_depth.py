"""Reentrant backward past torch's MAX_DEPTH (60) through the bridge: the calls torch hands to its reentrant pool
thread are recorded on that thread, at the depths torch gives them, on the caller's ready queue, with the graph task
ids torch's own hooks read; and the trace agrees with agdb's engine on the same program."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.store import events as ev  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402
from agdb.tracer.store.tracefile import load  # noqa: E402
from tests.app.test_cli import agdb  # noqa: E402

DEEP = 65
"""Nest levels below the outermost call: torch runs reentrant calls 1..60 inline, 61..65 on one pool thread."""
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "deep_reentrant.py"


class _Program:
    """Nest(DEEP): each level's backward runs a backward of its own (`backward()`, or `autograd.grad` with
    `how="grad"`), one level deeper, while a node of its own graph task waits in the queue; with `fail`, the deepest
    level raises.
    Every node gets a pre-hook of the program's, which logs what torch says there: the node, torch's graph task id,
    and whether it runs on the thread that started the outermost backward."""

    def __init__(self, how: str = "backward", fail: bool = False) -> None:
        self.log: list[tuple] = []
        self.parents: dict[int, int] = {}  # torch's id of each inner call's graph task -> the id it was started in
        self.held: list = []  # the hooked nodes' wrappers: ids stay unique, the hooks stay on
        self.caller = threading.get_ident()
        self.threads: set[int] = set()  # the idents of the threads the hooks ran on
        self.hooks: set[tuple] = set()  # (torch's graph task id, on the calling thread) of each tensor hook run
        self.made: list[tuple] = []  # (on the calling thread, counter before an inner call, counter after it)
        program = self

        class Nest(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, depth):
                ctx.depth = depth
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                if ctx.depth == 0 and fail:
                    raise ValueError("the deepest level fails")
                if ctx.depth > 0:
                    outer = torch._C._current_graph_task_id()
                    with torch.enable_grad():
                        inner = torch.ones(1, requires_grad=True)
                        waiting = inner.exp().sum()
                        z = Nest.apply(inner, ctx.depth - 1).sum() + waiting
                        if how == "hooks":  # a tensor hook on the root: torch runs it before any Node pre-hook
                            z.register_hook(program.tensor_hook)
                        program.watch(z)
                        program.next_parent = outer
                        if how == "grad":
                            torch.autograd.grad(z, [inner])
                        elif how == "unused":  # torch makes an Identity for a leaf with no AccumulateGrad yet
                            unused = torch.ones(1, requires_grad=True)
                            before = torch.autograd._get_sequence_nr()
                            torch.autograd.grad(z, [inner, unused], allow_unused=True)
                            program.made.append((threading.get_ident() == program.caller, before,
                                                 torch.autograd._get_sequence_nr()))
                        else:
                            z.backward()
                return grad, None

        self.Nest = Nest
        self.next_parent = -1

    def watch(self, z) -> None:
        """Pre-hook every node below `z` once; the root's hook also notes which graph task started this one."""
        seen, stack = set(), [z.grad_fn]
        while stack:
            n = stack.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            self.held.append(n)
            n.register_prehook(lambda go: self._ran())
            stack.extend(c for c, _ in n.next_functions)
        root = z.grad_fn

        def parent(go, program=self):
            here = torch._C._current_graph_task_id()
            program.parents.setdefault(here, program.next_parent)

        root.register_prehook(parent)

    def tensor_hook(self, grad):
        """A tensor hook of the program's: notes torch's graph task id and whether it runs on the calling thread."""
        self.hooks.add((torch._C._current_graph_task_id(), threading.get_ident() == self.caller))

    def _ran(self) -> None:
        """A node's pre-hook: the node torch says is running, its graph task id, and the thread."""
        here = threading.get_ident()
        self.threads.add(here)  # compared here only, never stored in a trace
        node = torch._C._current_autograd_node()
        self.log.append((node.name(), node._sequence_nr(), torch._C._current_graph_task_id(), here == self.caller))

    def run(self) -> None:
        x = torch.ones(1, requires_grad=True)
        z = self.Nest.apply(x, DEEP).sum()
        self.watch(z)
        self.next_parent = -1
        z.backward()


def _record(how: str = "backward", fail: bool = False, **options):
    program = _Program(how, fail)
    with tracer.record("torch", **options) as rec:
        if fail:
            with pytest.raises(ValueError, match="the deepest level fails"):
                program.run()
        else:
            program.run()
    program.held.clear()
    return rec.trace, program


def _caller_row(trace) -> int:
    rows = [row for row, name in trace.threads if name == threading.current_thread().name]
    assert len(rows) == 1, trace.threads
    return rows[0]


def _runs(trace):
    """(name, seq_nr, torch's graph task id, ran on the calling thread) of every node start but GraphRoot's, read from
    the trace alone: what the program's own hooks log."""
    ids = {t["graph_task"]: t["torch_id"] for t in trace.meta["graph_tasks"]}
    caller = _caller_row(trace)
    out = []
    for step in trace.steps_of(Kind.NODE_STARTED):
        e = trace[int(step)]
        info = trace.node(e.node)
        if info.name != "GraphRoot":
            out.append((info.name, info.seq_nr, ids.get(e.graph_task), e.thread == caller))
    return out


@pytest.mark.parametrize("options", [{}, {"values": False, "defer": True}, {"culprits": "mode"},
                                     {"single_threaded": True}],
                         ids=["default", "no-values-deferred", "mode", "single-threaded"])
def test_each_node_runs_on_the_thread_and_in_the_graph_task_torch_ran_it_in(options):
    """Past depth 60 torch runs a graph task on its pool thread: every node start in the trace is on the thread, and in
    the graph task (torch's id), that the program's own pre-hooks saw, in their order, and the model predicts it."""
    trace, program = _record(**options)
    on_pool = [entry for entry in program.log if not entry[3]]
    assert on_pool, "torch ran nothing on another thread: the program is not deep enough"
    assert _runs(trace) == program.log
    assert trace.meta["divergences"] == []
    if options.get("single_threaded"):  # torch's execution order, read on the pool thread too, agrees
        verdicts = [t.get("execution_order") for t in trace.meta["graph_tasks"]]
        assert all(v is not None and v["model"] == v["observed"] == "agrees" for v in verdicts), verdicts


@pytest.mark.parametrize("how", ["grad", "fail"])
def test_autograd_grad_and_a_failure_past_depth_60_are_recorded_where_they_ran(how):
    """autograd.grad at every level, and a backward whose deepest level raises on the pool thread: node starts as the
    program's hooks saw them; each failed graph task's error is raised on the thread that ran it (the pool thread for
    the tasks it ran), and no divergence."""
    trace, program = _record(how="grad" if how == "grad" else "backward", fail=how == "fail")
    assert any(not entry[3] for entry in program.log)
    assert _runs(trace) == program.log
    assert trace.meta["divergences"] == []
    tasks = trace.meta["graph_tasks"]
    assert len(tasks) == DEEP + 1
    if how == "fail":
        caller = _caller_row(trace)
        depth = {t["graph_task"]: t["reentrant_depth"] for t in tasks}
        raised = {trace[int(s)].graph_task: trace[int(s)].thread for s in trace.steps_of(Kind.ERROR_RAISED)}
        assert sorted(depth[g] for g in raised) == list(range(DEEP + 1))
        assert {depth[g] for g, row in raised.items() if row != caller} == set(range(61, DEEP + 1))


def test_an_identity_torch_makes_for_a_handed_over_call_is_on_the_caller_s_thread():
    """autograd.grad(z, [inner, unused]) at every level: torch makes an Identity for `unused` on the thread that calls,
    taking the number the program's counter shows there as the call begins, also when the pool thread runs the call."""
    trace, program = _record(how="unused")
    caller = _caller_row(trace)
    assert len(program.made) == DEEP
    # where nothing below the call makes a node on the calling thread, the counter moved by that one number
    assert {(on_caller, after - before) for on_caller, before, after in program.made if after - before < 3} == \
        {(True, 1), (False, 1)}
    assert sorted((on_caller, before) for on_caller, before, _ in program.made) == \
        sorted((info.thread == caller, info.seq_nr) for info in map(trace.node, range(trace.num_nodes))
               if info.name == "torch::autograd::Identity")
    assert not [i for i in range(trace.num_nodes) if trace.node(i).name.startswith("?")]
    assert _runs(trace) == program.log


def test_a_tensor_hook_on_a_handed_over_call_s_root_is_recorded_on_the_pool_thread():
    """A tensor hook of the program's on each inner call's root tensor runs before any Node pre-hook, also on the pool
    thread before the bridge's witness hook: every run is in the trace, in the graph task and on the thread torch ran
    it in, and the pool thread's row is named as the engine names its own."""
    trace, program = _record(how="hooks")
    ids = {t["graph_task"]: t["torch_id"] for t in trace.meta["graph_tasks"]}
    caller = _caller_row(trace)
    seen = {(ids[trace[int(s)].graph_task], trace[int(s)].thread == caller) for s in trace.steps_of(Kind.HOOK_RAN)}
    assert len(program.hooks) == DEEP
    assert seen == program.hooks
    assert [name for _, name in trace.threads if name != threading.current_thread().name] == ["pt_autograd_reentrant"]
    assert _runs(trace) == program.log


def test_depths_past_60_count_on_through_the_pool_thread():
    """Each graph task's reentrant depth is its nesting below the outermost call, as torch's own ids say (the graph
    task each inner call was started in), on the pool thread too: 61 to 65, not 1 to 4."""
    trace, program = _record()
    depth = {-1: -1}

    def depth_of(torch_id):
        if torch_id not in depth:
            depth[torch_id] = depth_of(program.parents[torch_id]) + 1
        return depth[torch_id]

    tasks = trace.meta["graph_tasks"]
    assert len(tasks) == DEEP + 1
    for task in tasks:
        assert task["parent_torch_id"] == program.parents[task["torch_id"]]
        assert task["reentrant_depth"] == depth_of(task["torch_id"])
    assert sorted(t["reentrant_depth"] for t in tasks) == list(range(DEEP + 1))


def test_the_meta_numbers_graph_tasks_as_the_events_do():
    """meta["graph_tasks"] names each graph task by the number its events carry: same depth, same torch id as the
    nodes that ran in it."""
    trace, _ = _record()
    started = {trace[int(s)].graph_task: trace[int(s)].reentrant_depth for s in trace.steps_of(Kind.GRAPH_TASK_STARTED)}
    assert {t["graph_task"]: t["reentrant_depth"] for t in trace.meta["graph_tasks"]} == started


def test_the_pool_thread_pops_the_callers_queue():
    """torch's pool thread adopts the caller's ready queue: every push and pop, on either thread, is on the caller's
    CPU queue, and the trace has no queue of the pool thread's own."""
    trace, _ = _record()
    caller = _caller_row(trace)
    threads = set()
    queues = set()
    for step in trace.steps_of(Kind.TASK_PUSHED, Kind.TASK_POPPED):
        e = trace[int(step)]
        threads.add(e.thread)
        queues.add(e.queue)
    assert len(threads) == 2 and caller in threads
    assert queues == {f"cpu:{caller}"}
    assert trace.queues == (f"cpu:{caller}",)


def _shape(trace):
    """What a reader sees of threads, depths and queues, in event order: for each graph task start its depth and
    thread; for each node start its name, seq_nr relative to its thread's first, and thread; for each push or pop
    its queue. Threads by order of first appearance (the engine names its pool thread, torch leaves it Python's
    name for a thread it did not start)."""
    first: dict[int, int] = {}
    for i in range(trace.num_nodes):
        info = trace.node(i)
        if 0 <= info.seq_nr < 2**63:
            first[info.thread] = min(first.get(info.thread, info.seq_nr), info.seq_nr)
    order: dict[int, int] = {}
    out = []
    for e in trace:
        if isinstance(e, ev.GraphTaskStarted):
            out.append(("task", e.reentrant_depth, order.setdefault(e.thread, len(order))))
        elif isinstance(e, ev.NodeStarted):
            info = trace.node(e.node)
            seq = info.seq_nr - first[info.thread] if 0 <= info.seq_nr < 2**63 else None
            out.append((info.name, seq, order.setdefault(e.thread, len(order))))
        elif isinstance(e, (ev.TaskPushed, ev.TaskPopped)):
            out.append((type(e).__name__, e.queue))
    return out


def test_the_engine_and_torch_agree_past_depth_60(tmp_path, capsys):
    """docs/examples/deep_reentrant.py on agdb's engine and on real torch: the same graph tasks at the same depths on
    the same threads, the same nodes run on the same threads, every task on the caller's queue; `agdb diff` agrees."""
    engine, real = tmp_path / "engine.agdb", tmp_path / "torch.agdb"
    code, _, err = agdb(["record", "--as-torch", EXAMPLE, "-o", engine], capsys)
    assert code == 0, err
    code, _, err = agdb(["torch", EXAMPLE, "-o", real], capsys)
    assert code == 0, err
    a, b = load(engine), load(real)
    assert len(a.threads) == len(b.threads) == 2
    assert _shape(b) == _shape(a)
    code, out, _ = agdb(["diff", engine, real], capsys)
    assert code == 0, out


def test_a_second_deep_backward_keeps_one_row_per_thread():
    """Two deep backward calls in one recording: torch reuses its idle pool thread (or starts another if that one had
    not gone back to wait yet), and the trace has one row per thread the program's hooks ran on; every node start is
    where the program's hooks saw it."""
    program = _Program()
    with tracer.record("torch") as rec:
        program.run()
        program.run()
    program.held.clear()
    trace = rec.trace
    assert _runs(trace) == program.log
    assert trace.meta["divergences"] == []
    assert len(trace.threads) == len(program.threads) >= 2


@pytest.mark.parametrize("culprits", ["lines", "mode"])
def test_a_tensor_hook_registered_inside_a_custom_backward_is_reported_once_per_run(culprits):
    """Inside a custom Function's backward the bridge's mode is on and Tensor.register_hook is patched: the hook is
    wrapped once, so each of its runs is one HookRan event (as many as the program's own count)."""
    runs: list[int] = []

    class Inner(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            with torch.enable_grad():
                inner = torch.ones(1, requires_grad=True)
                w = inner.exp()
                w.register_hook(lambda g: runs.append(1))
                w.sum().backward()
            return grad

    with tracer.record("torch", culprits=culprits) as rec:
        x = torch.ones(1, requires_grad=True)
        Inner.apply(x).sum().backward()
    assert len(runs) == 1
    assert len(rec.trace.steps_of(Kind.HOOK_RAN)) == len(runs)


@pytest.mark.parametrize("defer", [False, True], ids=["default", "deferred"])
def test_the_pool_thread_serves_a_second_caller_on_that_caller_s_queue(defer):
    """Two deep backward calls from two threads, one after the other: torch's idle pool thread serves both, each on
    its caller's queue; every graph task's depth is its nesting (0 to 65, twice), and every push of a call's tree is
    on the queue of the thread its outermost call was made on (also when the replay waits for the recording's end)."""
    from tests.engine.helpers import run_in_thread

    first, second = _Program(), _Program()

    def on_another_thread():
        second.caller = threading.get_ident()
        second.run()

    with tracer.record("torch", defer=defer) as rec:
        first.run()
        run_in_thread(on_another_thread)
    first.held.clear()
    second.held.clear()
    trace = rec.trace
    assert trace.meta["divergences"] == []
    tasks = {t["torch_id"]: t for t in trace.meta["graph_tasks"]}
    assert sorted(t["reentrant_depth"] for t in tasks.values()) == sorted(list(range(DEEP + 1)) * 2)

    def outermost(torch_id):
        while tasks[torch_id]["parent_torch_id"] >= 0:
            torch_id = tasks[torch_id]["parent_torch_id"]
        return torch_id

    by_number = {t["graph_task"]: t["torch_id"] for t in tasks.values()}
    started_on = {by_number[trace[int(s)].graph_task]: trace[int(s)].thread
                  for s in trace.steps_of(Kind.GRAPH_TASK_STARTED)}
    queues: dict[int, set] = {}
    for s in trace.steps_of(Kind.TASK_PUSHED):
        e = trace[int(s)]
        queues.setdefault(outermost(by_number[e.graph_task]), set()).add(e.queue)
    assert len(queues) == 2
    assert all(found == {f"cpu:{started_on[root]}"} for root, found in queues.items()), queues
