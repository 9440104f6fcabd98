"""The autograd engine: Engine::execute, evaluate_function and thread_main, as PyTorch 2.13 runs them."""
from __future__ import annotations

import threading
import warnings
from heapq import heappop as _heappop
from heapq import heappush as _heappush

import numpy as np

from . import _observer, _state
from ._graph_task import ExecInfo, GraphTask
from ._hooks import call_post_hooks, call_pre_hooks, call_tensor_pre_hooks, check_single_result
from ._node import AccumulateGrad, Node, anomaly
from ._ready_queue import INT_MAX, InputBuffer, NodeTask, ReadyQueue
from ._state import CPU_DEVICE, NO_DEVICE, tls
from ._tensor import Tensor
from ._threads import ready_queue, reentrant_pool, wake_owner
from ._validate import conform_grad, validate_outputs

__all__ = ["execute", "queue_callback", "GraphTask", "ExecInfo", "NodeTask", "ReadyQueue", "InputBuffer",
           "MAX_DEPTH", "INT_MAX", "check_single_result"]

MAX_DEPTH = 60
"""Reentrant backward calls nested on one thread before the work moves to a pool thread (engine-semantics §13)."""


# -- execution --------------------------------------------------------------------------------------------
def call_function(graph_task: GraphTask, fn: Node, input_buffer: InputBuffer) -> list:
    """Hooks, apply, validate and post-hooks for one node (engine-semantics §7.1 step 3)."""
    inputs = input_buffer.buffer
    if fn._tensor_pre_hooks is not None or fn._retains_grad_hooks or fn._leaf_hooks:  # else nothing to run
        inputs = call_tensor_pre_hooks(fn, inputs, graph_task)
    input_buffer.buffer = _NO_GRADS  # torch moves the grads out of the buffer: a pre-hook's copy is then the only
    if fn._pre_hooks:  # holder, and AccumulateGrad may still steal
        inputs = call_pre_hooks(fn, inputs, graph_task)
    had_post_hooks = bool(fn._post_hooks)
    if _observer.observers:
        for hook in _observer.dispatch.get("node_started", ()):
            hook(graph_task, fn, inputs)
    outputs = fn.apply(list(inputs) if had_post_hooks else inputs)
    validate_outputs(fn.next_edges, outputs, fn)
    if fn._post_hooks:
        outputs = call_post_hooks(fn, outputs, inputs, had_post_hooks, graph_task)
    if _observer.observers:
        for hook in _observer.dispatch.get("node_finished", ()):
            hook(graph_task, fn, outputs)
    return outputs


