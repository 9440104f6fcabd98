"""The shared scheduler rules (tracer/replay/scheduler.py) against the engine they model.

Random graphs run through the engine under an observer. Given the same graph as int keys (node uids, seq_nrs,
next edges) and nothing else, the scheduler must predict what the engine did: every topological_nr, the
dependency counts and pruned nodes, exec_info under `inputs=`, and the order in which tasks left the CPU ready
queue and nodes ran, reentrant backward calls included. The ready-queue key and heap are also checked push by
push and pop by pop against the engine's ReadyQueue.
"""
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from agdb import engine, tracer
from agdb.engine._engine import GraphTask, NodeTask, ReadyQueue
from agdb.engine._node import Node
from agdb.tracer.replay import scheduler
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from tests.engine.helpers import run_in_thread

TIE_SEQ = 2**40
"""The seq_nr forced on the `ties` nodes: ordinary nodes that tie with each other (engine-semantics §15 F)."""
UNARY = ("exp", "sin", "cos", "tanh", "scale")
REENTRANT = ("reent", "reent_low")
BINARY = ("add", "mul", "sub")
ENDINGS = ("backward", "backward_inputs", "grad")


# -- random programs ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """A random engine program as plain data. Values are numbered: the leaves (`leaves` holds requires_grad),
    then the outputs of each op of `ops` in turn (`unbind` makes three, every other op one). `roots` are summed
    and differentiated together (several: a GraphRoot), with `inputs` as `inputs=` of backward or the inputs of
    autograd.grad; the grad_fns of `ties` get seq_nr TIE_SEQ."""

    leaves: tuple[bool, ...]
    ops: tuple[tuple[str, tuple[int, ...]], ...]
    roots: tuple[int, ...]
    ending: str
    inputs: tuple[int, ...]
    ties: tuple[int, ...]


@st.composite
def specs(draw, reentrant: bool = True) -> Spec:
    """Random Specs: shared subexpressions, x * x, stacks of leaves, multi-output nodes, forced seq_nr ties,
    reentrant backward calls, one to three roots, and subsets of the values as inputs."""
    leaves = (True,) + tuple(draw(st.lists(st.booleans(), max_size=7)))
    requires = list(leaves)
    ops = []
    kinds = ("unary", "binary", "binary", "stack", "unbind") + (("reentrant",) if reentrant else ())
    for _ in range(draw(st.integers(3, 14))):
        index = st.integers(0, len(requires) - 1)
        kind = draw(st.sampled_from(kinds))
        if kind in ("unary", "reentrant"):
            op, args = draw(st.sampled_from(UNARY if kind == "unary" else REENTRANT)), (draw(index),)
        elif kind == "binary":
            op, args = draw(st.sampled_from(BINARY)), (draw(index), draw(index))
        elif kind == "stack":  # often of leaves only: four or more AccumulateGrads ready at once tie (§6.2)
            among = st.integers(0, len(leaves) - 1) if draw(st.booleans()) else index
            op, args = "stack", tuple(draw(st.lists(among, min_size=2, max_size=8)))
        else:
            op, args = "unbind", (draw(index),)
        ops.append((op, args))
        requires.extend([any(requires[a] for a in args)] * (3 if op == "unbind" else 1))
    requiring = [i for i, r in enumerate(requires) if r]
    pick = st.sampled_from(requiring)
    roots = (requiring[-1],) + tuple(draw(st.lists(pick, max_size=2)))  # the last value: most of the graph
    ending = draw(st.sampled_from(ENDINGS))
    inputs = tuple(draw(st.lists(pick, min_size=1, max_size=3, unique=True))) if ending != "backward" else ()
    nonleaf = [i for i in requiring if i >= len(leaves)]
    ties = tuple(draw(st.lists(st.sampled_from(nonleaf), max_size=4, unique=True))) if nonleaf else ()
    return Spec(leaves, tuple(ops), roots, ending, inputs, ties)


def _reentrant(low: bool) -> type:
    class Reentrant(engine.autograd.Function):
        """a * 3, whose backward runs a backward of its own inside the node (depth one more)."""

        @staticmethod
        def forward(ctx, a):
            return a * 3

        @staticmethod
        def backward(ctx, g):
            with engine.enable_grad():
                q = engine.ones(3, requires_grad=True)
                p = engine.ones(3, requires_grad=True)
                r = (q.exp() * p).sin().sum()
                if low:  # seq_nrs below every outer node's: only the depth puts the inner tasks first (§15 G)
                    node, seq = r.grad_fn, 0
                    while node is not None and node.name() != "torch::autograd::AccumulateGrad":
                        node._set_sequence_nr(seq)
                        node, seq = node.next_functions[0][0], seq + 1
                engine.autograd.backward(r)
            return g * 3

    return Reentrant


_REENTRANT = {"reent": _reentrant(False).apply, "reent_low": _reentrant(True).apply}
_OPS = {
    "exp": lambda v: v.exp(), "sin": lambda v: v.sin(), "cos": lambda v: v.cos(), "tanh": lambda v: v.tanh(),
    "scale": lambda v: v * 0.5, "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
    "stack": lambda *vs: engine.stack(list(vs)).sum(0), **_REENTRANT,
}


def _build(spec: Spec) -> tuple[list, list]:
    """The roots (summed) and inputs of `spec`, its forward run on the engine."""
    values = [engine.tensor([0.1 * (i + 1), -0.2, 0.3], requires_grad=r) for i, r in enumerate(spec.leaves)]
    for op, args in spec.ops:
        if op == "unbind":
            values.extend(part.expand(3) for part in values[args[0]].unbind(0))
        else:
            values.append(_OPS[op](*(values[a] for a in args)))
    for i in spec.ties:
        values[i].grad_fn._set_sequence_nr(TIE_SEQ)
    return [values[i].sum() for i in spec.roots], [values[i] for i in spec.inputs]


def _run(spec: Spec, roots: list, inputs: list, retain_graph: bool | None = None) -> None:
    if spec.ending == "backward":
        engine.autograd.backward(roots, retain_graph=retain_graph)
    elif spec.ending == "backward_inputs":
        engine.autograd.backward(roots, inputs=inputs, retain_graph=retain_graph)
    else:
        engine.autograd.grad(roots, inputs, retain_graph=retain_graph, allow_unused=True)


# -- the engine's truth, through its observer API ----------------------------------------------------------
@dataclass
class Graph:
    """One graph task's graph as int keys, as it stood when the engine started it."""

    root: int
    next_edges: dict[int, tuple[tuple[int, int], ...]]
    seq_nr: dict[int, int]
    outputs: tuple[tuple[int, int], ...]
    accumulate_grad: bool
    engine_topo: dict[int, int]  # the engine's own topological_nrs, to check the scheduler's against


