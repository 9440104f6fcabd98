"""agdb's model of PyTorch's engine, run beside a real backward to reconstruct what torch hides.

Imports neither torch nor the engine: it works on plain node keys, seq_nrs and next edges, so it can be tested
on hand-made graphs. The bridge feeds it what it observes (a node's pre-hook fired, its post-hook returned)
and it writes, through the TraceBuilder, what the engine must have done around that: the dependency counts,
exec_info, the pushes and pops of the ready queue, the input-buffer writes, the captures of autograd.grad.

NOTE [the model and the observed order]
The model runs the engine's rules, as tracer/replay/scheduler.py holds them (NOTE [scheduler rules]): a task's
priority is (reentrant depth, seq_nr), larger first, AccumulateGrad's 2**64-1 first of all; ties leave the
heap in libstdc++'s order; outputs are routed in output order; a task is pushed when its last counted parent
finished; with exec_info, nodes that are only captured are popped but do not run. When a node's
pre-hook fires, the model pops until it reaches a node that runs: if that is the observed node the
prediction held; if not, a *divergence* is recorded (where, what the model expected, what ran), and the model
follows what was observed so that one difference is not reported again at every later step.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from agdb.tracer.replay import scheduler
from agdb.tracer.replay.scheduler import ExecInfo, NodeTask, node_key
from agdb.tracer.sources.torch.columns import Counts, Edges, SeqNrs

Capture = Callable[["GraphTaskModel", int, int], Any]
"""(graph task, node, result index) -> the captured grad, when the bridge knows it."""


@dataclass(frozen=True)
class Graph:
    """The part of the autograd graph a backward call can reach, as plain data.

    seq: node key -> seq_nr (a dict, or the bridge's SeqNrs, shared by its graphs); edges: node key -> next edges as
    (child key or 0, input_nr), one entry for each node of the graph (a dict, or the bridge's Edges); num_inputs: input
    slots, of the nodes with more than one (a node not in it has one).
    """

    seq: dict[int, int] | SeqNrs
    edges: dict[int, tuple[tuple[int, int], ...]] | Edges
    num_inputs: dict[int, int] = field(default_factory=dict)

    def topological_nrs(self, roots: Sequence[int]) -> dict[int, int]:
        """Each node's topological_nr below `roots` (torch computes it when a node is made and does not expose it)."""
        return scheduler.topological_nrs(self.edges, roots)


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
        self.dependencies: dict[int, int] | Counts = {}
        self.pruned: list[int] = []
        self.info: ExecInfo | None = None  # exec_info, once prepared (None: every node runs)
        self.needed: set[int] = set()
        self.captures: dict[int, list[tuple[int, int]]] = {}  # node -> [(input slot, result index)]
        self.exec_info = bool(inputs)
        self.buffers: dict[int, list[bool]] = {}  # not ready yet: which slots hold a defined grad
        self.running: int | None = None
        self.reached: int | None = None  # popped for its hooks (a tensor hook runs before the node's pre-hooks)
        # The nodes popped for this task in order (the execution-order witness's kind), as an array: the ints a list
        # would hold are Edges' own, made as the nodes were routed (32 B a node of a million-node chain).
        self.popped = array("q")
        self.root_grads: tuple = ()  # the grads a GraphRoot hands to the roots (summaries)
        self.finished = False
        # Where the events of the thread that made the call, and of the thread that ran its nodes, go: the model's own
        # emitter when None. They differ when torch ran the call on another thread than its caller's, on the
        # caller's queue (its reentrant pool, past MAX_DEPTH nested calls).
        self.caller: Any = None
        self.runner: Any = None

    # -- the engine's preparation (compute_dependencies, init_to_execute) -----------------------------------
    def prepare(self) -> int:
        """Dependency counts and exec_info, as the engine computes them; returns min_topo_nr."""
        edges, topo = self.graph.edges, self.topo
        min_topo = scheduler.compute_min_topological_nr(self.inputs, topo)
        self.dependencies, self.pruned = scheduler.compute_dependencies(self.graph_root, edges, topo, min_topo)
        if self.exec_info:
            self.info = scheduler.init_to_execute(self.graph_root, edges, topo, self.inputs, self.accumulate_grad,
                                                  min_topo)
            self.needed, self.captures = self.info.needed, self.info.captures
        return min_topo

    def runs(self, node: int) -> bool:
        """Whether a popped task of `node` runs (without exec_info, every one does)."""
        return not self.exec_info or node in self.needed


class EngineModel:
    """The ready queue of one thread (shared by the graph tasks nested on it) and the events it implies.

    `emit` is the TraceBuilder-facing sink: an object with the builder's event methods, bound to a thread row
    and a queue row by the bridge (see emitter.Emitter).
    """

    def __init__(self, emit: Any, on_divergence: Callable[[Divergence], None]) -> None:
        self.emit = emit
        self.queue: list[NodeTask] = []  # its tasks' graph_task is a GraphTaskModel
        self.on_divergence = on_divergence
        self.simulated: set[int] = set()  # nodes that run without hooks the bridge can see (GraphRoot)

    # -- a call begins ---------------------------------------------------------------------------------------
    def start(self, gt: GraphTaskModel, roots: Sequence[tuple[int, int]], keep_graph: bool, create_graph: bool
              ) -> None:
        """GraphTaskStarted, the dependency counts, exec_info and the root's push (by the calling thread)."""
        e = gt.caller or self.emit
        e.graph_task_started(graph_task=gt.id, graph_root=gt.graph_root, roots=roots, inputs=gt.inputs,
                             keep_graph=keep_graph, create_graph=create_graph,
                             accumulate_grad=gt.accumulate_grad, reentrant_depth=gt.depth)
        min_topo = gt.prepare()
        counts = gt.dependencies  # in the order compute_dependencies counted them: the trace keeps that order
        keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        values = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
        e.dependencies_computed(graph_task=gt.id, min_topo_nr=min_topo, dependencies=np.column_stack((keys, values)),
                                pruned=gt.pruned)
        gt.dependencies = Counts.of(counts, keys, values)  # what route takes down from now on: an array by key
        if gt.exec_info:
            e.exec_info_computed(graph_task=gt.id, needed=sorted(gt.needed),
                                 captured=[(n, i, o) for n, caps in gt.captures.items() for i, o in caps])
        if gt.root_slots:  # one root: its grad goes to the slot of the root's edge
            e.buffer_written(graph_task=gt.id, node=gt.graph_root, slot=gt.root_slots[0], is_accumulation=False)
        self._push(gt, gt.graph_root, e)

    def _push(self, gt: GraphTaskModel, node: int, e: Any) -> None:
        seq = gt.graph.seq.get(node, 0)
        scheduler.push(self.queue, NodeTask(node_key(gt.depth, seq), gt, node))
        e.task_pushed(graph_task=gt.id, node=node, seq_nr=seq, queue_length=len(self.queue))

    def _pop(self, e: Any) -> NodeTask:
        """Pop the queue's front task: TaskPopped (by `e`'s thread), stale when its graph task is over (the engine
        discards it)."""
        task = scheduler.pop(self.queue)
        gt = task.graph_task
        if not gt.finished and task.node not in self.simulated:
            gt.popped.append(task.node)
        e.task_popped(graph_task=gt.id, node=task.node, queue_length=len(self.queue), stale=gt.finished)
        return task

    # -- what was observed ------------------------------------------------------------------------------------
    def node_started(self, gt: GraphTaskModel, node: int, inputs: Sequence[Any]) -> None:
        """`node`'s pre-hook fired in `gt`: pop up to it, checking the prediction, then NodeStarted."""
        if gt.reached != node:  # _reach, inline: once a node
            self.advance(gt, until=node)
        gt.running = node
        gt.reached = node
        (gt.runner or self.emit).node_started(graph_task=gt.id, node=node, inputs=inputs)

    def hook_ran(self, gt: GraphTaskModel, node: int, kind: str, name: str) -> None:
        """A hook of the user's on `node` returned: HookRan, after popping up to the node (tensor and retains_grad
        hooks run before the node's pre-hooks; post_accumulate_grad hooks inside AccumulateGrad's apply)."""
        if kind != "post_accumulate_grad":
            self._reach(gt, node)
        (gt.runner or self.emit).hook_ran(graph_task=gt.id, node=node, hook_kind=kind, hook_name=name)

    def _reach(self, gt: GraphTaskModel, node: int) -> None:
        if gt.reached != node:
            self.advance(gt, until=node)
            gt.reached = node

    def advance(self, gt: GraphTaskModel, until: int | None, captured: Capture | None = None) -> None:
        """Pop what the engine pops before `until` runs (None: until `gt` has no task left): captures and the
        nodes the bridge cannot see run in the model; any other node is a divergence. `gt`'s thread pops them."""
        e = gt.runner or self.emit
        while self.queue:
            head = self.queue[0]
            if until is None and head.graph_task is not gt and not head.graph_task.finished:
                return  # the rest belongs to the calls this one is nested in
            task = self._pop(e)
            tgt, node = task.graph_task, task.node
            if tgt.finished:
                continue  # a failed call's task, left behind (finish): discarded as the engine pops it
            for _slot, index in tgt.captures.get(node, ()):
                e.grad_captured(graph_task=tgt.id, node=node, output_index=index,
                                grad=captured(tgt, node, index) if captured else None)
            if not tgt.runs(node):
                continue
            if node == until and tgt is gt:
                return
            if node in self.simulated:
                self._run_unseen(tgt, node, e)
                continue
            self._diverged(gt, expected=node, observed=until)
            if until is not None:
                self._take(gt, until)
                return
        if until is not None:
            self._diverged(gt, expected=None, observed=until)

    def _run_unseen(self, gt: GraphTaskModel, node: int, e: Any) -> None:
        """A node no hook can be put on (GraphRoot): it runs in the model, passing the roots' grads on."""
        e.node_started(graph_task=gt.id, node=node, inputs=())
        e.node_finished(graph_task=gt.id, node=node, outputs=gt.root_grads)
        self.route(gt, node, [g is not None for g in gt.root_grads], e)

    def _head(self, gt: GraphTaskModel) -> NodeTask | None:
        """Pop up to the next task of `gt` that would run (captures and failed calls' tasks on the way), or None."""
        e = gt.runner or self.emit
        while self.queue and (self.queue[0].graph_task is gt or self.queue[0].graph_task.finished):
            task = self._pop(e)
            if task.graph_task is gt and gt.runs(task.node):
                return task
        return None

    def _take(self, gt: GraphTaskModel, node: int) -> None:
        """Follow what was observed: remove `node`'s task wherever it sits (re-heapify: we are off-script)."""
        for i, task in enumerate(self.queue):
            if task.node == node and task.graph_task is gt:
                self.queue.pop(i)
                scheduler.heapify(self.queue)
                (gt.runner or self.emit).task_popped(graph_task=gt.id, node=node, queue_length=len(self.queue))
                gt.popped.append(node)
                return

    def _diverged(self, gt: GraphTaskModel, expected: int | None, observed: int | None) -> None:
        self.on_divergence(Divergence(gt.id, self.emit.num_events, expected, observed))

    def node_finished(self, gt: GraphTaskModel, node: int, outputs: Sequence[Any], defined: Sequence[bool]
                      ) -> None:
        """`node` returned `outputs` (one per next edge): NodeFinished, then route each to its child."""
        e = gt.runner or self.emit
        e.node_finished(graph_task=gt.id, node=node, outputs=outputs)
        gt.running = gt.reached = None
        self.route(gt, node, defined, e)

    def route(self, gt: GraphTaskModel, node: int, defined: Sequence[bool], e: Any = None) -> None:
        """The engine's output routing, in output order (a None grad is routed like any other), by `gt`'s thread. A
        child with no count is passed over: torch raises "dependency not found" there, and the observed run says
        what happened."""
        e = e or gt.runner or self.emit
        buffers, gt_id = gt.buffers, gt.id
        for i, child, slot, is_ready in scheduler.route(gt.graph.edges.get(node, ()), gt.dependencies, gt.info):
            buffer = buffers.get(child)
            is_def = i < len(defined) and defined[i]
            if buffer is None:  # the first grad to reach `child`: its buffer holds none yet
                e.buffer_written(graph_task=gt_id, node=child, slot=slot, is_accumulation=False)
                if is_ready:
                    self._push(gt, child, e)
                else:
                    buffer = buffers[child] = [False] * max(gt.graph.num_inputs.get(child, 1), slot + 1)
                    buffer[slot] = is_def
                continue
            if slot < len(buffer):
                e.buffer_written(graph_task=gt_id, node=child, slot=slot,
                                 is_accumulation=bool(is_def and buffer[slot]))
                buffer[slot] = buffer[slot] or is_def
            if is_ready:
                del buffers[child]
                self._push(gt, child, e)

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
            (gt.runner or self.emit).error_raised(graph_task=gt.id, node=gt.running, error_type=error[0],
                                                  message=error[1])
            # The engine leaves the failed task's queued tasks behind with depth INT_MAX, in place (NOTE [scheduler
            # rules]): they come first, and the calls it was nested in pop and discard them.
            scheduler.mark_gone(self.queue, gt)
        gt.finished = True
        (gt.caller or self.emit).graph_task_finished(graph_task=gt.id, has_error=error is not None)


def first_difference(witness: Sequence[int], order: Sequence[int], complete: bool = True) -> int | None:
    """Where two node orders first differ (an index), or None when they agree. `complete=False` (the call failed
    part-way): `order` may stop early, and only its length is compared."""
    for i, (a, b) in enumerate(zip(witness, order, strict=False)):
        if a != b:
            return i
    if len(witness) == len(order) or (not complete and len(order) < len(witness)):
        return None
    return min(len(witness), len(order))