def evaluate_function(graph_task: GraphTask, fn: Node, inputs: InputBuffer, started: bool = False) -> bool | None:
    """Run one node and route its outputs to the next nodes' buffers (engine-semantics §7.1, §4.5, §5.3).

    A node with outputs is counted off its graph task (thread_main's decrement of outstanding_tasks, which torch
    makes right after this) in the routing's critical section: returns whether the graph task is then complete.
    Otherwise returns None, and the caller counts it off. `started`: thread_main has reported node_started with
    the pop (NOTE [fused points] in engine/_observer.py).
    """
    exec_info = graph_task.exec_info
    if exec_info:
        fn_info = exec_info[fn]
        new_inputs = inputs.buffer
        if not fn_info.needed:
            new_inputs = call_tensor_pre_hooks(fn, inputs.buffer, graph_task)
        if fn_info.captures:
            with graph_task.mutex:
                for input_idx, output_idx in fn_info.captures:
                    graph_task.captured_vars[output_idx] = new_inputs[input_idx]
                    if _observer.observers:
                        _observer.notify("grad_captured", graph_task, fn, output_idx, new_inputs[input_idx])
        if not fn_info.needed:
            return None
        del new_inputs  # a grad this node sums later must not be held here (InputBuffer's in-place sum)

    if (fn._tensor_pre_hooks is None and not fn._retains_grad_hooks and not fn._leaf_hooks and not fn._pre_hooks
            and not fn._post_hooks):
        # call_function with no hook to call: the same steps, without the calls that would find none
        grads = inputs.buffer
        inputs.buffer = _NO_GRADS  # moved out of the buffer, as call_function does
        if _observer.observers and not started:
            for hook in _observer.dispatch.get("node_started", ()):
                hook(graph_task, fn, grads)
        outputs = fn.apply(grads)
        del grads
        next_edges = fn.next_edges
        if len(outputs) == len(next_edges):
            # validate_outputs, inline (its twin: engine/_validate.py): a grad as the next node expects it passes, a
            # Tensor that is not is conformed (a bias's broadcast grad summed), anything else goes to validate_outputs
            i = 0
            for grad in outputs:
                if grad is not None:
                    nxt, input_nr = next_edges[i]
                    if nxt is not None:
                        meta = nxt._input_metadata[input_nr]
                        if grad.__class__ is not Tensor:
                            validate_outputs(next_edges, outputs, fn)  # the grads before it pass again
                            break
                        data = grad._data
                        dtype = meta.dtype
                        if data.shape != meta.shape or dtype is None or data.dtype != dtype.np or \
                                grad._device != meta.device:
                            outputs[i] = conform_grad(fn, i, grad, meta)
                i += 1
        else:
            validate_outputs(next_edges, outputs, fn)  # raises: a wrong number of grads
        if fn._post_hooks:  # registered while the node ran: they get empty grad_outputs
            outputs = call_post_hooks(fn, outputs, _NO_GRADS, False, graph_task)
        if _observer.observers:  # attached while the node ran
            for hook in _observer.dispatch.get("node_finished", ()):
                hook(graph_task, fn, outputs)
    else:
        outputs = call_function(graph_task, fn, inputs)
    inputs.buffer = _NO_GRADS  # torch drops the node's input grads here, before routing its outputs
    if not graph_task.keep_graph:
        fn.release_variables()
    num_outputs = len(outputs)
    if num_outputs == 0:
        return None

    if anomaly.enabled and anomaly.check_nan:
        for i, output in enumerate(outputs):
            if output is not None and output._data.dtype.kind == "f" and np.isnan(output._data).any():
                raise RuntimeError(f"Function '{fn.name()}' returned nan values in its {i}th output.")

    observed = bool(_observer.observers)
    if type(outputs) is not list:
        outputs = list(outputs)
    # Where a ready node goes when no device is to be picked: pushed inline (push_node's steps, its report included).
    cpu_queue = None if _state.cuda_seen else graph_task.cpu_ready_queue
    with graph_task.mutex:
        dependencies = graph_task.dependencies
        not_ready = graph_task.not_ready
        next_edges = fn.next_edges
        depth_key = -graph_task.reentrant_depth  # the pushed tasks' key, read once
        for i in range(num_outputs):
            nxt, input_nr = next_edges[i]
            if nxt is None:
                continue
            count = dependencies.get(nxt)
            if count is None:
                raise RuntimeError("dependency not found for " + nxt.name())
            is_ready = count == 1
            if is_ready:
                del dependencies[nxt]
            else:
                dependencies[nxt] = count - 1
            buffer = not_ready.get(nxt)
            if buffer is None:
                if exec_info:
                    info = exec_info.get(nxt)
                    if info is None or not info.should_execute():
                        continue  # the dependency was decremented, but no buffer is made
                # InputBuffer(n).add(input_nr, _take(outputs, i)), inline: the first grad of a slot is stored as is
                slots = [None] * len(nxt._input_metadata)
                slots[input_nr] = outputs[i]
                outputs[i] = None  # moved, so that a later sum into it may reuse its memory (no local holds it)
                buffer = _new_object(InputBuffer)
                buffer.buffer = slots
                accumulated = False
                if not is_ready:
                    if observed:
                        for hook in _observer.dispatch.get("buffer_written", ()):
                            hook(graph_task, nxt, input_nr, False, buffer)
                    not_ready[nxt] = buffer
                    continue
            else:
                accumulated = buffer.add(input_nr, _take(outputs, i))
                if not is_ready:
                    if observed:
                        for hook in _observer.dispatch.get("buffer_written", ()):
                            hook(graph_task, nxt, input_nr, accumulated, buffer)
                    continue
                del not_ready[nxt]
            if cpu_queue is None:
                queue = ready_queue(graph_task, nxt.device()) if _state.cuda_seen else graph_task.cpu_ready_queue
                if observed:  # the write reported with the push (NOTE [fused points])
                    queue.push_node(graph_task, nxt, buffer, input_nr, accumulated)
                else:
                    queue.push_node(graph_task, nxt, buffer)
                continue
            # cpu_queue.push_node(graph_task, nxt, buffer), inline
            task = _new_list(NodeTask)
            task.owner = graph_task
            task.fn = nxt
            task.inputs = buffer
            task.is_shutdown = False
            task.extend((2, depth_key, -nxt._seq))
            if not graph_task.gone:
                graph_task.outstanding_tasks += 1
            with cpu_queue.lock:
                if cpu_queue._waiting:
                    cpu_queue._waiting = False
                    cpu_queue._wake.put(None)
                _heappush(cpu_queue.heap, task)
            if observed:  # the write and the push, with only the push between them (NOTE [fused points])
                for hook in _observer.dispatch.get("buffer_written_and_task_pushed", ()):
                    hook(graph_task, nxt, input_nr, accumulated, buffer, task, cpu_queue)
            elif _observer.observers:  # attached while the node ran
                for hook in _observer.dispatch.get("task_pushed", ()):
                    hook(None if graph_task.gone else graph_task, task, cpu_queue)  # task.graph_task
        graph_task.outstanding_tasks -= 1
        return graph_task.outstanding_tasks <= 0 or (graph_task.exit_on_error and graph_task.has_error)