def _snapshot(gt) -> Graph:
    edges, seq, topo = {}, {}, {}
    stack = [gt.graph_root] + [fn for fn, _ in gt.outputs]
    while stack:
        n = stack.pop()
        if n._uid in edges:
            continue
        edges[n._uid] = tuple((c._uid if c is not None else 0, nr) for c, nr in n.next_edges)
        seq[n._uid], topo[n._uid] = n._sequence_nr(), n._topo  # not _topological_nr(): it would freeze the node
        stack.extend(c for c, _ in n.next_edges if c is not None)
    return Graph(gt.graph_root._uid, edges, seq, tuple((fn._uid, nr) for fn, nr in gt.outputs), gt.accumulate_grad,
                 topo)


class Watcher:
    """An engine observer keeping, per graph task, its graph, depth, dependency counts and exec_info as the engine
    computed them, and the tasks popped and nodes run, in order."""

    def __init__(self) -> None:
        self.graphs: dict[int, Graph] = {}
        self.depth: dict[int, int] = {}
        self.parent: dict[int, tuple[int, int] | None] = {}  # the (graph task, node) running when it started
        self.dependencies: dict[int, tuple] = {}  # (min_topo_nr, counts as items in order, pruned in order)
        self.exec_info: dict[int, tuple] = {}  # (needed, captures)
        self.popped: list[tuple[int, int]] = []
        self.ran: list[tuple[int, int]] = []
        self._running: list[tuple[int, int]] = []

    def graph_task_started(self, gt) -> None:
        self.graphs[gt.id] = _snapshot(gt)
        self.depth[gt.id] = gt.reentrant_depth
        self.parent[gt.id] = self._running[-1] if self._running else None

    def dependencies_computed(self, gt, min_topo_nr, pruned) -> None:
        self.dependencies[gt.id] = (min_topo_nr, [(n._uid, c) for n, c in gt.dependencies.items()],
                                    [n._uid for n in pruned])

    def exec_info_computed(self, gt) -> None:
        self.exec_info[gt.id] = ({n._uid for n, info in gt.exec_info.items() if info.needed},
                                 {n._uid: list(info.captures) for n, info in gt.exec_info.items() if info.captures})

    def task_popped(self, gt, task, queue) -> None:
        if gt is not None and task.fn is not None:  # not a stale task another test left on this thread's queue
            self.popped.append((gt.id, task.fn._uid))

    def node_started(self, gt, node, inputs) -> None:
        self.ran.append((gt.id, node._uid))
        self._running.append((gt.id, node._uid))

    def node_finished(self, gt, node, outputs) -> None:
        self._running.pop()


