"""One backward()/autograd.grad() call, recorded: its graph walked (or a retained one's walk reused) and hooked
before torch runs it, its start and end logged, and what it ran reconstructed once the outermost call returns;
torch's own witnesses of the call (its graph task id, its execution order: NOTE [witness]); the user's tensor
hooks, logged for the node that ran them.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import gc
import sys
import threading
import weakref
from typing import Any

import torch

from agdb.tracer.sources.torch.forward import Forward
from agdb.tracer.sources.torch.hooks import Hooks
from agdb.tracer.sources.torch.model import GraphTaskModel
from agdb.tracer.sources.torch.reconstruct import Reconstruction
from agdb.tracer.sources.torch.state import CALL, END, HOOK, BridgeState, Call, ThreadState, gc_paused
from agdb.tracer.sources.torch.walk import Walker

_seq = torch.autograd._get_sequence_nr
_gt_id = torch._C._current_graph_task_id  # -1 outside a backward
_running = torch._C._current_autograd_node
_execution_order = torch._C._current_graph_task_execution_order
_multithreading = torch._C._is_multithreading_enabled


class Backward:
    """Records the backward calls (`run`), and the user's tensor hooks seen by tensor_hooks.py."""

    def __init__(self, shared: BridgeState, forward: Forward, walker: Walker, hooks: Hooks,
                 reconstruction: Reconstruction) -> None:
        self.shared = shared
        self._local = shared.local
        self._forward = forward
        self._walker = walker
        self._hooks = hooks
        self._reconstruction = reconstruction
        self._retained: list[Any] = []  # weakrefs to the tensors retain_grad() was called on while recording

    def run(self, state: ThreadState, original: Any, t_outputs: Any, args: tuple, kwargs: dict) -> Any:
        """One backward call, recorded (torch's own `_engine_run_backward` is `original`)."""
        self._forward.write_seen(state)
        if state.log and not state.calls:  # the forward's numbers before the walk's (NOTE [keys before the replay])
            self._forward.key_up_to(state, state.last)
        local = self._local  # this thread's: leaves' variables, read if a new leaf needs them (LeafNames)
        local.call_frame, local.names = sys._getframe(1), None
        try:
            call = self._call(state, t_outputs, args, kwargs)
        except Exception as e:  # noqa: BLE001 - agdb's failure must not become the program's
            self.shared.failures.append(f"{type(e).__name__}: {e}")
            call = None
        finally:
            local.call_frame = local.names = None
        if call is None:
            return original(t_outputs, *args, **kwargs)
        self._reconstruction.replay_in_parts(state)
        log = state.log
        log.append((CALL, call))
        state.calls.append(call)
        collecting = gc.isenabled()
        if collecting:  # NOTE [collections while recording] in patching.py
            gc.disable()
        try:
            result = original(t_outputs, *args, **kwargs)
        except BaseException as e:
            call.after = _seq()
            log.append((END, call, (type(e).__name__, str(e)), None, call.after))
            raise
        else:
            call.after = _seq()
            log.append((END, call, None, result, call.after))
        finally:
            if collecting:
                gc.enable()
            state.calls.remove(call)
            self._hooks.unhook(call.hooked)
            call.hooked = []  # its hook dicts (NOTE [hooked nodes] in hooks.py) go with the graph
            for handle in call.witness_hooks:
                handle.remove()
            state.last = _seq()  # the reconstruction accounts for every increment up to here
            if not state.calls:
                state.pushed.clear()  # after an error the engine already took the mode off
                if state.replay_now or not self.shared.may_wait(state):
                    state.replay_now = False
                    self._reconstruction.replay(state)
                else:  # the replay waits for the recording's end, the keys do not (NOTE [keys before the replay])
                    self._forward.key_up_to(state, state.last)
        return result

    def thread_starting(self) -> None:
        """This thread starts another: its waiting log is replayed first (NOTE [deferral on one thread]).

        NOTE [deferral on one thread]
        A log waits for the recording's end (NOTE [observe now, reconstruct later] in bridge.py) only while the thread
        that began the recording is the only one with a row (`BridgeState.alone`; torch's pool thread runs its
        caller's calls and does not count). Each thread's events are written when its log is replayed, so a log that
        waited while another thread wrote its own would put one thread's backward after what the other did later.
        So from the moment a second thread takes a row, every outermost call is replayed when it returns, as with
        `defer=False`; and a thread that starts another while recording replays its waiting log first, on its own
        thread, since the thread it starts may take a row before anything else happens here. A log that waits when a
        thread it did not start takes a row (one started before the recording, or by another thread) is replayed
        when its next outermost call returns, or when the recording ends.
        """
        state = getattr(self._local, "state", None)
        if state is not None and state.owner is state and state.log and not state.calls:
            self._forward.write_seen(state)
            self._reconstruction.replay(state)

    def _call(self, state: ThreadState, t_outputs: Any, args: tuple, kwargs: dict) -> Call | None:
        """Walk the graph a call is about to run and hook its nodes; None when torch will refuse the call."""
        params = _run_args(args, kwargs)
        call = Call(state)
        roots = []
        for t in t_outputs:
            edge = _edge(t)
            if edge is None:
                return None  # torch raises "element i of tensors does not require grad"
            roots.append(edge)
        given = tuple(params["inputs"] or ())
        inputs: list = [_input_edge(t) for t in given]
        starts = [n for n, _ in roots] + [n for n, _ in inputs if n is not None]
        walker = self._walker
        graph = walker.cached(state, starts)
        if graph is None:
            with gc_paused():  # a walk allocates per node, and no cycles: no collection in the middle
                walked = walker.walk(state, starts)
            graph = walked.graph
            key_of = walked.key_of
            if params["retain_graph"]:  # a graph kept for another backward keeps its walk and its hooks
                walker.remember(state, starts, key_of, graph)
                self._hooks.keep(walked.hooked)
            else:
                call.hooked = walked.hooked
        else:
            key_of = {n: walker.key(n, state.row, set())[0] for n in starts}
        for i, (n, _) in enumerate(inputs):
            if n is None:  # a leaf: its AccumulateGrad if the walk met one (torch does not make one here)
                key = walker.leaf_key(given[i])
                if key is not None and key in graph.edges:  # every node of the graph has an entry
                    inputs[i] = (key, 0)
        call.before = _seq()
        call.frame = self._forward.user_frame()
        call.roots = [(key_of[n], nr) for n, nr in roots]
        call.inputs = [(n, nr) if isinstance(n, int) else (key_of[n], nr) if n is not None else (0, 0)
                       for n, nr in inputs]
        if any(not k for k, _ in call.inputs):
            # an unreached `inputs=` leaf: its replay may key a node of no number (NOTE [keys before the replay])
            state.replay_now = True
        call.multi = len(roots) > 1
        call.keep_graph = bool(params["retain_graph"])
        call.create_graph = bool(params["create_graph"])
        call.grads = tuple(params["grad_tensors"] or ())
        call.parent_id = _gt_id()
        # numbered when its GraphTaskStarted is written (Reconstruction._begin)
        call.gt = GraphTaskModel(0, _depth(state, call.parent_id), graph, 0, (), (), params["accumulate_grad"], {})
        if self._retained:
            call.retains = self._retains(state)
        witness = self._witness_hook(state, call, threading.get_ident())
        call.witness_hooks = [n.register_prehook(witness) for n, _ in roots]
        return call

    # NOTE [compile-time calls]
    # torch.compile's AOT autograd traces a model's backward by calling autograd.grad itself, on fake tensors, while
    # it compiles (the first call of a compiled model, and each recompilation). Those calls never reach this class:
    # the patched entry point passes them straight to torch and keeps only a plain entry of each, apart from the
    # program's graph tasks (meta["compile_time_calls"], NOTE [compile-time entries] in compiling.py), since walking,
    # hooking and summarising a fake graph changed what torch traced (NOTE [compile time] in compiling.py).

    def _witness_hook(self, state: ThreadState, call: Call, caller: int) -> Any:
        """A pre-hook for the call's roots, put on for this call only: torch's id of the graph task and, with
        multithreading disabled, its execution order.

        NOTE [witness]
        With multithreading disabled, `torch._C._current_graph_task_execution_order()` lists, from inside the
        root's pre-hook, every node the graph task will pop, in order: a second witness of the order, beside the
        pre-hooks that fire. torch allows it only there (anywhere later it fails an internal assert), so it is
        read once per call, by the first root whose pre-hook fires (after a GraphRoot, the first of its roots).
        It lists the nodes that are only captured as well as those that run. A node with no seq_nr and no leaf
        (torch::autograd::Error) has no identity the bridge can find again once the walk let go of it (NOTE [node
        identity] in walk.py): it is listed as UNNUMBERED and taken for the unnumbered node the model popped at
        its place (Reconstruction._unnumbered_as_popped). torch computes it by popping the
        call's own tasks from a fresh queue: where the real queue also holds other calls' tasks (a failed inner
        call's, left behind stale), tied tasks may come out of the real heap in another order, and the witness
        then differs from what ran while the model, run on the shared queue, does not.
        """
        lookup = self._walker.witness_key
        shared = self.shared

        def witness(grad_outputs: Any) -> None:
            if call.torch_id is not None:
                return
            call.torch_id = _gt_id()
            if threading.get_ident() != caller:  # torch's reentrant pool runs it (NOTE [pool thread] in state.py)
                here = shared.thread_state()
                here.adopt(call.thread)
                call.runner = here
            if _multithreading():
                return
            try:
                order = _execution_order()
            except RuntimeError as e:  # torch refused: say why in the trace, never fail the program
                call.witness_error = str(e).split("\n")[0]
                return
            row = state.row
            call.witness = [lookup(n, row) for n in order]

        return witness

    # -- the user's tensor hooks (tensor_hooks.py) ---------------------------------------------------------------
    def hook_ran(self, kind: str, name: str) -> None:
        """A hook of the user's returned: log it for the node torch says is running."""
        state = self.shared.thread_state()
        if not state.calls:
            state = self._handed_over(state)
        if state is not None:
            node = _running()
            # looked up by the thread that walked the running call's graph (a pool thread runs its caller's nodes)
            key = self._walker.lookup(node, state.calls[-1].thread.row) if node is not None else 0
            del node
            state.log.append((HOOK, key, kind, name, _seq()))

    def _handed_over(self, here: ThreadState) -> ThreadState | None:
        """`here` with the call torch handed it adopted, when a hook of the user's runs before that call's witness hook
        (a tensor hook on its root: NOTE [pool thread] in state.py), found by its root that torch says is running;
        else None (no recorded call is running here)."""
        node = _running()
        if node is None:
            return None
        for owner in list(self.shared.states):
            if owner.owner is not owner or not owner.calls:
                continue
            call = owner.calls[-1]
            if call.torch_id is None and call.thread is not here and \
                    self._walker.lookup(node, call.thread.row) in {key for key, _ in call.roots}:
                here.adopt(call.thread)
                call.runner = here
                return here
        return None

    def retained(self, t: Any) -> None:
        """retain_grad() was called on `t`, a tensor with a grad_fn (its retains_grad hook, NOTE in _retains)."""
        self._retained.append(weakref.ref(t))

    def _retains(self, state: ThreadState) -> dict[int, int]:
        """Node key -> how many retains_grad hooks it carries, for the tensors retain_grad() was called on that
        still retain their grad. A view is left out: reading its grad_fn after an in-place write would make a
        node (NOTE [node identity] in walk.py)."""
        found: dict[int, int] = {}
        alive = []
        for ref in self._retained:
            t = ref()
            if t is None or not t.retains_grad:
                continue
            alive.append(ref)
            if t._is_view() or t.grad_fn is None:
                continue
            key = self._walker.lookup(t.grad_fn, state.row)  # the walk's keys are the calling thread's
            if key:
                found[key] = found.get(key, 0) + 1
        self._retained = alive
        return found