_new_list = list.__new__
_new_object = object.__new__


def thread_main(graph_task: GraphTask | None) -> None:
    """Pop and run tasks until `graph_task` completes (engine-semantics §12.3).

    Each node runs with grad mode = its graph task's create_graph, the graph task and the node as current, as in
    torch. Between two nodes that follow each other the thread's values before the first are not put back, as
    no user code runs there; they are put back before any does (a graph task's post-processing, waiting,
    leaving). An observer's task_popped between two nodes sees the earlier node's values.
    """
    queue: ReadyQueue = tls.cpu_ready_queue
    heap = queue.heap
    before = None  # (grad mode, graph task, node) as they were before the current run of nodes
    current = None  # the graph task this run of nodes has set as current
    try:
        while True:  # not `while <condition>:`, whose back edge CPython 3.11 does not count towards quickening the
            # code (a conditional jump): one call per backward would run every attribute read of this loop unspecialized
            # until the 8th backward of the process; an unconditional back edge quickens it after 8 iterations
            if graph_task is not None and graph_task.future_completed:
                break
            with queue.lock:  # queue.pop() without the call while a task is there (NOTE [interrupts in the engine])
                task = _heappop(heap) if heap else None
            started = False  # node_started reported with the pop (NOTE [fused points] in engine/_observer.py)
            if task is None:
                if before is not None:
                    tls.grad_enabled, tls.current_graph_task, tls.current_node = before
                    before = None
                task = queue.pop()  # waits for one
            elif _observer.observers:
                owner = task.owner
                fn = task.fn
                if fn is not None and owner is not None and not owner.gone and not owner.has_error \
                        and not owner.exec_info and fn._tensor_pre_hooks is None and not fn._retains_grad_hooks \
                        and not fn._leaf_hooks and not fn._pre_hooks and not fn._post_hooks:
                    # the node runs, and its first step reports node_started: nothing runs or is reported between
                    # (the graph task's gone and has_error read here decide, as they would a few lines below)
                    for hook in _observer.dispatch.get("task_popped_and_started", ()):
                        hook(owner, task, queue, task.inputs.buffer)
                    started = True
                else:
                    for hook in _observer.dispatch.get("task_popped", ()):
                        hook(None if owner is None or owner.gone else owner, task, queue)  # task.graph_task
            if task.is_shutdown:
                break
            local_graph_task = task.owner  # task.graph_task, read inline
            if not started and (local_graph_task is None or local_graph_task.gone):
                continue  # its GraphTask is gone: discard, no decrement
            fn = task.fn
            if started or (fn is not None and not local_graph_task.has_error):
                if before is None:
                    before = (tls.grad_enabled, tls.current_graph_task, tls.current_node)
                    current = None
                tls.grad_enabled = local_graph_task.create_graph  # user code in a node may leave another mode set
                if current is not local_graph_task:  # else still set: only the engine sets it, and puts it back
                    tls.current_graph_task = current = local_graph_task
                tls.current_node = fn
                try:
                    if fn.__class__ is AccumulateGrad and not local_graph_task.exec_info \
                            and fn._tensor_pre_hooks is None and not fn._retains_grad_hooks and not fn._pre_hooks \
                            and not fn._post_hooks and not fn.variable._backward_hooks:
                        # evaluate_function's steps for a leaf's AccumulateGrad with no hook to call (every
                        # parameter's grad): it returns nothing, so there is nothing to validate or route, and it
                        # saves nothing to release
                        grads = task.inputs.buffer
                        task.inputs.buffer = _NO_GRADS  # moved out, as call_function does: AccumulateGrad may steal
                        if _observer.observers and not started:
                            for hook in _observer.dispatch.get("node_started", ()):
                                hook(local_graph_task, fn, grads)
                        fn.apply(grads)
                        del grads
                        outputs = []
                        if fn._post_hooks:  # registered while the node ran (a post-accumulate-grad hook)
                            outputs = call_post_hooks(fn, outputs, _NO_GRADS, False, local_graph_task)
                        if _observer.observers:  # attached while the node ran
                            for hook in _observer.dispatch.get("node_finished", ()):
                                hook(local_graph_task, fn, outputs)
                        done = None
                    else:
                        done = evaluate_function(local_graph_task, fn, task.inputs, started)
                except BaseException as e:  # noqa: BLE001 - the first error completes the future
                    local_graph_task.set_exception(e, fn)
                    done = None
            else:
                done = None
            if done is None:  # the task was not counted off with its node's routing
                with local_graph_task.mutex:
                    local_graph_task.outstanding_tasks -= 1
                    done = local_graph_task.outstanding_tasks <= 0 or (  # completed(), inline
                        local_graph_task.exit_on_error and local_graph_task.has_error)
            if done:
                if before is not None:
                    tls.grad_enabled, tls.current_graph_task, tls.current_node = before
                    before = None
                local_graph_task.mark_as_completed_and_run_post_processing()
                if tls.worker_device != local_graph_task.owner:
                    wake_owner(local_graph_task)
    finally:
        if before is not None:
            tls.grad_enabled, tls.current_graph_task, tls.current_node = before