def _watch(action) -> Watcher:
    watcher = Watcher()
    handle = engine.add_observer(watcher)
    try:
        action()
    finally:
        handle.remove()
    return watcher


# -- the scheduler's prediction ----------------------------------------------------------------------------
class Prediction:
    """Runs a thread's graph tasks on one ready queue with the scheduler's rules alone. The graphs, and which node
    runs which nested backward, are the program's; the counts, exec_info, depths and order are the scheduler's."""

    def __init__(self, graphs: dict[int, Graph], nested: dict[tuple[int, int], list[int]]) -> None:
        self.graphs, self.nested = graphs, nested
        self.heap: list[scheduler.NodeTask] = []
        self.state: dict[int, list] = {}  # graph task -> [dependencies, exec_info, outstanding tasks]
        self.depth: dict[int, int] = {}
        self.topo: dict[int, dict[int, int]] = {}
        self.prepared: dict[int, tuple] = {}  # as Watcher.dependencies and Watcher.exec_info
        self.popped: list[tuple[int, int]] = []
        self.ran: list[tuple[int, int]] = []

    def run(self, gt: int, depth: int) -> None:
        """Execute graph task `gt` until its last task is done, as thread_main does."""
        g = self.graphs[gt]
        topo = self.topo[gt] = scheduler.topological_nrs(g.next_edges, [g.root] + [n for n, _ in g.outputs])
        min_topo = scheduler.compute_min_topological_nr(g.outputs, topo)
        dependencies, pruned = scheduler.compute_dependencies(g.root, g.next_edges, topo, min_topo)
        info = None
        if g.outputs:
            info = scheduler.init_to_execute(g.root, g.next_edges, topo, g.outputs, g.accumulate_grad, min_topo)
        self.prepared[gt] = ((min_topo, list(dependencies.items()), pruned), info)
        self.depth[gt] = depth
        self.state[gt] = [dependencies, info, 0]
        self._push(gt, g.root)
        while self.state[gt][2]:
            task = scheduler.pop(self.heap)
            owner, node = task.graph_task, task.node
            self.popped.append((owner, node))
            dependencies, info, _ = self.state[owner]
            if info is None or node in info.needed:
                self.ran.append((owner, node))
                for inner in self.nested.get((owner, node), ()):
                    self.run(inner, self.depth[owner] + 1)
                for _, child, _, is_ready in scheduler.route(self.graphs[owner].next_edges.get(node, ()),
                                                             dependencies, info):
                    if is_ready:
                        self._push(owner, child)
            self.state[owner][2] -= 1

    def _push(self, gt: int, node: int) -> None:
        key = scheduler.node_key(self.depth[gt], self.graphs[gt].seq_nr[node])
        scheduler.push(self.heap, scheduler.NodeTask(key, gt, node))
        self.state[gt][2] += 1


