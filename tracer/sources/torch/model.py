"""agdb's model of PyTorch's engine, run beside a real backward to reconstruct what torch hides.

Imports neither torch nor the engine: it works on plain node keys, seq_nrs and next edges, so it can be tested
on hand-made graphs. The bridge feeds it what it observes (a node's pre-hook fired, its post-hook returned)
and it writes, through the TraceBuilder, what the engine must have done around that: the dependency counts,
exec_info, the pushes and pops of the ready queue, the input-buffer writes, the captures of autograd.grad.

NOTE [the model and the observed order]
The model runs the engine's rules (docs/engine-semantics.md, and the reference facts it cites): a task's
priority is (reentrant depth, seq_nr), larger first, AccumulateGrad's 2**64-1 first of all; ties leave the
heap in libstdc++'s order, which Python's heapq reproduces when tasks compare by key alone (NOTE [ready queue
order] in engine/_ready_queue.py); outputs are routed in output order; a task is pushed when its last counted
parent finished; with exec_info, nodes that are only captured are popped but do not run. When a node's
pre-hook fires, the model pops until it reaches a node that runs: if that is the observed node the
prediction held; if not, a *divergence* is recorded (where, what the model expected, what ran), and the model
follows what was observed so that one difference is not reported again at every later step.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

UINT64_MAX = 2**64 - 1
Capture = Callable[["GraphTaskModel", int, int], Any]
"""(graph task, node, result index) -> the captured grad, when the bridge knows it."""


class _Task(list):
    """A ready task: the list is its key [-reentrant depth, -seq_nr], compared alone (libstdc++'s tie order)."""

    __slots__ = ("gt", "node")

    def __init__(self, gt: GraphTaskModel, node: int, seq: int) -> None:
        super().__init__((-gt.depth, -seq))
        self.gt = gt
        self.node = node

    __eq__ = object.__eq__  # two tasks with equal keys are still two tasks
    __ne__ = object.__ne__
    __hash__ = object.__hash__


@dataclass(frozen=True)
class Graph:
    """The part of the autograd graph a backward call can reach, as plain data.

    seq: node key -> seq_nr; edges: node key -> next edges as (child key or 0, input_nr); num_inputs: input slots.
    """

    seq: dict[int, int]
    edges: dict[int, tuple[tuple[int, int], ...]]
    num_inputs: dict[int, int] = field(default_factory=dict)

    def topological_nrs(self, roots: Sequence[int]) -> dict[int, int]:
        """Each reachable node's topological_nr (0 for a node with no next edges, else 1 + its children's
        largest), computed without recursion: torch computes it when a node is made and does not expose it."""
        topo: dict[int, int] = {}
        for root in roots:
            if root in topo:
                continue
            stack = [(root, False)]
            while stack:
                key, expanded = stack.pop()
                if key in topo:
                    continue
                children = [c for c, _ in self.edges.get(key, ()) if c]
                if expanded:
                    topo[key] = 1 + max((topo[c] for c in children), default=-1)
                    continue
                stack.append((key, True))
                stack.extend((c, False) for c in children if c not in topo)
        return topo


@dataclass
class Divergence:
    """Where the observed order left the model's prediction."""

    graph_task: int
    step: int  # the event step at which it was noticed
    expected: int | None  # node key the model predicted (None: it predicted nothing more to run)
    observed: int | None  # node key that ran (None: the call ended while the model still expected a node)


class GraphTaskModel:
    """One backward()/autograd.grad() call as the model sees it."""

    def __init__(self, gt_id: int, depth: int, graph: Graph, graph_root: int, root_slots: Sequence[int],
                 inputs: Sequence[tuple[int, int]], accumulate_grad: bool, topo: dict[int, int]) -> None:
        self.id = gt_id
        self.depth = depth
        self.graph = graph
        self.graph_root = graph_root
        self.root_slots = tuple(root_slots)
        self.inputs = tuple(inputs)
        self.accumulate_grad = accumulate_grad
        self.topo = topo
        self.dependencies: dict[int, int] = {}
        self.pruned: list[int] = []
        self.needed: set[int] = set()
        self.captures: dict[int, list[tuple[int, int]]] = {}  # node -> [(input slot, result index)]
        self.exec_info = bool(inputs)
        self.buffers: dict[int, list[bool]] = {}  # not ready yet: which slots hold a defined grad
        self.running: int | None = None
        self.reached: int | None = None  # popped for its hooks (a tensor hook runs before the node's pre-hooks)
        self.popped: list[int] = []  # the nodes popped for this task in order (the execution-order witness's kind)
        self.root_grads: tuple = ()  # the grads a GraphRoot hands to the roots (summaries)
        self.finished = False

    # -- the engine's preparation (compute_dependencies, init_to_execute) -----------------------------------
    def prepare(self) -> int:
        """Dependency counts and exec_info, as the engine computes them; returns min_topo_nr."""
        topo = self.topo
        min_topo = min((topo.get(n, 0) for n, _ in self.inputs), default=0) if self.inputs else 0
        seen = {self.graph_root}
        todo = [self.graph_root]
        edges = self.graph.edges
        while todo:
            fn = todo.pop()
            if topo.get(fn, 0) < min_topo:
                self.pruned.append(fn)
                continue
            for child, _ in edges.get(fn, ()):
                if child:
                    self.dependencies[child] = self.dependencies.get(child, 0) + 1
                    if child not in seen:
                        seen.add(child)
                        todo.append(child)
        if self.exec_info:
            self._init_to_execute(min_topo)
        return min_topo

    def _init_to_execute(self, min_topo: int) -> None:
        for index, (node, slot) in enumerate(self.inputs):
            if self.accumulate_grad:
                self.needed.add(node)
            else:
                self.captures.setdefault(node, []).append((slot, index))
        edges = self.graph.edges

        def should_execute(n: int) -> bool:
            return n in self.needed or n in self.captures

        seen: set[int] = set()
        stack = [[self.graph_root, 0]]
        while stack:
            frame = stack[-1]
            fn, children = frame[0], edges.get(frame[0], ())
            child = 0
            while frame[1] < len(children):
                child = children[frame[1]][0]
                frame[1] += 1
                if not child:
                    continue
                if child not in seen:
                    seen.add(child)
                    break
                if should_execute(child):
                    self.needed.add(fn)
                child = 0
            if child:
                if self.topo.get(child, 0) >= min_topo:
                    stack.append([child, 0])
                continue
            stack.pop()
            if should_execute(fn) and stack:
                self.needed.add(stack[-1][0])

    def runs(self, node: int) -> bool:
        """Whether a popped task of `node` runs (without exec_info, every one does)."""
        return not self.exec_info or node in self.needed


class EngineModel:
    """The ready queue of one thread (shared by the graph tasks nested on it) and the events it implies.

    `emit` is the TraceBuilder-facing sink: an object with the builder's event methods, bound to a thread row
    and a queue row by the bridge (see bridge._Emitter).
    """

    def __init__(self, emit: Any, on_divergence: Callable[[Divergence], None]) -> None:
        self.emit = emit
        self.queue: list[_Task] = []
        self.on_divergence = on_divergence
        self.simulated: set[int] = set()  # nodes that run without hooks the bridge can see (GraphRoot)

    # -- a call begins ---------------------------------------------------------------------------------------
    def start(self, gt: GraphTaskModel, roots: Sequence[tuple[int, int]], keep_graph: bool, create_graph: bool
              ) -> None:
        """GraphTaskStarted, the dependency counts, exec_info and the root's push."""
        e = self.emit
        e.graph_task_started(graph_task=gt.id, graph_root=gt.graph_root, roots=roots, inputs=gt.inputs,
                             keep_graph=keep_graph, create_graph=create_graph,
                             accumulate_grad=gt.accumulate_grad, reentrant_depth=gt.depth)
        min_topo = gt.prepare()
        e.dependencies_computed(graph_task=gt.id, min_topo_nr=min_topo, dependencies=gt.dependencies.items(),
                                pruned=gt.pruned)
        if gt.exec_info:
            e.exec_info_computed(graph_task=gt.id, needed=sorted(gt.needed),
                                 captured=[(n, i, o) for n, caps in gt.captures.items() for i, o in caps])
        if gt.root_slots:  # one root: its grad goes to the slot of the root's edge
            e.buffer_written(graph_task=gt.id, node=gt.graph_root, slot=gt.root_slots[0], is_accumulation=False)
        self._push(gt, gt.graph_root)

    def _push(self, gt: GraphTaskModel, node: int) -> None:
        seq = gt.graph.seq.get(node, 0)
        heapq.heappush(self.queue, _Task(gt, node, seq))
        self.emit.task_pushed(graph_task=gt.id, node=node, seq_nr=seq, queue_length=len(self.queue))

    def _pop(self) -> _Task:
        task = heapq.heappop(self.queue)
        if task.node not in self.simulated:
            task.gt.popped.append(task.node)
        self.emit.task_popped(graph_task=task.gt.id, node=task.node, queue_length=len(self.queue))
        return task

    # -- what was observed ------------------------------------------------------------------------------------
    def node_started(self, gt: GraphTaskModel, node: int, inputs: Sequence[Any]) -> None:
        """`node`'s pre-hook fired in `gt`: pop up to it, checking the prediction, then NodeStarted."""
        self._reach(gt, node)
        gt.running = node
        self.emit.node_started(graph_task=gt.id, node=node, inputs=inputs)

    def hook_ran(self, gt: GraphTaskModel, node: int, kind: str, name: str) -> None:
        """A hook of the user's on `node` returned: HookRan, after popping up to the node (tensor and retains_grad
        hooks run before the node's pre-hooks; post_accumulate_grad hooks inside AccumulateGrad's apply)."""
        if kind != "post_accumulate_grad":
            self._reach(gt, node)
        self.emit.hook_ran(graph_task=gt.id, node=node, hook_kind=kind, hook_name=name)

    def _reach(self, gt: GraphTaskModel, node: int) -> None:
        if gt.reached != node:
            self.advance(gt, until=node)
            gt.reached = node

    def advance(self, gt: GraphTaskModel, until: int | None, captured: Capture | None = None) -> None:
        """Pop what the engine pops before `until` runs (None: until `gt` has no task left): captures and the
        nodes the bridge cannot see run in the model; any other node is a divergence."""
        while self.queue:
            head = self.queue[0]
            if until is None and head.gt is not gt:
                return  # the rest belongs to the calls this one is nested in
            task = self._pop()
            tgt, node = task.gt, task.node
            for _slot, index in tgt.captures.get(node, ()):
                self.emit.grad_captured(graph_task=tgt.id, node=node, output_index=index,
                                        grad=captured(tgt, node, index) if captured else None)
            if not tgt.runs(node):
                continue
            if node == until and tgt is gt:
                return
            if node in self.simulated:
                self._run_unseen(tgt, node)
                continue
            self._diverged(gt, expected=node, observed=until)
            if until is not None:
                self._take(gt, until)
                return
        if until is not None:
            self._diverged(gt, expected=None, observed=until)

    def _run_unseen(self, gt: GraphTaskModel, node: int) -> None:
        """A node no hook can be put on (GraphRoot): it runs in the model, passing the roots' grads on."""
        self.emit.node_started(graph_task=gt.id, node=node, inputs=())
        self.emit.node_finished(graph_task=gt.id, node=node, outputs=gt.root_grads)
        self.route(gt, node, [g is not None for g in gt.root_grads])

    def _head(self, gt: GraphTaskModel) -> _Task | None:
        """Pop up to the next task of `gt` that would run (captures on the way), or None."""
        while self.queue and self.queue[0].gt is gt:
            task = self._pop()
            if gt.runs(task.node):
                return task
        return None

    def _take(self, gt: GraphTaskModel, node: int) -> None:
        """Follow what was observed: remove `node`'s task wherever it sits (re-heapify: we are off-script)."""
        for i, task in enumerate(self.queue):
            if task.node == node and task.gt is gt:
                self.queue.pop(i)
                heapq.heapify(self.queue)
                self.emit.task_popped(graph_task=gt.id, node=node, queue_length=len(self.queue))
                gt.popped.append(node)
                return

    def _diverged(self, gt: GraphTaskModel, expected: int | None, observed: int | None) -> None:
        self.on_divergence(Divergence(gt.id, self.emit.num_events, expected, observed))

    def node_finished(self, gt: GraphTaskModel, node: int, outputs: Sequence[Any], defined: Sequence[bool]
                      ) -> None:
        """`node` returned `outputs` (one per next edge): NodeFinished, then route each to its child."""
        self.emit.node_finished(graph_task=gt.id, node=node, outputs=outputs)
        gt.running = gt.reached = None
        self.route(gt, node, defined)

    def route(self, gt: GraphTaskModel, node: int, defined: Sequence[bool]) -> None:
        """The engine's output routing, in output order (a None grad is routed like any other)."""
        for i, (child, slot) in enumerate(gt.graph.edges.get(node, ())):
            if not child:
                continue
            count = gt.dependencies.get(child)
            if count is None:
                continue  # torch raises "dependency not found"; the observed run will say what happened
            count -= 1
            if count:
                gt.dependencies[child] = count
            else:
                del gt.dependencies[child]
            buffer = gt.buffers.get(child)
            if buffer is None:
                if gt.exec_info and not (child in gt.needed or child in gt.captures):
                    continue
                buffer = [False] * max(gt.graph.num_inputs.get(child, 1), slot + 1)
            is_def = i < len(defined) and defined[i]
            if slot < len(buffer):
                self.emit.buffer_written(graph_task=gt.id, node=child, slot=slot,
                                         is_accumulation=bool(is_def and buffer[slot]))
                buffer[slot] = buffer[slot] or is_def
            if count:
                gt.buffers[child] = buffer
            else:
                gt.buffers.pop(child, None)
                self._push(gt, child)

    def finish(self, gt: GraphTaskModel, error: tuple[str, str] | None, captured: Capture | None = None) -> None:
        """The call returned (or raised `error` as (type, message)): drain what the model still holds."""
        if error is None:
            self.advance(gt, until=None, captured=captured)
        else:
            if gt.running is None:  # it failed before our pre-hook ran (in a hook of its own): the next in line
                if gt.reached is not None:  # a tensor hook of the node returned before another one raised
                    gt.running = gt.reached
                else:
                    head = self._head(gt)
                    gt.running = head.node if head is not None else None
            self.emit.error_raised(graph_task=gt.id, node=gt.running, error_type=error[0], message=error[1])
            # The engine leaves the failed task's queued tasks behind, stale; the model drops them.
            self.queue = [t for t in self.queue if t.gt is not gt]
            heapq.heapify(self.queue)
        gt.finished = True
        self.emit.graph_task_finished(graph_task=gt.id, has_error=error is not None)


def first_difference(witness: Sequence[int], order: Sequence[int], complete: bool = True) -> int | None:
    """Where two node orders first differ (an index), or None when they agree. `complete=False` (the call failed
    part-way): `order` may stop early, and only its length is compared."""
    for i, (a, b) in enumerate(zip(witness, order, strict=False)):
        if a != b:
            return i
    if len(witness) == len(order) or (not complete and len(order) < len(witness)):
        return None
    return min(len(witness), len(order))