def compute_min_topological_nr(outputs: list) -> int:
    """The smallest topological_nr among the output edges' nodes; 0 without outputs (engine-semantics §3.1 step 8)."""
    if not outputs:
        return 0
    return min(fn._topological_nr() for fn, _ in outputs)


_NO_GRADS: list = []


def _take(outputs: list, i: int):
    """outputs[i], moved out of the list (as torch std::moves it into the buffer), so that a buffer that later
    sums into it holds its only reference (InputBuffer's in-place accumulation)."""
    var = outputs[i]
    outputs[i] = None
    return var


def compute_dependencies(root: Node, graph_task: GraphTask, min_topo_nr: int) -> list[Node]:
    """Count, per node, the edges reaching it from expanded nodes; returns the pruned nodes (engine-semantics §3.4)."""
    dependencies = graph_task.dependencies  # empty until now: a node is seen the first time it gets a count
    pruned: list[Node] = []
    stack = [root]
    while stack:
        fn = stack.pop()
        fn._has_parent = True  # fn._topological_nr(), inline: reading it freezes the node
        if fn._topo < min_topo_nr:
            pruned.append(fn)
            continue
        for nxt, _ in fn.next_edges:
            if nxt is not None:
                count = dependencies.get(nxt)
                if count is None:
                    dependencies[nxt] = 1
                    stack.append(nxt)
                else:
                    dependencies[nxt] = count + 1
    graph_task.nodes_in_graph.update(dependencies)  # the nodes seen, as torch's `seen` set
    return pruned


_warned_create_graph = False