def _predict(watcher: Watcher) -> Prediction:
    nested: dict[tuple[int, int], list[int]] = {}
    for gt, parent in watcher.parent.items():
        if parent is not None:
            nested.setdefault(parent, []).append(gt)
    prediction = Prediction(watcher.graphs, nested)
    for gt, parent in watcher.parent.items():
        if parent is None:
            prediction.run(gt, 0)
            assert prediction.heap == [], "a graph task left tasks behind"
    return prediction


# -- the properties ------------------------------------------------------------------------------------------
@settings(max_examples=500, deadline=None)
@given(specs())
def test_scheduler_predicts_what_the_engine_did(spec):
    """On a random graph the scheduler predicts the engine's topological_nrs, dependency counts, pruned nodes,
    exec_info, reentrant depths, and the order tasks left the ready queue and nodes ran."""
    def action() -> None:
        roots, inputs = _build(spec)
        _run(spec, roots, inputs)

    truth = _watch(action)
    predicted = _predict(truth)
    assert predicted.depth == truth.depth
    for gt, graph in truth.graphs.items():
        assert predicted.topo[gt] == graph.engine_topo
        counts, info = predicted.prepared[gt]
        assert counts == truth.dependencies[gt]
        if info is None:
            assert gt not in truth.exec_info
        else:
            assert (info.needed, info.captures) == truth.exec_info[gt]
    assert predicted.popped == truth.popped
    assert predicted.ran == truth.ran


@settings(max_examples=50, deadline=None)
@given(specs(reentrant=False))
def test_the_engine_order_is_deterministic(spec):
    """The same graph run twice on one thread pops its tasks in the same order (a GraphRoot or Identity made anew
    by each call aside): the order is a function of the graph, which is what makes it predictable."""
    roots, inputs = _build(spec)
    orders = []
    for retain_graph in (True, False):
        truth = _watch(lambda retain_graph=retain_graph: _run(spec, roots, inputs, retain_graph))
        (graph,) = truth.graphs.values()
        made = graph.root if len(spec.roots) > 1 else None  # a GraphRoot (an Identity never gets a task)
        orders.append([0 if node == made else node for _, node in truth.popped])
    assert orders[0] == orders[1]


