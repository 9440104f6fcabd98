"""The autograd engine's scheduling rules on plain ints: the ready queue's key and pop order, output routing,
compute_dependencies and init_to_execute (exec_info).

One copy of the rules for the two places that rebuild the engine's scheduling from outside it: the replay, which
rebuilds a trace's ready queues at any step, and the real-PyTorch bridge's model of the engine, which runs beside
a torch backward to reconstruct what torch does not show. The engine keeps its own copy, on its own objects and
tuned for its hot paths; tests/tracer/test_scheduler.py pins the two together on random graphs run through it.

Nothing here knows an engine object or torch: a node is an int key (0 is no node: a null next edge), a graph is
`next_edges`, a mapping from a node to its next edges as (child, input_nr) pairs in output order, and seq_nrs and
topological_nrs are mappings from node to int. Imports the standard library only: never the engine, torch or textual.

NOTE [scheduler rules]
The rules as PyTorch 2.13's engine applies them (docs/engine-semantics.md, the sections in brackets).
- Ready-queue order [6.1]. A ready queue is a priority queue whose comparator lets out, first, a shutdown task;
  then a wake-up task (one with no node, pushed to wake a thread waiting on its graph task); then, among node
  tasks, the one of larger reentrant depth; then, at equal depth, the one of larger seq_nr. AccumulateGrad and
  Error nodes hold seq_nr UINT64_MAX, so they leave before every other node of their depth. A task whose graph
  task is gone (its backward returned or raised, leaving it queued) counts as depth INT_MAX, so it surfaces
  first and is discarded; its key changes in place, under a heap that is not rebuilt.
- Ties [6.2]. Equal keys leave neither first-in-first-out nor stably, but as the C++ library's heap makes them
  (libstdc++ on Linux): a push sifts up while the parent is strictly less; a pop walks the hole from the root to
  a leaf through the better child (the right one when the two are equal), drops the last task in and sifts it
  up. Python's heapq makes exactly these moves when tasks compare by key alone, with no tie-breaking counter.
  So a task here *is* its key, a list [kind, -depth, -seq_nr] (kind 0 shutdown, 1 wake-up, 2 node): heapq's
  min-heap lets out what torch's max-heap lets out, and compares keys in C.
- Routing [5.3, 6.3]. A node that ran hands its results on in output order: each non-null next edge takes its
  child's dependency count down by one (a count reaching 0 is dropped: the child is ready). With exec_info, a
  child that should not execute gets no buffer and no task, though its count still falls. A child is pushed
  once, when its last counted parent ran, so children ready together are pushed in next-edge order. An
  undefined (None) result is routed like any other.
- compute_dependencies [3.4]. A depth-first walk from the root with a LIFO stack. A node whose topological_nr
  is below min_topo_nr is not expanded (it is pruned, and keeps the count its parents gave it); an expanded
  node adds one to each child's count per non-null edge (two edges to one child count two), and a child is
  pushed the first time it is counted. The root gets no count.
- min_topo_nr [4.1]. The smallest topological_nr among the output edges' nodes (`inputs=` of backward or grad),
  0 without outputs. A path from X to Y implies topo(X) > topo(Y), so nothing below it can reach an output.
- init_to_execute [4.2, 4.3]. Each output's node gets an entry: *needed* for backward(inputs=), a *capture*
  (input_nr, result index) for grad. Then one depth-first walk from the root, with one seen set and next edges
  in order: a child already seen that should execute (needed or captured) makes the current node needed; a new
  child is marked seen and descended into unless its topological_nr is below min_topo_nr; a node whose
  children are done and that should execute makes its parent on the stack needed. The outputs are not marked
  seen beforehand, so the walk goes on below an output that lies above another. At run time a needed node runs,
  a captured-only node is popped and captured but does not run, and any other node never gets a task. Without
  outputs there is no exec_info, and every reachable node runs.
- topological_nr [2.1]. The longest path from a node down to a sink: 0 for a node with no non-null next edge,
  else 1 + its children's largest. torch computes it as edges are attached and does not show it.
"""
from __future__ import annotations

import heapq
from itertools import chain, islice
from operator import eq, lt
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from agdb.tracer.store.schema import INT_MAX, WAKE_UP_PRIORITY

