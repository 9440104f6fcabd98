"""What torch hides, reconstructed after a backward call: its log run through agdb's model of the engine (model.py,
NOTE [the model and the observed order]) beside what was observed, written as events in the order things happened
(NOTE [observe now, reconstruct later] in bridge.py); where the model, torch's ids and torch's own execution order
(NOTE [witness] in backward.py) disagree, a divergence.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import itertools
import sys
import threading
from typing import Any

import torch

from agdb.tracer.recording.builder import SMALL, summary_item
from agdb.tracer.sources.torch.forward import Forward
from agdb.tracer.sources.torch.model import EngineModel, first_difference
from agdb.tracer.sources.torch.state import (
    BUMP,
    CALL,
    HOOK,
    LATE,
    NODE,
    POST,
    PRE,
    RENUMBER,
    BridgeState,
    Call,
    ThreadState,
    gc_paused,
    resident_bytes,
)
from agdb.tracer.sources.torch.walk import UNNUMBERED, Walker
from agdb.tracer.store.events import TensorSummary
from agdb.tracer.store.schema import UINT64_MAX

_ACC = "torch::autograd::AccumulateGrad"
PART = 1 << 16
"""How many log entries a post-hook lets pile up before it replays them (NOTE [replay in parts])."""


class Reconstruction:
    """Runs a thread's log through its model of the engine and writes the events; `graph_tasks` goes in the meta."""

    def __init__(self, shared: BridgeState, forward: Forward, walker: Walker) -> None:
        self.b = shared.b
        self.raw = shared.raw
        self.values = shared.values
        self._shared = shared  # whether a log may wait (BridgeState.may_wait)
        self.failures = shared.failures
        self._keys = shared.keys
        self._is_acc = shared.is_acc
        self.divergences = shared.divergences
        self._forward = forward
        self._walker = walker
        self._emitter = shared.emitter
        # Graph tasks are numbered as their GraphTaskStarted is written, under a lock: the trace numbers them by first
        # appearance, and meta["graph_tasks"] and the divergences must name each by the number its events carry.
        self._gt_ids = itertools.count(1)
        self._start_lock = threading.Lock()
        self.graph_tasks: list[dict] = []  # per graph task: torch's ids, depth, the witness's verdict (meta)

    def replay(self, state: ThreadState) -> None:
        """Run the log through the model: events in the order things happened."""
        with torch._C.DisableTorchFunction(), gc_paused():  # our own tensor calls; no cycles made here
            self._replay_log(state)
        state.rss_base = resident_bytes()  # NOTE [what a waiting log holds] in state.py

    def replay_in_parts(self, state: ThreadState) -> None:
        """Let the hooks replay this thread's log whenever it holds more than PART entries.

        NOTE [replay in parts]
        A backward's log holds every grad it saw until the replay (NOTE [observe now, reconstruct later] in
        bridge.py): a million-node backward would keep a million grads and two million entries alive until it
        returns. The replay runs the log in order and keeps where it is (the calls begun, state.replaying), so a
        post-hook that finds the log longer than PART replays what it holds there and then, on the engine's
        thread between two nodes; what follows is replayed the same way, or when the recording ends (with
        `defer=False`, when the outermost call returns). The events and their order are those of one replay at the
        end. With `defer` (the default), a log past PART entries is replayed only if the process has grown by
        WAITING_BYTES since it began waiting (NOTE [what a waiting log holds] in state.py); if not, the hooks look
        again PART entries later. A 100k-node backward whose grads are small then runs with no replay inside it,
        and a million-node one, whose graph alone grows the process past that, is replayed in parts.
        """
        log = state.log
        if log.replay_part is not None:
            return
        may_wait = self._shared.may_wait

        def replay_part() -> None:
            if may_wait(state):
                log.limit = len(log) + PART
                return
            log.limit = PART
            try:
                self.replay(state)
            except Exception as e:  # noqa: BLE001 - agdb's failure must not become the program's
                log.limit = sys.maxsize  # the rest waits for the call's end, which says it again if it fails again
                self.failures.append(f"{type(e).__name__}: {e}")

        log.limit = PART
        log.replay_part = replay_part

    def _replay_log(self, state: ThreadState) -> None:
        log = state.log[:]  # the hooks hold state.log itself: empty it in place
        del state.log[:len(log)]
        model = state.model
        stack = state.replaying  # the calls begun (NOTE [replay in parts])
        values = self.item  # what the model is handed of each grad: the builder's summary item of it (emitter.py)
        if self.values:
            # NOTE [one item a grad]: a grad is one tensor wherever the log holds it (NOTE [small grads at once]), and
            # its item is made once: an MLP's large grads were summarised two and three times each. A tensor the log
            # holds stays alive until this replay ends, so an id names one tensor, and no code of the program runs
            # while it replays, so every reference to it would give the same item.
            made = small_arrays(log)
            get, item = made.get, self.item

            def values(t: Any) -> Any:
                a = get(id(t))
                if a is None:
                    a = made[id(t)] = item(t)
                return a
        after_accumulation = state.after_accumulation  # post_accumulate_grad hooks: events follow GradAccumulated
        for entry in log:
            kind = entry[0]
            if kind == PRE:
                if not stack:
                    continue
                call = stack[-1]
                now = entry[3]  # the counter of the thread running the node (NOTE [pool thread] in state.py)
                if not call.begun:
                    self._begin(model, call, now, call.runner)
                if now > call.runner.rlast:
                    self._forward.gap(call.runner, now, call.frame)
                key = entry[1]
                seq = call.gt.graph.seq.get(key)
                if entry[4] != call.torch_id or (seq is not None and seq != entry[5]):  # else both checks hold
                    self._check_running(call, key, entry[4], entry[5])
                call.observed.append(key)
                if call.retains:
                    for _ in range(call.retains.get(key, 0)):  # torch runs them after the tensor hooks
                        model.hook_ran(call.gt, key, "retains_grad", "retain_grad")
                model.node_started(call.gt, key, [values(g) for g in entry[2]])
            elif kind == HOOK:
                _, key, hook_kind, name, now = entry
                if not stack or not key:
                    continue
                call = stack[-1]
                if not call.begun:
                    self._begin(model, call, now, call.runner)
                if hook_kind == "post_accumulate_grad":
                    after_accumulation.append((key, name))
                else:
                    model.hook_ran(call.gt, key, hook_kind, name)
            elif kind == POST:
                if not stack:
                    continue
                gt, key, grad_inputs, grad_outputs = stack[-1].gt, entry[1], entry[2], entry[3]
                if key in self._is_acc and grad_outputs and grad_outputs[0] is not None:
                    (gt.runner or model.emit).grad_accumulated(graph_task=gt.id, node=key,
                                                               grad=values(grad_outputs[0]))
                if after_accumulation:
                    for hook_key, name in after_accumulation:
                        model.hook_ran(gt, hook_key, "post_accumulate_grad", name)
                    after_accumulation.clear()
                if self.values:
                    model.node_finished(gt, key, [values(g) for g in grad_inputs],
                                        [g is not None for g in grad_inputs])
                else:  # grad_inputs holds whether each was defined
                    model.node_finished(gt, key, [None] * len(grad_inputs), grad_inputs)
            elif kind == BUMP:
                _, start, after, names, frame, created, thread = entry
                if stack and not stack[-1].begun:
                    self._begin(model, stack[-1], start, thread)
                self._forward.emit_bumps(thread, start, after, names, frame, created)
            elif kind == NODE:
                self._walker.node(entry[1], stack[-1].frame if stack else -1, *entry[2:])
            elif kind == LATE:  # its thread's numbers (NOTE [pool thread] in state.py)
                self._forward.name_late(entry[2], entry[1])
            elif kind == RENUMBER:
                self._forward.move_key(entry[3], entry[1], entry[2])
            elif kind == CALL:
                call = entry[1]
                self._forward.gap(call.thread, call.before, call.frame)
                stack.append(call)
            else:  # END
                _, call, error, result, now = entry
                if not call.begun:
                    self._begin(model, call, now, call.thread)
                self._forward.gap(call.thread, now, call.frame)
                results = tuple(result) if isinstance(result, (tuple, list)) else ()
                model.finish(call.gt, error, lambda gt, node, i, r=results: values(r[i]) if i < len(r) else None)
                self._task_ended(call, error is None)
                stack.remove(call)

    def _check_running(self, call: Call, key: int, torch_id: int, running_seq: int) -> None:
        """A pre-hook's two checks: torch's graph task id is its call's, and the node torch says is running
        (`_current_autograd_node()`) has the hook's node's seq_nr. Either failing is a divergence."""
        if call.torch_id is None:
            call.torch_id = torch_id
        elif torch_id != call.torch_id:
            self.divergences.append({"kind": "graph_task", "graph_task": call.gt.id, "step": self.b.num_events,
                                     "node": key, "expected_id": call.torch_id, "observed_id": torch_id})
        seq = call.gt.graph.seq.get(key)
        if seq is not None and running_seq != seq:
            self.divergences.append({"kind": "running_node", "graph_task": call.gt.id, "step": self.b.num_events,
                                     "node": key, "running_seq_nr": running_seq})

    def _task_ended(self, call: Call, complete: bool) -> None:
        """The call's entry in meta["graph_tasks"]; with a witness (NOTE [witness] in backward.py), compare it with
        the order the model popped and the order the pre-hooks saw."""
        gt = call.gt
        entry: dict[str, Any] = {"graph_task": gt.id, "torch_id": -1 if call.torch_id is None else call.torch_id,
                                 "parent_torch_id": call.parent_id, "reentrant_depth": gt.depth}
        if call.witness_error:
            entry["execution_order_error"] = call.witness_error
        witness = call.witness
        if witness is not None:
            witness = self._unnumbered_as_popped(witness, gt.popped, gt.graph.seq)
            runs = [n for n in witness if gt.runs(n)]
            verdict = {"length": len(witness)}
            for against, order, wanted in (("model", gt.popped, witness), ("observed", call.observed, runs)):
                i = first_difference(wanted, order, complete)
                verdict[against] = "agrees" if i is None else i
                if i is not None:
                    self.divergences.append({
                        "kind": "witness", "against": against, "graph_task": gt.id, "step": self.b.num_events,
                        "index": i, "expected": wanted[i] if i < len(wanted) else 0,
                        "observed": order[i] if i < len(order) else 0})
            entry["execution_order"] = verdict
        self.graph_tasks.append(entry)

    def _unnumbered_as_popped(self, witness: list[int], popped: list[int], seq: Any) -> list[int]:
        """The witness with each UNNUMBERED node (an Error node: walk.Walker.witness_key) taken as the node the model
        popped at its place, when that one too has no seq_nr and no leaf; any other stays a difference."""
        if UNNUMBERED not in witness:
            return witness
        is_acc = self._is_acc
        return [popped[i] if k == UNNUMBERED and i < len(popped) and seq.get(popped[i]) == UINT64_MAX
                and popped[i] not in is_acc else k for i, k in enumerate(witness)]

    def _begin(self, model: EngineModel, call: Call, now: int, seen_on: ThreadState) -> None:
        """The call's first sign of life, at counter `now` of thread `seen_on`: name the nodes the engine made on the
        calling thread (Identity, GraphRoot), then start `model` (the log's: a pool thread's own may have moved on to
        another owner since, NOTE [pool thread] in state.py) with its dependencies, exec_info and the root's push."""
        call.begun = True
        state = call.thread
        row = state.row
        bump = self._forward.bump
        self._forward.gap(state, call.before, call.frame)
        multi = 1 if call.multi else 0
        # Another thread's counter says nothing of the caller's (NOTE [pool thread] in state.py); but the caller waited
        # from the moment it made its GraphRoot and Identities until the call returned, so its counter then says how
        # many it made (unknown only if this part of the log is replayed before the call returned: NOTE [replay in
        # parts]; its Identities are then left to the gap its END accounts for).
        if seen_on is state:
            made = now - call.before
        else:
            made = call.after - call.before if call.after is not None else multi
        s = call.before
        inputs = list(call.inputs)
        missing = [i for i, (k, _) in enumerate(inputs) if not k]
        for j, i in enumerate(missing):
            if j < made - multi:  # an unreachable leaf with no AccumulateGrad yet: torch made an Identity
                key = bump(row, s, "torch::autograd::Identity", call.frame)
                self.b.node(key, name="torch::autograd::Identity", seq_nr=s, thread=row, frame=call.frame)
                s += 1
            else:  # an unreachable leaf whose AccumulateGrad lives elsewhere
                key = next(self._keys)
                self.b.node(key, name=_ACC, seq_nr=UINT64_MAX, thread=row)
            inputs[i] = (key, 0)
        gt = call.gt
        graph = gt.graph
        if call.multi:
            root = bump(row, s, "GraphRoot", call.frame)
            graph.seq[root] = s
            graph.edges[root] = tuple(call.roots)
            self.b.node(root, name="GraphRoot", seq_nr=s, thread=row, next_edges=call.roots, num_inputs=0,
                        frame=call.frame)
            s += 1
            model.simulated.add(root)
            gt.graph_root, gt.root_slots = root, ()
            gt.root_grads = tuple(self.item(g) for g in call.grads)
        else:
            gt.graph_root, slot = call.roots[0]
            gt.root_slots = (slot,)
        state.rlast = max(state.rlast, s)
        gt.inputs = tuple(inputs)
        gt.exec_info = bool(inputs)
        gt.topo = graph.topological_nrs([gt.graph_root] + [n for n, _ in gt.inputs])  # inputs= may lie off it
        self.raw.nodes.write(list(gt.topo), topological_nr=list(gt.topo.values()))
        own = model.emit
        if row != own.thread:
            gt.caller = self._emitter(row, own.queue)
        if call.runner.row != own.thread:
            gt.runner = self._emitter(call.runner.row, own.queue)
        with self._start_lock:
            gt.id = next(self._gt_ids)
            model.start(gt, call.roots, call.keep_graph, call.create_graph)
        gt.topo = {}  # read only to prepare the call (dependencies, exec_info): a deep graph's dict goes now

    def item(self, t: Any) -> Any:
        """The builder's summary item of a grad (None, a copy of a small array with its device, or a summary)."""
        return summary_item(self.value(t))

    def value(self, t: Any) -> Any:
        """A grad as the builder takes it: a numpy view (the builder copies small ones, summarises others)."""
        if t is None:
            return None
        if not self.values:
            return TensorSummary(tuple(t.shape), str(t.dtype).removeprefix("torch."), str(t.device), (), False, False)
        try:
            return (t.detach() if t.requires_grad else t).numpy()
        except (RuntimeError, TypeError):  # not on the CPU, or a dtype numpy lacks
            return TensorSummary(tuple(t.shape), str(t.dtype).removeprefix("torch."), str(t.device), (), False,
                                 False)


