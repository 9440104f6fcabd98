"""GraphTask: the state of one backward or grad call, with exec_info (engine-semantics §3, §4, §11.1)."""
from __future__ import annotations

import threading
import warnings

from . import _observer
from ._node import Node, anomaly
from ._ready_queue import INT_MAX, InputBuffer, ReadyQueue
from ._state import NO_DEVICE, tls


class ExecInfo:
    """Whether a node runs (`needed`) and which of its input grads `autograd.grad` captures (engine-semantics §4.2)."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None  # (input_idx, output_idx)

    def should_execute(self) -> bool:
        """Needed, or holding a capture."""
        return self.needed or bool(self.captures)


class _Latch:
    """A one-shot event on one raw lock, held until `set()`: unlike threading.Event, whose Python-level
    Condition an interrupted `wait()` can leave locked (blocking the thread that later sets it), each step
    here is one C call (NOTE [interrupts in the engine])."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        """Open the latch (again: a no-op)."""
        try:
            self._lock.release()
        except RuntimeError:  # already open
            pass

    def is_set(self) -> bool:
        """Whether `set()` was called."""
        return not self._lock.locked()

    def wait(self) -> None:
        """Block until `set()`."""
        with self._lock:
            pass


_graph_task_ids = iter(range(1, 1 << 62))


class GraphTask:
    """The state of one backward or grad call (engine-semantics §3)."""

    def __init__(self, keep_graph: bool, create_graph: bool, reentrant_depth: int,
                 cpu_ready_queue: ReadyQueue, graph_roots: list, accumulate_grad: bool) -> None:
        self.id = next(_graph_task_ids)
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.reentrant_depth = reentrant_depth
        self.cpu_ready_queue = cpu_ready_queue
        self.graph_roots = graph_roots
        self.graph_root: Node | None = None  # the single root's node, or the GraphRoot made for several
        self.outputs: list = []  # output edges (inputs= / autograd.grad inputs), as (node, input_nr)
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
        self.multithreading = True  # the caller's set_multithreading_enabled when backward started
        self.final_callbacks: list = []
        self.mutex = threading.RLock()
        self.done = _Latch()
        self.thread_id = threading.get_ident()

    def completed(self) -> bool:
        """No task outstanding, or an error when exit_on_error (engine-semantics §3.6)."""
        return self.outstanding_tasks <= 0 or (self.exit_on_error and self.has_error)

    def init_to_execute(self, graph_root: Node, outputs: list, accumulate_grad: bool, min_topo_nr: int) -> None:
        """Mark the nodes on a path to `outputs` as needed, and set up captures (engine-semantics §4.2)."""
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
        """The backward call is over: the GraphTask is gone, as when PyTorch frees it (engine-semantics §6.1, §12.2).

        Tasks it left in a queue (after an error) now compare as depth INT_MAX, so they surface first
        and are discarded. Their keys change in place, without re-heapifying, exactly as the answers of
        PyTorch's comparator change under a heap that is not rebuilt.
        """
        from ._threads import all_queues

        self.gone = True
        if _observer.observers:
            _observer.notify("graph_task_finished", self)
        for queue in all_queues(self.cpu_ready_queue):
            with queue.lock:
                for task in queue.heap:
                    if task.owner is self and task.fn is not None:
                        task[1] = -INT_MAX

    def set_exception(self, error: BaseException, fn: Node | None) -> None:
        """Record the first error, complete the future with it (engine-semantics §11.1)."""
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
        """Run post-processing once and complete the future with the captured grads (engine-semantics §3.6)."""
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
    """Warn with the failing node's forward stack, then its parents' (engine-semantics §11.3)."""
    stack = "".join((fn._metadata or {}).get("traceback_", []))
    warnings.warn(f"Error detected in {fn.name()}. Traceback of forward call that caused the error:\n{stack}",
                  UserWarning, stacklevel=2)
    parent = fn._parent
    while parent is not None:
        stack = "".join((parent._metadata or {}).get("traceback_", []))
        warnings.warn(f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of forward call "
                      f"that induced the previous calculation:\n{stack}", UserWarning, stacklevel=2)
        parent = parent._parent
