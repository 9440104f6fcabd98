"""The autograd engine: GraphTask, ReadyQueue, InputBuffer and Engine::execute, as PyTorch 2.13 runs them.

Imports numpy and the standard library only; never the tracer or any UI package.

NOTE [ready queue order]
A ReadyQueue is a max-heap on (reentrant depth, seq_nr) (facts §4.1); tasks with equal keys leave in
the order libstdc++'s std::priority_queue gives them (facts §4.2), which is neither FIFO nor stable.
Python's heapq makes exactly the same moves as libstdc++'s push_heap/pop_heap when items compare by
their key alone: sift-up on a strict comparison, and on pop a hole walked to a leaf through the child
that is not strictly better on the left (the right one on ties). So NodeTask compares by key only, with
no insertion counter; tests/engine/test_ready_queue.py checks this against a model of libstdc++.
"""
from __future__ import annotations

import heapq
import threading
import warnings
from typing import Any

import numpy as np

from . import _observer
from ._node import Node, anomaly, hook_name
from ._ops import clone, legacy_type_name, sum_to, to
from ._state import CPU_DEVICE, NO_DEVICE, tls
from ._tensor import Tensor, make_tensor

MAX_DEPTH = 60
"""Reentrant backward calls nested on one thread before the work moves to a pool thread (facts §7)."""


# -- tasks and queues -------------------------------------------------------------------------------------
INT_MAX = 2**31 - 1


class NodeTask:
    """A node ready to run, with its gathered input grads; ordered by `key` alone (NOTE [ready queue order])."""

    __slots__ = ("owner", "fn", "inputs", "key", "is_shutdown")

    def __init__(self, graph_task: GraphTask | None, fn: Node | None, inputs: InputBuffer | None,
                 is_shutdown: bool = False) -> None:
        self.owner = graph_task
        self.fn = fn
        self.inputs = inputs
        self.is_shutdown = is_shutdown
        # heapq pops the smallest key: shutdown, then dummy (null fn) tasks, then real ones by largest
        # depth and then largest seq_nr. A list, so a gone GraphTask can raise its tasks' depth in place.
        if is_shutdown:
            self.key = [0, 0, 0]
        elif fn is None:
            self.key = [1, 0, 0]
        else:
            self.key = [2, -graph_task.reentrant_depth, -fn._seq]

    def __lt__(self, other: NodeTask) -> bool:
        return self.key < other.key

    @property
    def graph_task(self) -> GraphTask | None:
        """The task's GraphTask, or None once it is gone (its backward call has returned or raised)."""
        owner = self.owner
        return None if owner is None or owner.gone else owner

    @property
    def priority(self) -> tuple[int, int]:
        """(reentrant depth, seq_nr) as the queue compares them now; dummy tasks report (-1, -1)."""
        if self.fn is None:
            return (-1, -1)
        return (-self.key[1], -self.key[2])


class ReadyQueue:
    """A thread-safe priority queue of NodeTasks (one per CPU thread and one per device)."""

    __slots__ = ("heap", "cond", "name")

    def __init__(self, name: str) -> None:
        self.heap: list[NodeTask] = []
        self.cond = threading.Condition(threading.Lock())
        self.name = name

    def push(self, task: NodeTask, increment_outstanding: bool = True) -> None:
        """Push `task`, counting it against its GraphTask (facts §4.4)."""
        if increment_outstanding and not task.is_shutdown:
            gt = task.owner
            if gt is not None and not gt.gone:
                with gt.mutex:
                    gt.outstanding_tasks += 1
        with self.cond:
            heapq.heappush(self.heap, task)
            self.cond.notify()
        if _observer.observers:
            _observer.notify("task_pushed", task.graph_task, task, self)

    def pop(self) -> NodeTask:
        """Take the highest-priority task, waiting for one if the queue is empty."""
        with self.cond:
            while not self.heap:
                self.cond.wait()
            task = heapq.heappop(self.heap)
        if _observer.observers:
            _observer.notify("task_popped", task.graph_task, task, self)
        return task

    def __len__(self) -> int:
        return len(self.heap)

    def snapshot(self) -> list[NodeTask]:
        """The tasks in the order they would be popped now (for debuggers; does not change the queue)."""
        with self.cond:
            heap = list(self.heap)
        return [heapq.heappop(heap) for _ in range(len(heap))]