def execute(root_edges: list, inputs: list, keep_graph: bool, create_graph: bool, accumulate_grad: bool,
            outputs: list) -> list:
    """Engine::execute: run the graph below `root_edges`; returns the captured grads (engine-semantics §3.1)."""
    global _warned_create_graph
    validate_outputs(root_edges, inputs, None)
    if accumulate_grad and create_graph and not _warned_create_graph:
        _warned_create_graph = True
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between the parameter and "
            "its gradient which can cause a memory leak. We recommend using autograd.grad when creating the "
            "graph to avoid this. If you have to use this function, make sure to reset the .grad fields of "
            "your parameters to None after use to break the cycle and avoid the leak.", UserWarning, stacklevel=4)
    if tls.cpu_ready_queue is None:
        tls.cpu_ready_queue = ReadyQueue(f"cpu:{threading.get_ident()}")
    reentrant = tls.worker_device != NO_DEVICE
    depth = tls.total_depth + 1 if reentrant else 0
    graph_root = root_edges[0][0] if len(root_edges) == 1 else None
    graph_task = GraphTask(keep_graph, create_graph, depth, tls.cpu_ready_queue,
                           [e[0] for e in root_edges], accumulate_grad)
    graph_task.multithreading = tls.multithreading_enabled
    if graph_root is None:
        from ._node import GraphRoot

        graph_root = GraphRoot(root_edges, inputs)
        if _observer.observers:
            _observer.notify("node_created", graph_root)
    graph_task.graph_root = graph_root
    graph_task.outputs = outputs
    if _observer.observers:
        _observer.notify("graph_task_started", graph_task)
    min_topo_nr = compute_min_topological_nr(outputs)
    pruned = compute_dependencies(graph_root, graph_task, min_topo_nr)
    if _observer.observers:
        _observer.notify("dependencies_computed", graph_task, min_topo_nr, pruned)
    if outputs:
        graph_task.init_to_execute(graph_root, outputs, accumulate_grad, min_topo_nr)
        if _observer.observers:
            _observer.notify("exec_info_computed", graph_task)
    if len(root_edges) == 1:
        buffer = InputBuffer(len(graph_root._input_metadata))
        buffer.add(root_edges[0][1], inputs[0])
    else:
        buffer = InputBuffer(0)
    try:
        execute_with_graph_task(graph_task, graph_root, buffer)
        graph_task.done.wait()
    finally:
        graph_task.mark_gone()
    error, graph_task.error = graph_task.error, None  # no cycle through the traceback
    if error is not None:
        try:
            raise error
        finally:  # nor through this frame's local: torch frees the graph as soon as the caller drops the error
            del error
    return graph_task.captured_vars


def execute_with_graph_task(graph_task: GraphTask, graph_root: Node, input_buffer: InputBuffer) -> None:
    """Queue the root and run the task: on this thread, inline when reentrant, or on a pool thread when
    this thread already holds MAX_DEPTH nested reentrant calls (engine-semantics §3.5, §13.1)."""
    queue = ready_queue(graph_task, graph_root.device())
    # The thread-local state is set and restored with no call in between that an interrupt could land
    # on (NOTE [interrupts in the engine]): a thread left marked as a worker would treat its next
    # backward as reentrant.
    if tls.worker_device == NO_DEVICE:
        graph_task.owner = CPU_DEVICE
        tls.worker_device = CPU_DEVICE
        try:
            queue.push(NodeTask(graph_task, graph_root, input_buffer))
            thread_main(graph_task)
        finally:
            tls.worker_device = NO_DEVICE
    else:
        graph_task.owner = tls.worker_device
        queue.push(NodeTask(graph_task, graph_root, input_buffer))
        if tls.current_depth >= MAX_DEPTH:
            reentrant_pool.add(graph_task)  # the caller waits on the graph task in execute()
            return
        depth, total = tls.current_depth, tls.total_depth
        tls.current_depth, tls.total_depth = depth + 1, total + 1
        try:
            thread_main(graph_task)
        finally:
            tls.current_depth, tls.total_depth = depth, total


def queue_callback(callback) -> None:
    """Run `callback` when the current graph task finishes (Variable._execution_engine.queue_callback)."""
    graph_task = tls.current_graph_task
    if graph_task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    with graph_task.mutex:
        graph_task.final_callbacks.append(callback)
