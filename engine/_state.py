"""Thread-local autograd state: the global sequence number and grad mode.

NOTE [seq_nr across threads]
PyTorch keeps the sequence number in a `thread_local uint64_t` (engine-semantics §1.1): every thread starts at 0,
and a node takes the value of the thread that creates it. Numbers from different threads cannot be
compared. Nodes created while a backward formula runs (create_graph) take numbers from the thread that
runs the node, which for CPU is the thread that called backward. Each node records its thread id.
"""
from __future__ import annotations

import threading
from typing import Any

NO_DEVICE = -2
CPU_DEVICE = -1
UINT64_MAX = 2**64 - 1


class _ThreadState(threading.local):
    """Per-thread state; class attributes are each new thread's starting values."""

    seq_nr: int = 0
    grad_enabled: bool = True
    multithreading_enabled: bool = True
    # Engine state (engine-semantics §3.1 step 5, §13): which device this thread works for, if any.
    worker_device: int = NO_DEVICE
    current_depth: int = 0
    total_depth: int = 0
    current_graph_task: Any = None
    current_node: Any = None
    cpu_ready_queue: Any = None


tls = _ThreadState()


def peek_sequence_nr() -> int:
    """The seq_nr the next numbered node on this thread will take."""
    return tls.seq_nr


def is_grad_enabled() -> bool:
    """Whether ops on this thread record history."""
    return tls.grad_enabled


class _GradModeContext:
    """Base of no_grad, enable_grad and set_grad_enabled: a context manager and a decorator."""

    _mode: bool

    def __enter__(self) -> None:
        self._prev = tls.grad_enabled
        tls.grad_enabled = self._mode

    def __exit__(self, *exc: object) -> None:
        tls.grad_enabled = self._prev

    def __call__(self, fn):
        import functools

        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = tls.grad_enabled
            tls.grad_enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                tls.grad_enabled = prev

        return wrapper


class no_grad(_GradModeContext):
    """Disable history recording on this thread inside the block."""

    _mode = False


class enable_grad(_GradModeContext):
    """Enable history recording on this thread inside the block."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to `mode`; takes effect at once, and as a context restores the old mode on exit."""

    def __init__(self, mode: bool) -> None:
        self._prev = tls.grad_enabled
        self._mode = bool(mode)
        tls.grad_enabled = self._mode

    def __enter__(self) -> None:
        tls.grad_enabled = self._mode

    def __call__(self, fn):
        # As a decorator, the mode set by the constructor is undone at once (torch does the same).
        tls.grad_enabled = self._prev
        return super().__call__(fn)