class InputBuffer:
    """The grads gathered for one node, one slot per input; later writes to a slot are summed."""

    __slots__ = ("buffer",)

    def __init__(self, size: int) -> None:
        self.buffer: list = [None] * size

    def add(self, pos: int, var: Any) -> bool:
        """Add `var` at slot `pos`; returns True when it was summed into an earlier grad (facts §5.4)."""
        if var is None:
            return False
        old = self.buffer[pos]
        if old is None:
            self.buffer[pos] = var
            return False
        self.buffer[pos] = _accumulate(old, var)
        return True


def _accumulate(old: Any, var: Any) -> Any:
    """old + var: recorded (AddBackward0) in grad mode, else a plain numpy sum."""
    if tls.grad_enabled:
        return old + var
    res = old._data + var._data
    if res.dtype != old._data.dtype:
        res = res.astype(old._data.dtype)
    return make_tensor(res, device=old._device)


class ExecInfo:
    """Whether a node runs (`needed`) and which of its input grads `autograd.grad` captures (facts §3.3)."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None  # (input_idx, output_idx)

    def should_execute(self) -> bool:
        """Needed, or holding a capture."""
        return self.needed or bool(self.captures)


_graph_task_ids = iter(range(1, 1 << 62))


class GraphTask:
    """The state of one backward or grad call (facts §3)."""

    def __init__(self, keep_graph: bool, create_graph: bool, reentrant_depth: int,
                 cpu_ready_queue: ReadyQueue, graph_roots: list, accumulate_grad: bool) -> None:
        self.id = next(_graph_task_ids)
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.reentrant_depth = reentrant_depth
        self.cpu_ready_queue = cpu_ready_queue
        self.graph_roots = graph_roots
        self.accumulate_grad = accumulate_grad
        self.exit_on_error = False
        self.dependencies: dict[Node, int] = {}
        self.nodes_in_graph: set[Node] = set()
        self.not_ready: dict[Node, InputBuffer] = {}
        self.exec_info: dict[Node, ExecInfo] = {}
        self.captured_vars: list = []
        self.outstanding_tasks = 0
        self.has_error = False
        self.error: BaseException | None = None
        self.future_completed = False
        self.gone = False
        self._post_processed = False
        self.owner = NO_DEVICE
        self.final_callbacks: list = []
        self.mutex = threading.RLock()
        self.done = threading.Event()
        self.thread_id = threading.get_ident()

    def completed(self) -> bool:
        """No task outstanding, or an error when exit_on_error (facts §4.4)."""
        return self.outstanding_tasks <= 0 or (self.exit_on_error and self.has_error)

    def init_to_execute(self, graph_root: Node, outputs: list, accumulate_grad: bool, min_topo_nr: int) -> None:
        """Mark the nodes on a path to `outputs` as needed, and set up captures (facts §3.3)."""
        exec_info = self.exec_info
        output_idx = 0
        for fn, input_nr in outputs:
            info = exec_info.get(fn)
            if info is None:
                info = exec_info[fn] = ExecInfo()
            if accumulate_grad:
                info.needed = True
            else:
                if info.captures is None:
                    info.captures = []
                info.captures.append((input_nr, output_idx))
                output_idx += 1
        self.captured_vars = [None] * output_idx

        def should_execute(fn: Node) -> bool:
            info = exec_info.get(fn)
            return info is not None and info.should_execute()

        def mark_needed(fn: Node) -> None:
            info = exec_info.get(fn)
            if info is None:
                info = exec_info[fn] = ExecInfo()
            info.needed = True

        # Iterative DFS with one global `seen` set; outputs are deliberately not pre-seeded, so the
        # walk continues past an output that lies above another output.
        stack: list[list] = [[graph_root, 0]]
        seen: set[Node] = set()
        if graph_root not in exec_info:
            exec_info[graph_root] = ExecInfo()
        while stack:
            frame = stack[-1]
            fn = frame[0]
            edges = fn.next_edges
            child = None
            while frame[1] < len(edges):
                candidate = edges[frame[1]][0]
                frame[1] += 1
                if candidate is None:
                    continue
                if candidate in seen:
                    if should_execute(candidate):
                        mark_needed(fn)
                    continue
                seen.add(candidate)
                child = candidate
                break
            if child is not None:
                if child._topological_nr() < min_topo_nr:
                    continue
                stack.append([child, 0])
            else:
                stack.pop()
                if stack and should_execute(fn):
                    mark_needed(stack[-1][0])

    def mark_gone(self) -> None:
        """The backward call is over: the GraphTask is gone, as when PyTorch frees it (facts §4.1, §4.6).

        Tasks it left in a queue (after an error) now compare as depth INT_MAX, so they surface first
        and are discarded. Their keys change in place, without re-heapifying, exactly as the answers of
        PyTorch's comparator change under a heap that is not rebuilt.
        """
        self.gone = True
        queue = self.cpu_ready_queue
        with queue.cond:
            for task in queue.heap:
                if task.owner is self and task.fn is not None:
                    task.key[1] = -INT_MAX

    def set_exception(self, error: BaseException, fn: Node | None) -> None:
        """Record the first error, complete the future with it (facts §8.1)."""
        with self.mutex:
            first = not self.has_error
            self.has_error = True
            if first:
                if anomaly.enabled and fn is not None:
                    _print_anomaly_stack(fn)
                if _observer.observers:
                    _observer.notify("error_raised", self, fn, error)
            if not self.future_completed:
                self.error = error
                self.future_completed = True
                self.done.set()

    def mark_as_completed_and_run_post_processing(self) -> None:
        """Run post-processing once and complete the future with the captured grads (facts §4.4)."""
        with self.mutex:
            if self.future_completed or self._post_processed:
                return
            self._post_processed = True
        try:
            self.exec_post_processing()
        except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
            self.set_exception(e, None)
            return
        with self.mutex:
            self.future_completed = True
        if _observer.observers:
            _observer.notify("graph_task_finished", self)
        self.done.set()

    def exec_post_processing(self) -> None:
        if self.not_ready:
            raise RuntimeError("could not compute gradients for some functions")
        prev = tls.current_graph_task
        tls.current_graph_task = self
        try:
            i = 0
            while i < len(self.final_callbacks):  # callbacks may queue more callbacks
                self.final_callbacks[i]()
                i += 1
        finally:
            tls.current_graph_task = prev


def _print_anomaly_stack(fn: Node) -> None:
    """Warn with the failing node's forward stack, then its parents' (facts §8.3)."""
    stack = "".join((fn._metadata or {}).get("traceback_", []))
    warnings.warn(f"Error detected in {fn.name()}. Traceback of forward call that caused the error:\n{stack}",
                  UserWarning, stacklevel=2)
    parent = fn._parent
    while parent is not None:
        stack = "".join((parent._metadata or {}).get("traceback_", []))
        warnings.warn(f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of forward call "
                      f"that induced the previous calculation:\n{stack}", UserWarning, stacklevel=2)
        parent = parent._parent


# -- hooks ----------------------------------------------------------------------------------------------------
def check_single_result(original: Any, result: Any, hook: Any) -> None:
    """Refuse a hook result that changes a grad's presence, type, device or size (python_hook.cpp)."""
    if result is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if original._data.dtype != result._data.dtype:
        raise RuntimeError(f"hook '{hook_name(hook)}' has changed the type of value (was "
                           f"{legacy_type_name(original)} got {legacy_type_name(result)})")
    if original._device != result._device:
        was_cuda = original._device.startswith("cuda")
        raise RuntimeError(f"hook '{hook_name(hook)}' has changed the type of value "
                           f"{'(was CUDA tensor got CPU tensor)' if was_cuda else '(was CPU tensor got CUDA tensor)'}")
    if original._data.shape != result._data.shape:
        raise RuntimeError(f"hook '{hook_name(hook)}' has changed the size of value")