_STACKED = frozenset((torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32, torch.int64,
                      torch.uint8, torch.bool))
"""The dtypes whose small grads small_arrays converts at once: numpy has each, and none carries a conj or neg bit."""


def small_arrays(log: list) -> dict[int, Any]:
    """The small grads a log holds (at most SMALL elements, at least one dimension, of a dtype in _STACKED), as numpy
    arrays by id of the tensor: the rows of one array per shape and dtype, for the groups whose tensors are all on the
    CPU, strided and without autograd history. Each is the builder's summary item of its grad as it is (a bare array
    is a small CPU grad's values): the stack's own memory, which the builder need not copy (its summary_of copies a
    small array, which may share a grad's memory, and the program may change a grad in place).

    NOTE [small grads at once]
    The trace keeps a copy of a small grad's values (TraceBuilder's summary_of; here the stack is that copy);
    converting each tensor on its own (`t.detach().numpy()`) costs 1.4-2.7 µs of torch's Python binding a grad, two
    grads a node (a sixth of the 10k chain's replay, sampled); the grouping below, the stack and a row each cost about
    a third of it. A grad is one tensor object wherever the log holds it (a node's grad_inputs are its children's
    grad_outputs: a chain's log holds three references to each), and is converted once. torch.stack of a shape's
    grads and one `.numpy()` give the same values, dtype and shape row by row; every tensor the log holds stays alive
    until the replay ends, so an id names one tensor. Tensors of a subclass convert their own way and are left to
    Reconstruction.item.
    """
    groups: dict[tuple, list] = {}
    seen: set[int] = set()
    tensor = torch.Tensor
    for entry in log:
        kind = entry[0]
        if kind == PRE:
            grads = entry[2]
        elif kind == POST:
            grads = entry[2] + entry[3][:1]
        else:
            continue
        for t in grads:
            # None and the bools of values=False are no tensors; a grad is seen again as its child's grad_output.
            if type(t) is tensor and id(t) not in seen:
                seen.add(id(t))
                key = (t.shape, t.dtype, t.requires_grad)
                group = groups.get(key)
                if group is None:
                    groups[key] = group = []
                group.append(t)
    out: dict[int, Any] = {}
    for (shape, dtype, requires_grad), group in groups.items():
        # A grad with history would give the stack a node of its own, and the thread's sequence number would move.
        if requires_grad or dtype not in _STACKED or not shape or shape.numel() > SMALL:
            continue
        try:
            stacked = torch.stack(group)
        except RuntimeError:  # on several devices
            continue
        if stacked.is_cpu and stacked.layout == torch.strided:  # else one of the group is not: the group is left
            out.update(zip(map(id, group), stacked.numpy(), strict=True))
    return out


def by_row(d: dict, index: dict[int, int]) -> dict:
    """A divergence with its node keys turned into the trace's node rows (-1 for none)."""
    out = dict(d)
    for field in ("expected", "observed", "node"):
        if field in out:
            out[field] = index.get(out[field], -1) if out[field] else -1
    return out