_QUEUE_OPS = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 2), st.sampled_from([0, 1, 2, 7, 2**64 - 1])),
    st.tuples(st.just("wake_up"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("pop"), st.just(0), st.just(0)),
    st.tuples(st.just("gone"), st.integers(0, 2), st.just(0)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(_QUEUE_OPS)
def test_keys_and_heap_match_the_engine_ready_queue(ops):
    """Pushes (nodes at depths 0-2 with tied seq_nrs, wake-up tasks), pops and graph tasks going away, on the
    engine's ReadyQueue and on a scheduler heap: the same keys, the same tasks popped, and pop_order foretells
    the pops that empty the queue."""
    queue = ReadyQueue("cpu:test")
    tasks = [GraphTask(False, False, depth, queue, [], True) for depth in range(3)]
    heap: list[scheduler.NodeTask] = []
    made: dict[int, tuple] = {}  # id of an engine task -> (the number of its scheduler twin, the task: no id reused)
    for number, (op, depth, seq) in enumerate(ops):
        gt = tasks[depth]
        if op in ("push", "wake_up") and not gt.gone:
            task = NodeTask(gt, Node(sequence_nr=seq) if op == "push" else None, None)
            key = scheduler.node_key(depth, seq) if op == "push" else scheduler.wake_up_key()
            assert list(task) == key
            queue.push(task)
            scheduler.push(heap, scheduler.NodeTask(key, depth, number))
            made[id(task)] = (number, task)
        elif op == "pop" and heap:
            assert made[id(queue.pop())][0] == scheduler.pop(heap).node
        elif op == "gone" and not gt.gone:
            gt.mark_gone()
            scheduler.mark_gone(heap, depth)
    assert [list(t) for t in queue.heap] == [list(t) for t in heap]
    foretold = [t.node for t in scheduler.pop_order(heap)]
    assert [made[id(queue.pop())][0] for _ in range(len(queue))] == foretold


def test_shutdown_leaves_first_then_wake_up_then_depth_then_seq_nr():
    """A shutdown task leaves before a wake-up task, which leaves before any node; then depth, then seq_nr,
    as the engine's keys order them."""
    gt0, gt1 = (GraphTask(False, False, d, ReadyQueue("q"), [], True) for d in (0, 1))
    engine_keys = [list(NodeTask(None, None, None, is_shutdown=True)), list(NodeTask(gt0, None, None)),
                   list(NodeTask(gt1, Node(sequence_nr=1), None)), list(NodeTask(gt0, Node(sequence_nr=9), None)),
                   list(NodeTask(gt0, Node(sequence_nr=8), None))]
    assert sorted(engine_keys) == engine_keys
    assert [scheduler.KIND_SHUTDOWN, 0, 0] == engine_keys[0]
    assert scheduler.wake_up_key() == engine_keys[1]
    assert [scheduler.node_key(1, 1), scheduler.node_key(0, 9), scheduler.node_key(0, 8)] == engine_keys[2:]
    assert [scheduler.priority(k) for k in engine_keys[1:]] == [(-1, -1), (1, 1), (0, 9), (0, 8)]


class _FailingReentrant(engine.autograd.Function):
    """a * 3, whose backward runs an inner backward that fails while one of its tasks is still queued."""

    @staticmethod
    def forward(ctx, a):
        return a * 3

    @staticmethod
    def backward(ctx, g):
        with engine.enable_grad():
            q = engine.ones(2, requires_grad=True)
            e, c = q.exp(), q.cos()  # Cos (the larger seq_nr) runs first, and refuses: Exp stays queued
            c.grad_fn.register_prehook(_refuse)
            engine.autograd.backward((e + c).sum())
        return g * 3


class _Refused(Exception):
    """Raised on purpose by a pre-hook inside a reentrant backward."""


def _refuse(grad_outputs):
    raise _Refused("refused")


def test_replay_shows_a_queue_left_out_of_order_in_the_order_it_empties():
    """An inner backward fails inside an outer one, both leaving a task queued; once both are gone their tasks take
    depth INT_MAX in place and the heap is out of order (the outer task has the larger seq_nr but sits below).
    The replay lists them in the order the engine's next backward then pops them, not sorted by key."""
    def program():
        with tracer.record() as rec:
            x, y = engine.ones(2, requires_grad=True), engine.ones(2, requires_grad=True)
            e = y.exp()
            e.grad_fn._set_sequence_nr(10**9)  # left queued by the outer graph task, its seq_nr above the inner's
            a = _FailingReentrant.apply(x)
            a.grad_fn._set_sequence_nr(10**9 + 1)  # runs first, and fails with the inner backward
            try:
                (a + e).sum().backward()
            except _Refused:
                pass
            (x * 2).sum().backward()
        return rec.trace

    trace = run_in_thread(program)
    finished = [e.step for e in trace if isinstance(e, ev.GraphTaskFinished)]
    (queue,) = [q for q in Replay(trace).state_at(finished[1]).ready_queues if q.tasks]
    assert [t.priority for t in queue.tasks] == [(scheduler.INT_MAX, queue.tasks[0].seq_nr), (scheduler.INT_MAX, 10**9)]
    assert queue.tasks[0].seq_nr < 10**9  # the inner task leaves first, though its key is the smaller
    popped = [(e.node, e.graph_task) for e in trace if isinstance(e, ev.TaskPopped) and e.step > finished[1]]
    assert [(t.node, t.graph_task) for t in queue.tasks] == popped[:2]