def _check_tuple_result(prev: tuple, result: Any, hook: Any) -> None:
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(prev) != len(result):
        raise RuntimeError(f"hook '{hook_name(hook)}' has returned an incorrect number of values (got "
                           f"{len(result)}, but expected {len(prev)})")
    for p, r in zip(prev, result, strict=True):
        check_single_result(p, r, hook)


def call_tensor_pre_hooks(fn: Node, inputs: list, graph_task: GraphTask | None) -> list:
    """Tensor hooks, then retains_grad hooks, in that order (facts §5.1 a-b)."""
    observed = bool(_observer.observers)
    for hooks, slot in fn.tensor_pre_hooks():
        value = inputs[slot]
        changed = False
        for hook in list(hooks.values()):
            res = hook(value)
            if observed:
                _observer.notify("hook_ran", graph_task, fn, "tensor_pre", hook)
            if res is None or res is value:
                continue
            check_single_result(value, res, hook)
            value, changed = res, True
        if changed:
            inputs = list(inputs)
            inputs[slot] = value
    retains = fn._retains_grad_hooks
    if retains:
        for slot, tensor_ref in list(retains.items()):
            _retain_grad(tensor_ref(), inputs[slot])
            if observed:
                _observer.notify("hook_ran", graph_task, fn, "retains_grad", tensor_ref)
    return inputs


