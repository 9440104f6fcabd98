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
INT64_MAX = 2**63 - 1


class _ThreadState(threading.local):
    """Per-thread state; class attributes are each new thread's starting values."""

    seq_nr: int = 0
    grad_enabled: bool = True
    inference_mode: bool = False
    inference_grad_mode: bool = False  # the grad mode is_grad_enabled() reports inside inference_mode
    multithreading_enabled: bool = True
    # Engine state (engine-semantics §3.1 step 5, §13): which device this thread works for, if any.
    worker_device: int = NO_DEVICE
    current_depth: int = 0
    total_depth: int = 0
    current_graph_task: Any = None
    current_node: Any = None
    cpu_ready_queue: Any = None
    # saved_tensors_hooks (engine/_saved.py): the pushed (pack, unpack) pairs, innermost last, and the message of
    # disable_saved_tensors_hooks while it is in force.
    saved_hooks: tuple = ()
    saved_hooks_disabled: str | None = None
    # A recorded in-place op's old value while its out-of-place form runs (engine/_inplace.py): the node saves a
    # clone of it instead, made when it is saved, as torch's generated code saves `original_self`.
    original_self: Any = None


tls = _ThreadState()

inference_seen = False
"""True once some thread entered inference_mode(True): until then no inference tensor exists, and making a
tensor costs no look-up of the mode."""


saved_hooks_seen = False
"""True once some thread pushed saved-tensor hooks: until then saving a tensor costs no look-up of them."""

detached_in_place = False
"""True once detach_() cut a tensor with history: until then no saved tensor can have been detached."""

cuda_seen = False
"""True once a device argument named a cuda device (engine/_device.canonical_device, where every tensor's device
comes from): until then every node runs on the CPU queue and the engine reads no node's device."""
"""True once detach_() cut a tensor with history: until then no saved tensor can have been detached."""


def peek_sequence_nr() -> int:
    """The seq_nr the next numbered node on this thread will take."""
    return tls.seq_nr


def is_grad_enabled() -> bool:
    """Whether grad mode is on (inside inference_mode, history is not recorded even when it is)."""
    return tls.inference_grad_mode if tls.inference_mode else tls.grad_enabled


def _set_grad_mode(mode: bool) -> None:
    """Set the grad mode user code sees; inside inference_mode the recording flag stays off."""
    if tls.inference_mode:
        tls.inference_grad_mode = mode
    else:
        tls.grad_enabled = mode


class _GradModeContext:
    """Base of no_grad, enable_grad and set_grad_enabled: a context manager and a decorator."""

    _mode: bool

    def __enter__(self) -> None:
        self._prev = is_grad_enabled()
        _set_grad_mode(self._mode)

    def __exit__(self, *exc: object) -> None:
        _set_grad_mode(self._prev)

    def __call__(self, fn):
        import functools

        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = is_grad_enabled()
            _set_grad_mode(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _set_grad_mode(prev)

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
        self._prev = is_grad_enabled()
        self._mode = bool(mode)
        _set_grad_mode(self._mode)

    def __enter__(self) -> None:
        _set_grad_mode(self._mode)

    def __call__(self, fn):
        # As a decorator, the mode set by the constructor is undone at once (torch does the same).
        _set_grad_mode(self._prev)
        return super().__call__(fn)


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside inference_mode(True)."""
    return tls.inference_mode


class inference_mode:
    """torch.inference_mode(mode=True): a context manager and decorator (also bare, `@inference_mode`).

    Like torch's InferenceMode guard, entering sets grad mode to `not mode` and the inference flag to `mode`,
    and exiting restores both. Tensors made inside (other than views of normal tensors) are inference tensors.
    """

    def __new__(cls, mode: object = True):
        if callable(mode) and not isinstance(mode, bool):  # bare @inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        global inference_seen
        self._prev = (tls.grad_enabled, tls.inference_mode, tls.inference_grad_mode)
        if self.mode:
            inference_seen = True
        # torch's InferenceMode guard: grad mode `not mode`; inside, nothing records whatever the grad mode.
        tls.grad_enabled, tls.inference_mode, tls.inference_grad_mode = not self.mode, self.mode, False

    def __exit__(self, *exc: object) -> None:
        tls.grad_enabled, tls.inference_mode, tls.inference_grad_mode = self._prev

    def clone(self) -> inference_mode:
        return type(self)(self.mode)

    def __call__(self, fn):
        import functools

        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper
