"""Device worker threads, queue choice and the reentrant thread pool (engine-semantics §12.1–§12.3, §13).

NOTE [device threads]
Devices are labels: a node's device is the first non-CPU device of its input metadata. CPU work always
runs on the thread that called backward, from that thread's own ready queue. Each `cuda:N` device gets
one shared ready queue and one worker thread (`pt_autograd_N`), started the first time a backward needs
that device, looping on its queue for the rest of the process. A worker that finishes a graph task it
does not own pushes a dummy task to the owner's queue to wake it. With multithreading disabled, every
task goes to the calling thread's queue. Reentrant backward nested MAX_DEPTH deep on one thread moves to
a pool thread that adopts the owner's queue and starts counting its own depth from zero.
"""
from __future__ import annotations

import atexit
import collections
import threading
from typing import TYPE_CHECKING

from ._ready_queue import NodeTask, ReadyQueue
from ._state import CPU_DEVICE, tls

if TYPE_CHECKING:
    from ._graph_task import GraphTask

_lock = threading.Lock()
_device_queues: dict[int, ReadyQueue] = {}
_device_threads: dict[int, threading.Thread] = {}


def device_index(device: str) -> int:
    """The worker index of a device label: N for `cuda:N`, CPU_DEVICE for cpu and meta."""
    kind, _, index = device.partition(":")
    if kind in ("cpu", "meta") or not index:
        return CPU_DEVICE
    return int(index)


def device_queue(index: int) -> ReadyQueue:
    """The shared queue of device `index`, starting its worker thread on first use."""
    queue = _device_queues.get(index)
    if queue is not None:
        return queue
    with _lock:
        queue = _device_queues.get(index)
        if queue is None:
            queue = ReadyQueue(f"cuda:{index}")
            thread = threading.Thread(target=_device_thread_main, args=(index, queue),
                                      name=f"pt_autograd_{index}", daemon=True)
            _device_queues[index] = queue
            _device_threads[index] = thread
            thread.start()
    return queue


def _device_thread_main(index: int, queue: ReadyQueue) -> None:
    from ._engine import thread_main

    tls.worker_device = index
    tls.cpu_ready_queue = queue
    thread_main(None)


def ready_queue(graph_task: GraphTask, device: str) -> ReadyQueue:
    """The queue a task for a node on `device` goes to (engine-semantics §12.1)."""
    if not graph_task.multithreading:
        return graph_task.cpu_ready_queue
    index = device_index(device)
    return graph_task.cpu_ready_queue if index == CPU_DEVICE else device_queue(index)


def ready_queue_by_index(cpu_ready_queue: ReadyQueue, index: int) -> ReadyQueue:
    """The CPU queue for CPU_DEVICE, else device `index`'s queue."""
    return cpu_ready_queue if index == CPU_DEVICE else device_queue(index)


def all_queues(cpu_ready_queue: ReadyQueue) -> list[ReadyQueue]:
    """`cpu_ready_queue` and every device queue started so far."""
    return [cpu_ready_queue, *list(_device_queues.values())]


def wake_owner(graph_task: GraphTask) -> None:
    """A thread other than the owner finished `graph_task`: send the owner a dummy task (engine-semantics §3.6)."""
    from ._ready_queue import InputBuffer

    ready_queue_by_index(graph_task.cpu_ready_queue, graph_task.owner).push(
        NodeTask(graph_task, None, InputBuffer(0)))


class _ReentrantPool:
    """Threads that take over reentrant backward calls nested too deep on one thread (engine-semantics §13.1)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # taken with `with self.lock:` (NOTE [interrupts in the engine])
        self.cond = threading.Condition(self.lock)
        self.graph_tasks: collections.deque = collections.deque()
        self.num_workers = 0
        self.threads: list[threading.Thread] = []

    def add(self, graph_task: GraphTask) -> None:
        """Queue `graph_task` for a pool thread, spawning one when no idle worker is left for it."""
        with self.lock:
            create = self.num_workers <= len(self.graph_tasks)
            self.graph_tasks.append(graph_task)
            if create:
                thread = threading.Thread(target=self._worker, name="pt_autograd_reentrant", daemon=True)
                thread.start()
                self.threads.append(thread)
            self.cond.notify()

    def _worker(self) -> None:
        from ._engine import thread_main

        while True:
            with self.lock:
                self.num_workers += 1
                while not self.graph_tasks:
                    self.cond.wait()
                self.num_workers -= 1
                graph_task = self.graph_tasks.popleft()
            if graph_task is None:  # shutdown
                return
            if graph_task.gone:
                continue
            tls.worker_device = graph_task.owner
            tls.cpu_ready_queue = ready_queue_by_index(graph_task.cpu_ready_queue, graph_task.owner)
            tls.total_depth = graph_task.reentrant_depth
            thread_main(graph_task)

    def shutdown(self) -> None:
        """Ask every pool thread to exit."""
        with self.lock:
            self.graph_tasks.extend([None] * len(self.threads))
            self.cond.notify_all()


reentrant_pool = _ReentrantPool()


def shutdown(timeout: float = 1.0) -> None:
    """Stop the device threads and pool threads (also run at interpreter exit)."""
    for queue in list(_device_queues.values()):
        queue.push(NodeTask(None, None, None, is_shutdown=True), increment_outstanding=False)
    reentrant_pool.shutdown()
    for thread in [*_device_threads.values(), *reentrant_pool.threads]:
        if thread is not threading.current_thread():
            thread.join(timeout)


atexit.register(shutdown)