def _retain_grad(var: Any, grad: Any) -> None:
    """The retains_grad hook: clone on the first write, out-of-place sum afterwards (facts §6.5)."""
    if var is None or grad is None:
        return
    var._grad = clone(grad) if var._grad is None else var._grad + grad


def _call_tuple_hooks(fn: Node, hooks: dict, values: tuple, extra: tuple, kind: str,
                      graph_task: GraphTask | None) -> tuple:
    """Run Node hooks in registration order; a returned tuple replaces `values` (python_hook.cpp)."""
    for hook in list(hooks.values()):
        res = hook(values, *extra)
        if _observer.observers:
            _observer.notify("hook_ran", graph_task, fn, kind, hook)
        if res is None or res is values:
            continue
        _check_tuple_result(values, res, hook)
        values = res
    return values


def call_pre_hooks(fn: Node, inputs: list, graph_task: GraphTask | None) -> list:
    """Node pre-hooks `hook(grad_outputs)`; a returned tuple replaces the inputs."""
    hooks = fn._pre_hooks
    if not hooks:
        return inputs
    return list(_call_tuple_hooks(fn, hooks, tuple(inputs), (), "pre", graph_task))


def call_post_hooks(fn: Node, outputs: list, inputs: list, had_post_hooks: bool,
                    graph_task: GraphTask | None) -> list:
    """Node post-hooks `hook(grad_inputs=outputs, grad_outputs=inputs)`; a tuple replaces the outputs.

    A hook added while the node ran (none existed when it started) gets empty grad_outputs, as in PyTorch.
    """
    hooks = fn._post_hooks
    if not hooks:
        return outputs
    ins = tuple(inputs) if had_post_hooks else ()
    return list(_call_tuple_hooks(fn, hooks, tuple(outputs), (ins,), "post", graph_task))


# -- validation -------------------------------------------------------------------------------------------
def validate_outputs(edges: list, grads: list, fn: Node | None) -> None:
    """Check grads against the next nodes' input metadata; reduce broadcast grads (facts §5.5).

    Messages name `fn` ("Function XBackward0 returned an ...") when given; root grads pass None.
    """
    if len(grads) != len(edges):
        _validation_error(fn, f"invalid number of gradients - expected {len(edges)}, but got {len(grads)}")
    for i, (nxt, input_nr) in enumerate(edges):
        grad = grads[i]
        if nxt is None or grad is None:
            continue
        meta = nxt._input_metadata[input_nr]
        data = getattr(grad, "_data", None)
        if data is not None and data.shape == meta.shape and meta.dtype is not None and \
                data.dtype == meta.dtype.np and grad._device == meta.device:
            continue  # the common case: nothing to check further
        grads[i] = _conform_grad(fn, i, grad, meta)