KIND_SHUTDOWN, KIND_WAKE_UP, KIND_NODE = 0, 1, 2
"""A key's first element: which kind of task it is (the smallest leaves first)."""

NextEdges = Mapping[int, Sequence[tuple[int, int]]]
"""node -> its next edges as (child, input_nr), in output order; child 0 for a null edge."""


def node_key(depth: int, seq_nr: int) -> list[int]:
    """The key of a node's task in a graph task of reentrant depth `depth` (NOTE [scheduler rules])."""
    return [KIND_NODE, -depth, -seq_nr]


def wake_up_key() -> list[int]:
    """The key of a wake-up task (no node): it leaves before every node task."""
    return [KIND_WAKE_UP, 0, 0]


def priority(key: Sequence[int]) -> tuple[int, int]:
    """(reentrant depth, seq_nr) of a node task's key, as the queue compares it; WAKE_UP_PRIORITY for a wake-up."""
    if key[0] != KIND_NODE:
        return WAKE_UP_PRIORITY
    return (-key[1], -key[2])


class NodeTask(list):
    """A queued task: the list is its key, and tasks compare (and are equal) by key alone, in C (NOTE [scheduler
    rules]); `graph_task` and `node` say whose it is (the graph task as its user keys them: an id, or an object),
    `push_step` when it was pushed."""

    __slots__ = ("graph_task", "node", "push_step")

    def __init__(self, key: Iterable[int], graph_task: Any, node: int, push_step: int = -1) -> None:
        list.__init__(self, key)
        self.graph_task = graph_task
        self.node = node
        self.push_step = push_step

    def clone(self) -> NodeTask:
        """A copy with a key of its own (a gone graph task's keys change in place)."""
        task = _new_list(NodeTask)  # no __init__ call: replay seeks clone whole queues
        task.extend(self)
        task.graph_task = self.graph_task
        task.node = self.node
        task.push_step = self.push_step
        return task


_new_list = list.__new__


push = heapq.heappush
"""Push a task onto a ready queue's heap (libstdc++'s push_heap: NOTE [scheduler rules])."""
pop = heapq.heappop
"""Pop the task that leaves first from a ready queue's heap (libstdc++'s pop_heap: NOTE [scheduler rules])."""
heapify = heapq.heapify
"""Rebuild a heap whose tasks were taken out of the middle: the engine never does, only a model off its script."""


def pop_order(heap: list[NodeTask]) -> list[NodeTask]:
    """The order the heap's tasks would leave in if nothing more were pushed; the heap is left as it is.

    With distinct keys every pop of a heap takes the least key, so a sort gives the order. Ties leave in the order
    the heap's shape dictates (NOTE [scheduler rules]), and so do the tasks of a heap that a gone graph task's keys,
    changed in place, left out of order (a pop takes the front task, whatever its key): only popping shows those.
    """
    # Both checks iterate in C: a wide graph's queue holds thousands of tasks, and a seek lists every one.
    parents = chain.from_iterable(zip(heap, heap, strict=True))  # heap[(i - 1) // 2] for i = 1, 2, ...
    if not any(map(lt, islice(heap, 1, None), parents)):
        order = sorted(heap)
        if not any(map(eq, order, islice(order, 1, None))):
            return order
    copy = list(heap)
    return [heapq.heappop(copy) for _ in range(len(copy))]


def mark_gone(heap: list[NodeTask], graph_task: Any) -> None:
    """`graph_task` is gone: its node tasks left in `heap` take depth INT_MAX, in place, without re-heapifying."""
    for task in heap:
        if task.graph_task == graph_task and task[0] == KIND_NODE:
            task[1] = -INT_MAX


class ExecInfo(NamedTuple):
    """A graph task's exec_info: the needed nodes, and the captures of autograd.grad per node."""

    needed: set[int]
    captures: dict[int, list[tuple[int, int]]]
    """node -> [(input_nr read, result index written)]"""

    def should_execute(self, node: int) -> bool:
        """Needed, or captured: the node gets a task."""
        return node in self.needed or node in self.captures