def _depth(state: ThreadState, parent: int) -> int:
    """The reentrant depth of a call made while graph task `parent` runs: one below the recorded call torch
    says it is nested in (torch's reentrant depth counts the calls nested in the outermost one, through the pool
    thread too: NOTE [pool thread] in state.py; the calls in progress are the owner's)."""
    if parent < 0:
        return 0
    for outer in reversed(state.calls):
        if outer.torch_id == parent:
            return outer.gt.depth + 1
    return max(1, len(state.calls))  # nested in a backward the bridge did not record


def _edge(t: Any) -> tuple[Any, int] | None:
    """The (node, input_nr) a backward root or input maps to (torch's gradient_edge)."""
    if isinstance(t, torch.autograd.graph.GradientEdge):
        return (t.node, t.output_nr)
    if t.grad_fn is not None:
        return (t.grad_fn, t.output_nr)
    if t.requires_grad:
        return (torch.autograd.graph.get_gradient_edge(t).node, 0)  # torch makes the leaf's AccumulateGrad too
    return None


def _input_edge(t: Any) -> tuple[Any, int]:
    """An `inputs=` entry's edge; a leaf with no AccumulateGrad gets none here (torch then makes an Identity)."""
    if isinstance(t, torch.autograd.graph.GradientEdge):
        return (t.node, t.output_nr)
    if t.grad_fn is not None:
        return (t.grad_fn, t.output_nr)
    return (None, 0)


def _run_args(args: tuple, kwargs: dict) -> dict:
    """`_engine_run_backward(outputs, grads, retain_graph, create_graph, inputs, allow_unused, accumulate_grad=)`."""
    names = ("grad_tensors", "retain_graph", "create_graph", "inputs", "allow_unused", "accumulate_grad")
    params = dict(zip(names, args, strict=False))
    params.update(kwargs)
    params.setdefault("accumulate_grad", True)
    for name in names:
        params.setdefault(name, None)
    return params