def _conform_grad(fn: Node | None, i: int, grad: Any, meta: Any) -> Any:
    if not isinstance(grad, Tensor):
        raise TypeError(f"expected Tensor or None for gradient {i}, got {type(grad).__name__}")
    if not meta.is_defined:
        return grad
    shape = meta.shape
    if grad._data.shape != shape:
        if not _is_expandable_to(shape, grad._data.shape):
            _validation_error(fn, f"invalid gradient at index {i} - got {list(grad._data.shape)} but expected "
                                  f"shape compatible with {list(shape)}")
        grad = sum_to(grad, shape)
    if meta.dtype is not None and grad._data.dtype != meta.dtype.np:
        grad = to(grad, meta.dtype)
    if grad._device != meta.device:
        if grad._data.ndim != 0:
            _validation_error(fn, f"invalid gradient at index {i} - expected device {meta.device} but got "
                                  f"{grad._device}")
        grad = to(grad, meta.device)
    return grad


def _validation_error(fn: Node | None, msg: str) -> None:
    raise RuntimeError(msg if fn is None else f"Function {fn.name()} returned an {msg}")


def _is_expandable_to(shape: tuple, desired: tuple) -> bool:
    nd, nt = len(shape), len(desired)
    if nd > nt:
        return False
    for i in range(nd):
        size, target = shape[nd - i - 1], desired[nt - i - 1]
        if size != target and size != 1:
            return False
    return True


# -- execution --------------------------------------------------------------------------------------------
def call_function(graph_task: GraphTask, fn: Node, input_buffer: InputBuffer) -> list:
    """Hooks, apply, validate and post-hooks for one node (facts §5.1 step 3)."""
    inputs = call_tensor_pre_hooks(fn, input_buffer.buffer, graph_task)
    inputs = call_pre_hooks(fn, inputs, graph_task)
    had_post_hooks = bool(fn._post_hooks)
    if _observer.observers:
        _observer.notify("node_started", graph_task, fn, inputs)
    outputs = fn.apply(list(inputs) if had_post_hooks else inputs)
    validate_outputs(fn.next_edges, outputs, fn)
    outputs = call_post_hooks(fn, outputs, inputs, had_post_hooks, graph_task)
    if _observer.observers:
        _observer.notify("node_finished", graph_task, fn, outputs)
    return outputs


def evaluate_function(graph_task: GraphTask, fn: Node, inputs: InputBuffer, cpu_ready_queue: ReadyQueue) -> None:
    """Run one node and route its outputs to the next nodes' buffers (facts §5.1, §5.2, §5.6)."""
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
            return

    outputs = call_function(graph_task, fn, inputs)
    if not graph_task.keep_graph:
        fn.release_variables()
    num_outputs = len(outputs)
    if num_outputs == 0:
        return

    if anomaly.enabled and anomaly.check_nan:
        for i, output in enumerate(outputs):
            if output is not None and output._data.dtype.kind == "f" and np.isnan(output._data).any():
                raise RuntimeError(f"Function '{fn.name()}' returned nan values in its {i}th output.")

    observed = bool(_observer.observers)
    with graph_task.mutex:
        dependencies = graph_task.dependencies
        not_ready = graph_task.not_ready
        next_edges = fn.next_edges
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
                buffer = InputBuffer(len(nxt._input_metadata))
                accumulated = buffer.add(input_nr, outputs[i])
                if observed:
                    _observer.notify("buffer_written", graph_task, nxt, input_nr, accumulated, buffer)
                if is_ready:
                    ready_queue(cpu_ready_queue, nxt).push(NodeTask(graph_task, nxt, buffer))
                else:
                    not_ready[nxt] = buffer
            else:
                accumulated = buffer.add(input_nr, outputs[i])
                if observed:
                    _observer.notify("buffer_written", graph_task, nxt, input_nr, accumulated, buffer)
                if is_ready:
                    del not_ready[nxt]
                    ready_queue(cpu_ready_queue, nxt).push(NodeTask(graph_task, nxt, buffer))


