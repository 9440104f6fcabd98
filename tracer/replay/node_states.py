"""Each node's state at a step (not created, waiting, ready, running, done, raised, pruned...), for every view.

Imports numpy and the tracer only. The TUI's graph panel and the Graphviz export both style nodes by it.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.store.arrays import Intervals, lookup_sorted, unique_first, unique_sorted
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.tasks import TaskIndex
from agdb.tracer.store.trace import Trace

STATES = ("unreached", "counted", "waiting", "ready", "running", "done", "pruned", "skipped", "captured",
          "not_created", "to_push", "raised")
"""A node's state at a step; a state's code is its index here (new states go at the end: codes are kept).

not_created: the forward pass has not made it yet; unreached: made, but no graph task has reached it;
counted: a running graph task counts its dependencies; waiting: its input buffer is partly filled (in
not_ready) and its count is not 0 yet; to_push: its count reached 0 and the engine is about to push it;
ready: in a ready queue; running: its apply is on a thread's stack; done: it ran; raised: its backward raised
an error; pruned: compute_dependencies did not expand it (topo < min_topo_nr), kept after its graph task ended
until the node runs again (NOTE [pruning as history]); skipped:
exec_info does not need it; captured: autograd.grad captures the grad flowing into it.
"""
STATE_CODE = {name: i for i, name in enumerate(STATES)}
STATE_TEXT = {"unreached": "not reached", "counted": "counted", "waiting": "waiting (not_ready)",
              "ready": "ready (in a queue)", "running": "running", "done": "done",
              "pruned": "pruned: topo < min_topo_nr", "skipped": "skipped by exec_info",
              "captured": "captured (autograd.grad)", "not_created": "not created yet",
              "to_push": "count 0, to push", "raised": "raised an error"}
"""What each state means, as a legend says it."""
STATE_LABEL = {s: s.replace("_", " ") for s in STATES}
"""Each state as a list column shows it (one or two short words)."""


_IOTA = np.arange(0, dtype=np.int32)


def _iota(k: int) -> np.ndarray:
    """0, 1, ..., k-1 as a view of one array kept between calls."""
    global _IOTA
    if len(_IOTA) < k:
        _IOTA = np.arange(max(k, 2 * len(_IOTA)), dtype=np.int32)
    return _IOTA[:k]


class NodeStates:
    """The states of a trace's nodes at any step; holds the few per-trace arrays that history needs."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        created = trace.created_steps()
        if len(created) < 2 or bool(np.all(created[1:] >= created[:-1])):  # the usual order: no sort needed
            self._by_made, self._made_steps = np.arange(len(created)), created
        else:
            self._by_made = np.argsort(created, kind="stable")  # nodes in the order they were made
            self._made_steps = created[self._by_made]
        backward = trace.steps_of(Kind.GRAPH_TASK_STARTED)
        self._first_backward = int(backward[0]) if len(backward) else len(trace)
        """Before this step no graph task ran, so no node is pruned, to push or raised: no history is needed."""
        self._history: _History | None = None
        self._part: _History | None = None  # of a prefix of the trace (NOTE [prefix indexes] in indexes)
        self._spent_of: dict[int, tuple[int | None, np.ndarray, Intervals]] = {}  # graph task -> (bound, spent)
        self._created = created
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Build the per-trace history arrays now (the TUI does it in a worker, off the first paint)."""
        self._history_arrays(None)

    def _history_arrays(self, step: int | None) -> _History:
        """The history, right up to `step` at least (all of it with None)."""
        # NOTE [lazy history]: ~0.1 s for a 1M-node trace or a training loop of 1,000 backward calls, which the
        # first paint (at step 0, in the forward pass) does not need; the first step into the backward needs only
        # the history of a prefix (NOTE [prefix indexes] in indexes).
        full = self._history
        if full is not None:
            return full
        if step is not None:
            part = self._part
            if part is not None and part.upto is not None and step <= part.upto:
                return part
            bound = self.trace.index.prefix_bound(step)
            if bound is not None:
                part = self._part = _History(self.trace, bound)
                return part
        with self._lock:
            if self._history is None:
                self._history = _History(self.trace)
                self._part = None
            return self._history

    def _spent(self, task: int, step: int) -> tuple[np.ndarray, Intervals]:
        """(node, [count reached 0, pushed)) of graph task `task`, right up to `step` at least: only a task running
        at a step has to_push nodes, so a step after every backward needs none of the task flows."""
        known = self._spent_of.get(task)
        if known is not None and (known[0] is None or step <= known[0]):
            return known[1], known[2]
        tasks, bound = self.trace.index.task_flows_upto(step)
        nodes, intervals = _spent_intervals(self.trace, task, tasks[task], bound)
        self._spent_of[task] = (bound, nodes, intervals)
        return nodes, intervals

    def raised_nodes(self, step: int) -> np.ndarray:
        """The nodes whose backward raised by `step`, in the order they raised."""
        if step < self._first_backward:
            return np.zeros(0, dtype=np.int64)
        h = self._history_arrays(step)
        return h.error_nodes[:int(np.searchsorted(h.error_steps, step, side="right"))]

    def at(self, state: EngineState, out: tuple[np.ndarray, np.ndarray] | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
        """(state code per node, execution index or -1 per node) at this step; vectorised over the nodes.

        `out`, two arrays of num_nodes (int8 codes, int32 or wider indexes) to fill in place: a view that asks
        on every step reuses its arrays instead of touching fresh memory (NOTE [fresh memory] in replay.py).
        """
        n, step = self.trace.num_nodes, state.step
        if out is None:
            codes, order = np.zeros(n, dtype=np.int8), np.full(n, -1, dtype=np.int32)
        else:
            codes, order = out
            codes.fill(0)
            order.fill(-1)
        codes[self._by_made[int(np.searchsorted(self._made_steps, step, side="right")):]] = STATE_CODE["not_created"]
        executed = state.executed.array()
        if len(executed):
            order[executed] = _iota(len(executed))
            codes[executed] = STATE_CODE["done"]
        h = self._history_arrays(step) if step >= self._first_backward else None
        if h is not None:
            pruned = int(np.searchsorted(h.pruned_steps, step, side="right"))
            if pruned:  # what happened last to a node says its state: pruned, unless it ran since
                still = h.pruned_until[:pruned] > step
                codes[h.pruned_nodes[:pruned][still]] = STATE_CODE["pruned"]
            codes[self.raised_nodes(step)] = STATE_CODE["raised"]
        for gt in state.graph_tasks:
            self._graph_task(gt, codes, order)
        for gt in state.graph_tasks:
            # After the tasks' states: a spent node's buffer is open (not_ready) until its push, yet it waits for
            # nothing more, so it is to_push rather than waiting (NOTE [to push]).
            spent_nodes, spent = self._spent(gt.graph_task, step)
            spent = spent_nodes[spent.open_at(step)]
            codes[spent] = STATE_CODE["to_push"]
            order[spent] = -1
        for q in state.ready_queues:
            ready = [t.node for t in q.tasks if t.node is not None]
            codes[ready] = STATE_CODE["ready"]
        for _, node in state.running:
            codes[node] = STATE_CODE["running"]
        return codes, order

    # NOTE [stepping the states]: `at` sets every node's state: ~8 ms for a 1M-node backward, at every step. A
    # view that shows the states at step after step keeps a Filled and calls `fill`, which sets only the nodes
    # a short move could change: those the events between the two steps name, and the children their NodeFinished
    # decremented (a node's counted, waiting, to_push, ready, running, done and not-created states, its pruning
    # history and its execution index change only at such events). A move across an event that changes many
    # nodes at once (a graph task starting or ending, its dependencies or exec_info computed, an error), a long
    # move, or the first fill sets every node, as `at` does. tests/tracer/test_node_states_stepping.py checks that
    # both ways give the same states.
    STEP_REACH = 4096
    """The longest move (in events) that `fill` makes by the nodes it touches."""
    _GLOBAL_KINDS = (Kind.GRAPH_TASK_STARTED, Kind.GRAPH_TASK_FINISHED, Kind.DEPENDENCIES_COMPUTED,
                     Kind.EXEC_INFO_COMPUTED, Kind.ERROR_RAISED)

    def filled(self) -> Filled:
        """A new pair of state arrays for `fill` (NOTE [stepping the states])."""
        n = self.trace.num_nodes
        return Filled(np.zeros(n, dtype=np.int8), np.full(n, -1, dtype=np.int32))

    def fill(self, state: EngineState, into: Filled) -> np.ndarray | None:
        """Set `into`'s codes and execution indexes to those of `at(state)`; return the nodes whose entries may have
        changed, or None when every node's may have (NOTE [stepping the states])."""
        last = into.state
        if last is not None and last.step == state.step:
            return np.zeros(0, dtype=np.int64)
        touched = self._touched(last, state) if last is not None else None
        if touched is None:
            self.at(state, out=(into.codes, into.order))
            into.exec_index = self._exec_index(state, into.exec_index)
        else:
            self._move_exec_index(into, last, state)
            codes, order = self._states_of(state, touched, into.exec_index)
            into.before = into.codes[touched]  # a copy (fancy indexing): what BoxStates takes away
            into.codes[touched], into.order[touched] = codes, order
        into.state, into.touched = state, touched
        into.generation += 1
        return touched

    def _touched(self, last: EngineState, state: EngineState) -> np.ndarray | None:
        """The nodes whose state may differ between two steps, or None if any node's may (NOTE [stepping the
        states])."""
        lo, hi = sorted((last.step, state.step))
        if hi - lo > self.STEP_REACH or \
                [gt.graph_task for gt in last.graph_tasks] != [gt.graph_task for gt in state.graph_tasks]:
            return None
        c = self.trace.columns
        kinds = c["ev_kind"][lo + 1:hi + 1]
        if np.isin(kinds, [int(k) for k in self._GLOBAL_KINDS]).any():
            return None
        named = np.asarray(c["ev_node"][lo + 1:hi + 1], dtype=np.int64)
        parts = [named[named >= 0]]
        if state.graph_tasks:
            tasks = self.trace.index.task_flows(hi)
            for gt in state.graph_tasks:
                t = tasks[gt.graph_task]
                a, b = np.searchsorted(t.dec_steps, [lo, hi], side="right")
                parts.append(np.asarray(t.dec_nodes[a:b], dtype=np.int64))
        return unique_sorted(np.concatenate(parts))

    def _exec_index(self, state: EngineState, index: np.ndarray) -> np.ndarray:
        """Per node, its position in `state.executed` (the last one if it ran more than once), or -1; in `index` if
        it has a slot per node (memory used before: NOTE [fresh memory] in replay)."""
        if len(index) == self.trace.num_nodes:
            index.fill(-1)
        else:
            index = np.full(self.trace.num_nodes, -1, dtype=np.int32)
        executed = state.executed.array()
        if len(executed):
            index[executed] = _iota(len(executed))
        return index

    def _move_exec_index(self, into: Filled, last: EngineState, state: EngineState) -> None:
        """Bring `into.exec_index` from `last`'s executed nodes to `state`'s."""
        before, after = last.executed.array(), state.executed.array()
        if len(after) >= len(before):
            into.exec_index[after[len(before):]] = np.arange(len(before), len(after), dtype=np.int32)
            return
        gone = unique_sorted(before[len(after):])
        into.exec_index[gone] = -1
        for node in gone.tolist():  # a node may have run before `state` too: its last run then (~1 ms for 1M runs)
            earlier = np.flatnonzero(after == node)
            if len(earlier):
                into.exec_index[node] = earlier[-1]

    def _states_of(self, state: EngineState, nodes: np.ndarray, exec_index: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """`at(state)`'s (codes, execution indexes) of these nodes alone, in the same order of rules."""
        step = state.step
        codes = np.zeros(len(nodes), dtype=np.int8)
        codes[self._created[nodes] > step] = STATE_CODE["not_created"]
        order = exec_index[nodes].copy()
        codes[order >= 0] = STATE_CODE["done"]
        if step >= self._first_backward:
            h = self._history_arrays(step)
            pruned = int(np.searchsorted(h.pruned_steps, step, side="right"))
            if pruned:
                codes[np.isin(nodes, h.pruned_nodes[:pruned][h.pruned_until[:pruned] > step])] = STATE_CODE["pruned"]
            codes[np.isin(nodes, self.raised_nodes(step))] = STATE_CODE["raised"]
        for gt in state.graph_tasks:
            counted = gt.counts_of(nodes) > 0
            codes[counted] = STATE_CODE["counted"]
            order[counted] = -1
            if gt.needed or gt.captured:
                wanted = np.isin(nodes, np.asarray(list(gt.needed) + list(gt.captured), dtype=np.int64))
                codes[counted & ~wanted] = STATE_CODE["skipped"]
            if gt.captured:
                codes[np.isin(nodes, np.asarray(gt.captured, dtype=np.int64))] = STATE_CODE["captured"]
            codes[np.isin(nodes, gt.waiting_nodes())] = STATE_CODE["waiting"]
            if gt.pruned:
                codes[np.isin(nodes, np.asarray(gt.pruned, dtype=np.int64))] = STATE_CODE["pruned"]
        for gt in state.graph_tasks:
            spent_nodes, spent = self._spent(gt.graph_task, step)
            spent = np.isin(nodes, spent_nodes[spent.open_at(step)])
            codes[spent] = STATE_CODE["to_push"]
            order[spent] = -1
        ready = [t.node for q in state.ready_queues for t in q.tasks if t.node is not None]
        codes[np.isin(nodes, np.asarray(ready, dtype=np.int64))] = STATE_CODE["ready"]
        codes[np.isin(nodes, np.asarray([n for _, n in state.running], dtype=np.int64))] = STATE_CODE["running"]
        return codes, order

    def _graph_task(self, gt, codes: np.ndarray, order: np.ndarray) -> None:
        """The states a running graph task gives its nodes (ready and running are set after, by the caller)."""
        # A counted node has not run in this graph task (its count would be 0), even if an earlier backward
        # ran it: it is counted again, and its old execution index no longer says anything.
        span = None if gt.needed or gt.captured else gt.counted_span()
        if span is not None:  # a range of nodes but a few holes: set the range, then put the holes back
            lo, hi, holes = span
            kept = codes[holes], order[holes]  # copies (fancy indexing)
            codes[lo:hi] = STATE_CODE["counted"]
            order[lo:hi] = -1
            codes[holes], order[holes] = kept
        else:
            nodes, _ = gt.dependency_arrays()
            codes[nodes] = STATE_CODE["counted"]
            order[nodes] = -1
        # A capture of -1 is a grad captured for an input with no node of its own: it marks no node.
        captured = [n for n in gt.captured if n >= 0]
        if gt.needed or gt.captured:
            wanted = np.zeros(len(codes), dtype=bool)
            wanted[list(gt.needed) + captured] = True
            skipped = nodes[~wanted[nodes]]
            codes[skipped] = STATE_CODE["skipped"]
        if captured:
            codes[captured] = STATE_CODE["captured"]
        codes[gt.waiting_nodes()] = STATE_CODE["waiting"]
        if gt.pruned:
            codes[list(gt.pruned)] = STATE_CODE["pruned"]


class Filled:
    """A view's state arrays, filled in place by NodeStates.fill step after step: `codes` (a state code per node)
    and `order` (an execution index or -1 per node), as NodeStates.at gives them; and what fill keeps to move them."""

    def __init__(self, codes: np.ndarray, order: np.ndarray) -> None:
        self.codes, self.order = codes, order
        self.state: EngineState | None = None  # the state they show
        self.exec_index = np.zeros(0, dtype=np.int32)  # per node, its position in state.executed, or -1
        self.generation = 0  # fills that changed the step so far
        self.touched: np.ndarray | None = None  # the nodes the last fill set (None: every node)
        self.before = np.zeros(0, dtype=np.int8)  # their codes before it


class BoxStates:
    """Each box's state in a folded picture (tracer.views.folding): the state its nodes share, else running, ready or
    waiting if one of them is (in that order), else counted.

    Kept as a count of each box's nodes in each state, so that after a fill that set a few nodes (NOTE [stepping the
    states]) only their boxes are looked at again: a 1M-node graph folded into 4 boxes otherwise reads a million
    codes at every step.
    """

    def __init__(self, folding: Any) -> None:
        self.folding = folding
        self.codes = np.zeros(folding.num_groups, dtype=np.int8)
        self._counts = np.zeros((folding.num_groups, len(STATES)), dtype=np.int64)
        self._generation = -1  # the Filled generation the counts are of

    def update(self, filled: Filled) -> np.ndarray:
        """The box codes for `filled`'s codes (read-only for the caller)."""
        f, width = self.folding, len(STATES)
        if filled.generation == self._generation:
            return self.codes
        if filled.touched is not None and filled.generation == self._generation + 1:
            nodes = filled.touched
            boxes = f.group_of[nodes]
            shown = boxes >= 0
            boxes = boxes[shown]
            np.subtract.at(self._counts, (boxes, filled.before[shown].astype(np.int64)), 1)
            np.add.at(self._counts, (boxes, filled.codes[nodes[shown]].astype(np.int64)), 1)
            changed = unique_sorted(boxes)
            self.codes[changed] = _box_codes(self._counts[changed])
        else:
            box_of = np.repeat(np.arange(f.num_groups, dtype=np.int64), np.diff(f.starts))
            keys = box_of * width + filled.codes[f.members]
            self._counts = np.bincount(keys, minlength=f.num_groups * width).reshape(f.num_groups, width)
            self.codes = _box_codes(self._counts)
        self._generation = filled.generation
        return self.codes


def _box_codes(counts: np.ndarray) -> np.ndarray:
    """BoxStates' rule, for boxes given as counts of their nodes in each state (a row per box)."""
    present = counts > 0
    lo = np.argmax(present, axis=1)
    hi = present.shape[1] - 1 - np.argmax(present[:, ::-1], axis=1)
    codes = np.where(lo == hi, lo, STATE_CODE["counted"]).astype(np.int8)
    for state in ("waiting", "ready", "running"):  # later wins
        codes[present[:, STATE_CODE[state]]] = STATE_CODE[state]
    return codes


class _History:
    """What a trace's past says about its nodes at any step: prunings and errors (NodeStates'; the spent counts are
    found per graph task, NodeStates._spent).

    With `upto`, read from the events up to that step only, and right for the steps up to it."""

    def __init__(self, trace: Trace, upto: int | None = None) -> None:
        self.upto = upto
        c = trace.columns
        started = trace.index.steps_upto(upto, Kind.NODE_STARTED)
        # NOTE [pruning as history]: pruned nodes stay pruned once their graph task ends (the engine never
        # ran them for that backward call), so a step after it still says why they have no grad.
        deps_steps = trace.index.steps_upto(upto, Kind.DEPENDENCIES_COMPUTED)
        starts = np.asarray(c["pruned_start"], dtype=np.int64) if len(deps_steps) else np.zeros(1, np.int64)
        self.pruned_steps = np.repeat(deps_steps, np.diff(starts[:len(deps_steps) + 1]))
        self.pruned_nodes = np.asarray(c["pruned_node"][:len(self.pruned_steps)], dtype=np.int64)
        self.pruned_until = _next_start(self.pruned_nodes, self.pruned_steps, started,
                                        np.asarray(c["ev_node"][started], dtype=np.int64))
        """Per pruning: the step its node next started running (it is pruned until then), or the end."""
        error_steps = trace.index.steps_upto(upto, Kind.ERROR_RAISED)
        nodes = np.asarray(c["ev_node"][error_steps], dtype=np.int64)
        self.error_steps, self.error_nodes = error_steps[nodes >= 0], nodes[nodes >= 0]


def _spent_intervals(trace: Trace, tid: int, t: TaskIndex, upto: int | None) -> tuple[np.ndarray, Intervals]:
    """(node, [count reached 0, pushed)) for every push of graph task `tid` that followed a count reaching 0, as
    Intervals; with `upto`, for the counts that reached 0 by that step (`t`'s flows are right up to it).

    NOTE [to push]: a counted node's count reaches 0 at the decrement (its last parent's NodeFinished) that
    spends it, and the engine pushes it right after; between the two steps it is to_push. A node exec_info does
    not need is never pushed, so it never is to_push. Found once per graph task, so a step pays only for open_at.
    """
    none = np.zeros(0, np.int64)
    if not len(t.dec_pos):
        return none, Intervals(none, none)
    c = trace.columns
    # The task's pushes: of a prefix, read up to its bound; else from the whole trace's (a training loop has
    # thousands of graph tasks: one scan for all of them).
    pushes = trace.steps_of(Kind.TASK_PUSHED) if upto is None else trace.index.steps_upto(upto, Kind.TASK_PUSHED)
    pushes = pushes[int(np.searchsorted(pushes, t.start)):int(np.searchsorted(pushes, t.end, side="right"))]
    pushes = pushes[np.asarray(c["ev_task"][pushes]) == tid]
    span = len(trace) + 1
    push_keys = np.sort(np.asarray(c["ev_node"][pushes], dtype=np.int64) * span + pushes)  # by node, then step
    node, zero = _reached_zero(t)
    at = np.searchsorted(push_keys, node * span + zero, side="left")
    hit = push_keys[np.minimum(at, len(push_keys) - 1)] if len(push_keys) else np.zeros(len(node), np.int64)
    pushed = (at < len(push_keys)) & (hit // span == node)
    end = np.where(pushed, hit % span, -1)
    if upto is not None and not pushed.all():  # pushed after the prefix, or never
        end[~pushed] = _later_pushes(trace, tid * (trace.num_nodes + 1) + node[~pushed], upto)
        pushed = end >= 0
    return node[pushed], Intervals(zero[pushed], end[pushed])


SPARSE_DECREMENTS = 8
"""_reached_zero sorts the decrements when the task counts this many times more nodes than it has decrements."""


def _reached_zero(t: TaskIndex) -> tuple[np.ndarray, np.ndarray]:
    """(node, step its count reached 0) for each node of the task whose decrements spent its count."""
    if len(t.dec_pos) * SPARSE_DECREMENTS < len(t.dep_nodes):
        # A prefix of a large backward: per node decremented, not per node counted. How many times, and the step of
        # its last decrement (dec_steps ascend, so the last of each run of equal positions once sorted stably).
        by_pos = np.argsort(t.dec_pos, kind="stable")
        pos = t.dec_pos[by_pos]
        ends = np.flatnonzero(np.r_[pos[1:] != pos[:-1], True]) if len(pos) else np.zeros(0, np.int64)
        decremented, times = pos[ends], np.diff(np.r_[-1, ends])
        spent = times >= t.dep_counts[decremented]
        # A count that starts at 0 is spent with no decrement, from the start (as the bincount below finds).
        unspent = np.flatnonzero(t.dep_counts <= 0)
        unspent = unspent[~lookup_sorted(decremented, unspent)[1]]
        positions = np.concatenate([decremented[spent], unspent])
        zero = np.concatenate([t.dec_steps[by_pos[ends[spent]]], np.zeros(len(unspent), np.int64)])
        by_node = np.argsort(positions, kind="stable")  # by position, as the bincount below gives them
        return t.dep_nodes[positions[by_node]].astype(np.int64), zero[by_node]
    decrements = np.bincount(t.dec_pos, minlength=len(t.dep_nodes))  # one pass, no sort
    last = np.zeros(len(t.dep_nodes), dtype=np.int64)
    np.maximum.at(last, t.dec_pos, t.dec_steps)
    spent = np.flatnonzero(decrements >= t.dep_counts)
    return t.dep_nodes[spent].astype(np.int64), last[spent]


def _later_pushes(trace: Trace, keys: np.ndarray, upto: int) -> np.ndarray:
    """For each key (graph task * (nodes + 1) + node), the step of its first push after step `upto`, or -1.

    Looks at the next PREFIX_MIN pushes first: a spent node is pushed right after its count reaches 0, so only a
    node that is never pushed makes the search read the rest of the trace."""
    c = trace.columns
    found = np.full(len(keys), -1, dtype=np.int64)
    near = upto + trace.index.PREFIX_MIN
    # The whole trace's pushes only when needed: a 7M-event trace's take 5 ms to find.
    for later in (f() for f in (lambda: trace.index.steps_upto(near, Kind.TASK_PUSHED),
                                lambda: trace.steps_of(Kind.TASK_PUSHED))):
        later = later[int(np.searchsorted(later, upto, side="right")):]
        later_keys = np.asarray(c["ev_task"][later], dtype=np.int64) * (trace.num_nodes + 1) + c["ev_node"][later]
        hits = np.flatnonzero(np.isin(later_keys, keys))  # ascending: the first hit of a key is its first push
        first_keys, first = unique_first(later_keys[hits])
        pos = np.searchsorted(first_keys, keys)
        ok = (found < 0) & (pos < len(first_keys))
        ok[ok] = first_keys[pos[ok]] == keys[ok]
        found[ok] = later[hits[first[pos[ok]]]]
        if (found >= 0).all():
            break
    return found


def _next_start(nodes: np.ndarray, steps: np.ndarray, start_steps: np.ndarray, start_nodes: np.ndarray) -> np.ndarray:
    """For each (node, step) pair, the first step after `step` at which that node started running (or int64 max)."""
    if not len(nodes):
        return np.zeros(0, dtype=np.int64)
    span = int(max(start_steps.max(initial=0), steps.max(initial=0))) + 1
    keys = np.sort(start_nodes * span + start_steps)  # by node, then step
    at = np.searchsorted(keys, nodes * span + steps, side="right")
    found = at < len(keys)
    nxt = np.full(len(nodes), np.iinfo(np.int64).max, dtype=np.int64)
    hit = keys[np.minimum(at, len(keys) - 1)] if len(keys) else np.zeros(len(nodes), np.int64)
    same = found & (hit // span == nodes)
    nxt[same] = hit[same] % span
    return nxt


def node_states(trace: Trace, state: EngineState,
                out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(state code per node, execution index or -1 per node) at this step: NodeStates(trace).at(state, out).

    A view that asks at every step keeps one NodeStates instead, which builds its history arrays once.
    """
    return NodeStates(trace).at(state, out)