def route(next_edges: Sequence[tuple[int, int]], dependencies: dict[int, int], exec_info: ExecInfo | None
          ) -> list[tuple[int, int, int, bool]]:
    """Hand a node's results on (NOTE [scheduler rules]): take its children's counts in `dependencies` down.

    Returns (output index, child, input_nr, is_ready) for each result that goes into a child's buffer, in output
    order; a child that is ready is to be pushed. A child with no count is skipped (the engine raises
    "dependency not found" there).
    """
    routed = []
    for i, (child, input_nr) in enumerate(next_edges):
        if not child:
            continue
        count = dependencies.get(child)
        if count is None:
            continue
        if count == 1:
            del dependencies[child]
        else:
            dependencies[child] = count - 1
        if exec_info is not None and not exec_info.should_execute(child):
            continue
        routed.append((i, child, input_nr, count == 1))
    return routed


def compute_min_topological_nr(outputs: Sequence[tuple[int, int]], topological_nr: Mapping[int, int]) -> int:
    """The smallest topological_nr among the output edges' nodes; 0 without outputs."""
    return min((topological_nr.get(node, 0) for node, _ in outputs), default=0)


def compute_dependencies(root: int, next_edges: NextEdges, topological_nr: Mapping[int, int], min_topo_nr: int
                         ) -> tuple[dict[int, int], list[int]]:
    """(the dependency count of each node below `root`, the nodes not expanded for a topological_nr below
    `min_topo_nr` in the order the walk met them). The counts are in the order the walk first counted them."""
    dependencies: dict[int, int] = {}
    pruned: list[int] = []
    stack = [root]
    while stack:
        fn = stack.pop()
        if topological_nr.get(fn, 0) < min_topo_nr:
            pruned.append(fn)
            continue
        for child, _ in next_edges.get(fn, ()):
            if child:
                count = dependencies.get(child)
                if count is None:
                    dependencies[child] = 1
                    stack.append(child)
                else:
                    dependencies[child] = count + 1
    return dependencies, pruned


def init_to_execute(root: int, next_edges: NextEdges, topological_nr: Mapping[int, int],
                    outputs: Sequence[tuple[int, int]], accumulate_grad: bool, min_topo_nr: int) -> ExecInfo:
    """exec_info for a call with output edges `outputs` (node, input_nr): backward(inputs=) when
    `accumulate_grad`, else autograd.grad (NOTE [scheduler rules])."""
    info = ExecInfo(set(), {})
    needed, captures = info.needed, info.captures
    for index, (node, input_nr) in enumerate(outputs):
        if accumulate_grad:
            needed.add(node)
        else:
            captures.setdefault(node, []).append((input_nr, index))
    should_execute = info.should_execute
    seen: set[int] = set()
    stack = [[root, 0]]
    while stack:
        frame = stack[-1]
        fn, edges = frame[0], next_edges.get(frame[0], ())
        child = 0
        while frame[1] < len(edges):
            child = edges[frame[1]][0]
            frame[1] += 1
            if not child:
                continue
            if child not in seen:
                seen.add(child)
                break
            if should_execute(child):
                needed.add(fn)
            child = 0
        if child:
            if topological_nr.get(child, 0) >= min_topo_nr:
                stack.append([child, 0])
            continue
        stack.pop()
        if stack and should_execute(fn):
            needed.add(stack[-1][0])
    return info


def topological_nrs(next_edges: NextEdges, roots: Iterable[int]) -> dict[int, int]:
    """The topological_nr of every node reachable from `roots`, computed without recursion, in post-order (the last
    child first).

    A node stays on the stack, under its children, until each of them has a number; then it takes one more than the
    largest. One lookup of its edges a visit and no pairs pushed: the bridge runs this on every graph it
    reconstructs (on the 10k chain 6 ms, against 18 ms with a (node, expanded) pair pushed and a list of children
    made per visit)."""
    topo: dict[int, int] = {}
    get, number = next_edges.get, topo.get
    for root in roots:
        if root in topo:
            continue
        stack = [root]
        push, pop = stack.append, stack.pop
        while stack:
            key = stack[-1]
            if key in topo:  # pushed by two parents
                pop()
                continue
            high, waiting = -1, False
            for child, _ in get(key, ()):
                if child:
                    nr = number(child)
                    if nr is None:
                        waiting = True
                        push(child)
                    elif nr > high:
                        high = nr
            if not waiting:
                pop()
                topo[key] = high + 1
    return topo