def ready_queue(cpu_ready_queue: ReadyQueue, fn: Node) -> ReadyQueue:
    """The queue a node's task goes to: the graph task's CPU queue (devices come with worker threads)."""
    return cpu_ready_queue


def thread_main(graph_task: GraphTask | None) -> None:
    """Pop and run tasks until `graph_task` completes (facts §4.7)."""
    queue: ReadyQueue = tls.cpu_ready_queue
    while graph_task is None or not graph_task.future_completed:
        task = queue.pop()
        if task.is_shutdown:
            break
        local_graph_task = task.graph_task
        if local_graph_task is None:
            continue  # its GraphTask is gone: discard, no decrement
        if task.fn is not None and not local_graph_task.has_error:
            prev_grad, prev_gt, prev_node = tls.grad_enabled, tls.current_graph_task, tls.current_node
            tls.grad_enabled = local_graph_task.create_graph
            tls.current_graph_task = local_graph_task
            tls.current_node = task.fn
            try:
                evaluate_function(local_graph_task, task.fn, task.inputs, local_graph_task.cpu_ready_queue)
            except BaseException as e:  # noqa: BLE001 - the first error completes the future
                local_graph_task.set_exception(e, task.fn)
            finally:
                tls.grad_enabled, tls.current_graph_task, tls.current_node = prev_grad, prev_gt, prev_node
        with local_graph_task.mutex:
            local_graph_task.outstanding_tasks -= 1
            done = local_graph_task.completed()
        if done:
            local_graph_task.mark_as_completed_and_run_post_processing()


def compute_min_topological_nr(outputs: list) -> int:
    """The smallest topological_nr among the output edges' nodes; 0 without outputs (facts §3.1 step 8)."""
    if not outputs:
        return 0
    return min(fn._topological_nr() for fn, _ in outputs)


def compute_dependencies(root: Node, graph_task: GraphTask, min_topo_nr: int) -> list[Node]:
    """Count, per node, the edges reaching it from expanded nodes; returns the pruned nodes (facts §3.2)."""
    dependencies = graph_task.dependencies
    nodes_in_graph = graph_task.nodes_in_graph
    pruned: list[Node] = []
    stack = [root]
    while stack:
        fn = stack.pop()
        if fn._topological_nr() < min_topo_nr:
            pruned.append(fn)
            continue
        for nxt, _ in fn.next_edges:
            if nxt is not None:
                dependencies[nxt] = dependencies.get(nxt, 0) + 1
                if nxt not in nodes_in_graph:
                    nodes_in_graph.add(nxt)
                    stack.append(nxt)
    return pruned


_warned_create_graph = False


def execute(root_edges: list, inputs: list, keep_graph: bool, create_graph: bool, accumulate_grad: bool,
            outputs: list) -> list:
    """Engine::execute: run the graph below `root_edges`; returns the captured grads (facts §3.1)."""
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
        raise error
    return graph_task.captured_vars


def execute_with_graph_task(graph_task: GraphTask, graph_root: Node, input_buffer: InputBuffer) -> None:
    """Queue the root and run the task on this thread, inline when reentrant (facts §3.6, §7.1)."""
    queue = ready_queue(graph_task.cpu_ready_queue, graph_root)
    if tls.worker_device == NO_DEVICE:
        tls.worker_device = CPU_DEVICE
        graph_task.owner = CPU_DEVICE
        queue.push(NodeTask(graph_task, graph_root, input_buffer))
        try:
            thread_main(graph_task)
        finally:
            tls.worker_device = NO_DEVICE
    else:
        graph_task.owner = tls.worker_device
        queue.push(NodeTask(graph_task, graph_root, input_buffer))
        tls.total_depth += 1
        tls.current_depth += 1
        try:
            thread_main(graph_task)
        finally:
            tls.current_depth -= 1
            tls.total_depth -= 1


def queue_callback(callback) -> None:
    """Run `callback` when the current graph task finishes (Variable._execution_engine.queue_callback)."""
    graph_task = tls.current_graph_task
    if graph_task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    with graph_task.mutex:
        graph_task.final_callbacks.append(callback)
