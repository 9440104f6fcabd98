"""What the bridge's parts share (BridgeState: the builder, the node keys, each thread's state and log), and the
records they pass each other: a thread's state, a backward call, the log's entries.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import os
import sys
import threading
from array import array
from collections import defaultdict
from typing import Any, Callable, Iterator

import torch

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.sources.torch.columns import SeqNrs
from agdb.tracer.sources.torch.emitter import Emitter
from agdb.tracer.sources.torch.model import Divergence, EngineModel

_seq = torch.autograd._get_sequence_nr

# Log entries (NOTE [observe now, reconstruct later] in bridge.py): tuples whose first item is one of these.
CALL, PRE, POST, BUMP, END, HOOK, NODE, LATE, RENUMBER = range(9)


class SeqKeys:
    """One thread's seq_nr -> node key (NOTE [node identity] in walk.py): a column from the first seq_nr it is given
    on, since a thread's numbers come one by one (a dict of a million-node graph's costs ~84 B a node, the column 8),
    and a dict for a number below that or far past the column's end (a node made before the recording, or one given
    its number by `_set_sequence_nr`)."""

    __slots__ = ("base", "col", "other")

    REACH = 1 << 16
    """How far past the column's end a number may fall and still extend it (the numbers in between read as none)."""

    def __init__(self) -> None:
        self.base = -1  # the seq_nr of col[0], once one is set
        self.col = array("q")  # a key (node keys start at 1), or 0: none
        self.other: dict[int, int] = {}

    def get(self, seq: int, default: int | None = None) -> int | None:
        """The key of `seq`, or `default`."""
        i = seq - self.base
        if 0 <= i < len(self.col):
            key = self.col[i]
            if key:
                return key
        return self.other.get(seq, default)

    def __setitem__(self, seq: int, key: int) -> None:
        col = self.col
        if self.base < 0:
            self.base = seq
        i = seq - self.base
        if 0 <= i < len(col):
            col[i] = key
            self.other.pop(seq, None)
        elif len(col) <= i < len(col) + self.REACH:
            if i > len(col):
                col.frombytes(bytes(col.itemsize * (i - len(col))))  # zeros: no key
            col.append(key)
            self.other.pop(seq, None)
        else:
            self.other[seq] = key

    def pop(self, seq: int) -> int | None:
        """Forget the key of `seq` (its node took another number, by `_set_sequence_nr`), and return it."""
        key = self.get(seq)
        i = seq - self.base
        if 0 <= i < len(self.col):
            self.col[i] = 0
        self.other.pop(seq, None)
        return key

    def setdefault(self, seq: int, key: int) -> int:
        """The key of `seq`, set to `key` if it had none."""
        found = self.get(seq)
        if found is None:
            self[seq] = found = key
        return found


class Call:
    """One backward()/autograd.grad() call: what the walk found before it ran (the rest is in the log)."""

    __slots__ = ("gt", "before", "roots", "inputs", "multi", "keep_graph", "create_graph", "begun", "frame", "grads",
                 "hooked", "torch_id", "parent_id", "witness", "witness_error", "witness_hooks", "retains", "observed",
                 "thread", "runner", "after")

    def __init__(self, thread: ThreadState) -> None:
        self.thread = thread  # the thread that made the call (its counter, its row)
        self.runner = thread  # the thread torch ran its nodes on: another one past MAX_DEPTH (NOTE [pool thread])
        self.after: int | None = None  # the caller's counter when the call returned
        self.begun = False
        self.hooked: list = []  # the nodes this call hooked on a graph it frees, removed after it (NOTE [hooked nodes])
        self.torch_id: int | None = None  # torch's graph task id, read by the witness hook on its roots
        self.parent_id = -1  # the graph task running when the call began (-1: none; else this one is reentrant)
        self.witness: list[int] | None = None  # torch's execution order, read in the root's pre-hook (NOTE [witness])
        self.witness_error = ""
        self.witness_hooks: list = []
        self.retains: dict[int, int] = {}  # node key -> how many retains_grad hooks it carries
        self.observed: list[int] = []  # the nodes whose pre-hooks fired for this call, in order


class Log(list):
    """A thread's log (NOTE [observe now, reconstruct later] in bridge.py): a list, with what the hooks need to
    replay it part-way through a long backward (NOTE [replay in parts] in reconstruct.py)."""

    __slots__ = ("limit", "replay_part")

    def __init__(self) -> None:
        super().__init__()
        self.limit = sys.maxsize  # entries past which a post-hook replays what the log holds (never, by default)
        self.replay_part: Any = None


class ThreadState:
    """One thread's recording state.

    NOTE [pool thread]
    torch runs a reentrant backward call inline on the calling thread while fewer than MAX_DEPTH (60) such calls are
    nested there; the next one it hands to a thread of its reentrant pool, which adopts the caller's ready queue and
    runs the graph task, and the calls nested in it (inline, its own count of them starting at 0), while the caller
    waits. The bridge sees the hand-over in the call's witness hook (backward.py), which fires on the thread running
    the call's first node (or earlier, in a tensor hook of the user's on its root: Backward._handed_over): that
    thread `adopt`s the caller as its owner (torch's GraphTask::owner_), taking the owner's log, calls in progress
    and model of the queue, so that what happens there is logged in the order it happened, between the caller's
    entries, and is modelled on the queue torch uses; its own row, counter and culprits stay its own. Each log entry
    that depends on the thread carries it (a call its caller and runner, an increment and a walk's node their
    thread).
    """

    def __init__(self, row: int, make_model: Callable[[], EngineModel], now: int) -> None:
        self.row = row
        self._make_model = make_model
        self._model: EngineModel | None = None
        self.owner = self  # whose ready queue, log and calls this thread uses (NOTE [pool thread])
        self.last = now  # the counter as accounted for by the time of the last observation
        self.rlast = now  # the counter as accounted for by the reconstruction
        self.keyed = now  # the counter as given node keys while a log waits (NOTE [keys before the replay])
        self.replay_now = False  # a call whose replay gives keys no pass can foresee (Backward.run)
        self.rss_base = resident_bytes()  # the process's resident memory when the log last began waiting
        self.calls: list[Call] = []  # backward calls in progress, innermost last
        self.log = Log()  # observations not reconstructed yet
        self.replaying: list[Call] = []  # the calls the replay has begun and not ended, innermost last
        self.after_accumulation: list[tuple] = []  # post_accumulate_grad hooks replayed, their AccumulateGrad not yet
        self.pushed: list[int] = []  # nodes whose pre-hook put the mode back on (popped by their post-hook)
        self.seen: list[tuple] = []  # (seq_nr, name, frame row) of forward increments not written yet
        self.seen_unnamed: dict[int, int] = {}  # seq_nr -> its index in `seen`, for those named `?` there

    @property
    def model(self) -> EngineModel:
        """The model of the ready queue this thread's backward calls use, made on first use (a pool thread uses its
        caller's: NOTE [pool thread])."""
        model = self._model
        if model is None:
            model = self._model = self._make_model()
        return model

    def adopt(self, caller: ThreadState) -> None:
        """Use `caller`'s ready queue, log and calls from now on: torch handed this thread a graph task of `caller`'s
        (NOTE [pool thread]). A thread with a log of its own pending keeps it (it never happens on a pool thread); one
        that served another owner leaves that owner's log, pending or not, to it (the pool thread finished that
        owner's graph task before it took this one)."""
        owner = caller.owner
        if owner is self.owner or self.owner is self and (self.log or self.calls):
            return
        self.owner = owner
        self.log, self.calls, self.replaying = owner.log, owner.calls, owner.replaying
        self.after_accumulation = owner.after_accumulation
        self._model = owner.model


class BridgeState:
    """What the bridge's parts share, owned here: the builder and its raw buffers, the node keys (NOTE [node
    identity] in walk.py), the nodes' hooks, each thread's state and log, what went wrong, and how the forward is
    watched. The parts keep the containers (never rebound) as their own attributes, for their hot paths."""

    def __init__(self, builder: TraceBuilder, values: bool, defer: bool) -> None:
        self.b = builder
        self.raw = builder.raw_buffers()  # NOTE [builder fast path]
        self.values = values  # summarise grads (False: shapes only, cheaper)
        self.defer = defer
        self.alone = True  # only the thread that began the recording has a row (NOTE [deferral on one thread])
        self.keys = itertools.count(1)  # node keys, one counter for every kind of node
        self.local = threading.local()  # state; while a backward call begins: call_frame, names
        self.states: list[ThreadState] = []
        self._emitters: dict[tuple[int, int], Emitter] = {}
        self._by_ident: dict[int, tuple[threading.Thread, ThreadState]] = {}
        self.lock = threading.Lock()
        self.compile_time_calls: list[dict] = []  # backward calls torch made while it traced, left alone: an entry
        # each (NOTE [compile-time entries] in compiling.py)
        self.compiled_functions: list[tuple[int, int, int]] = []  # (thread row, seq_nr, aot_id) of each compiled
        # region's autograd Function applied (NOTE [compiled function nodes] in compiling.py)
        # thread row -> the (start, stop) numbers each Dynamo compile took (NOTE [numbers taken while compiling])
        self.compile_seqs: dict[int, list[tuple[int, int]]] = {}
        self.seq_keys: defaultdict[int, SeqKeys] = defaultdict(SeqKeys)  # thread row -> its seq_nrs' keys
        self.seq_nrs = SeqNrs()  # key -> seq_nr, of every node a walk met (the graphs' `seq`)
        self.acc_keys: dict[int, tuple[Any, int]] = {}  # id(leaf) -> (weakref to it, key)
        self.is_acc: set[int] = set()
        self.acc_alive: dict[int, Any] = {}  # AccumulateGrad key -> weakref to its pre-hook dict (node identity)
        self.unnamed: set[int] = set()  # bumped as `?`: a walk that meets the node names it
        # key -> weakref to its pre-hook dict, for the nodes of retained graphs (NOTE [hooked nodes] in hooks.py)
        self.handles: dict[int, Any] = {}
        self.type_names: dict[type, str] = {}  # a node's Python type -> its name() (one name per C++ node type)
        self.divergences: list[dict] = []
        self.failures: list[str] = []  # the bridge's own errors: that backward ran unrecorded (meta["bridge_errors"])
        self.lines: Any = None  # the LineCulprits while they watch the forward (NOTE [line culprits] in lines.py)
        self.mode: Any = None  # the TorchFunctionMode while it watches the forward (culprits="mode")
        self.line_mode: Any = None  # the mode the line tracer pushes for the lines that need it

    def thread_state(self) -> ThreadState:
        """This thread's state, made on its first use (its row in the trace then: threads are numbered in the order
        they first appear, as the engine's Recorder numbers them)."""
        try:
            return self.local.state
        except AttributeError:
            pass
        # A thread Python did not start (torch's pool thread) runs each hook called from C++ outside any Python frame
        # in a Python thread state of its own, with empty thread-locals: the state is found again by the thread.
        thread = threading.current_thread()
        with self.lock:
            found = self._by_ident.get(threading.get_ident())
            if found is not None and found[0] is thread:
                state = self.local.state = found[1]
                return state
            name = _thread_name(thread)
            if self.states and name != POOL_THREAD:  # a pool thread runs its caller's calls (NOTE [pool thread])
                self.alone = False  # NOTE [deferral on one thread] in backward.py
            row = self.b.thread(name)
            make_model = functools.partial(self._model, row)
            state = getattr(self.local, "unseen", None)
            if state is None:
                state = ThreadState(row, make_model, _seq())
            else:  # the state a thread's line tracer kept since the thread began (NOTE [threads' line tracers])
                del self.local.unseen
                state.row, state._make_model = row, make_model
            self.local.state = state
            self._by_ident[threading.get_ident()] = (thread, state)
            self.states.append(state)
        return state

    def may_wait(self, state: ThreadState) -> bool:
        """Whether `state`'s log may keep waiting for the recording's end (NOTE [what a waiting log holds], NOTE
        [deferral on one thread] in backward.py): deferred, one thread recording, and the process not grown by
        WAITING_BYTES since the log began waiting (read only then: a look at /proc)."""
        return self.defer and self.alone and resident_bytes() - state.rss_base <= WAITING_BYTES

    def lines_here(self) -> Any:
        """This thread's LineCulprits while lines are recorded (NOTE [threads' line tracers]), else None."""
        return getattr(self.local, "lines", None) if self.lines is not None else None

    def unseen_thread_state(self) -> ThreadState:
        """A state for this thread with no row yet: the counter as the thread began, for its line tracer to compare
        with until the thread takes its first number (thread_state then gives it its row)."""
        state = self.local.unseen = ThreadState(-1, _no_model, _seq())
        return state

    def _model(self, row: int) -> EngineModel:
        """A model of thread `row`'s CPU ready queue (its queue row taken only now: a pool thread has none)."""
        return EngineModel(self.emitter(row, self.b.queue(f"cpu:{row}")), self._diverged)

    def emitter(self, thread: int, queue: int) -> Emitter:
        """The Emitter writing thread `thread`'s events about queue `queue`."""
        key = (thread, queue)
        found = self._emitters.get(key)
        if found is None:
            found = self._emitters[key] = Emitter(self.b, thread, queue)
        return found

    def _diverged(self, d: Divergence) -> None:
        self.divergences.append({"graph_task": d.graph_task, "step": d.step, "expected": d.expected,
                                 "observed": d.observed})


POOL_THREAD = "pt_autograd_reentrant"
"""The name a trace gives torch's reentrant pool thread, as agdb's engine names its own (torch names it nothing, and
Python calls a thread it did not start `Dummy-N`)."""


def _no_model() -> EngineModel:
    raise AssertionError("a thread's state has no model before thread_state gives it its row")


def _thread_name(thread: threading.Thread) -> str:
    """A thread's name in the trace: Python's, but POOL_THREAD for a thread Python did not start that is running a
    graph task (on the CPU, only torch's reentrant pool runs one on a thread of its own: NOTE [pool thread])."""
    if isinstance(thread, threading._DummyThread) and torch._C._current_graph_task_id() >= 0:
        return POOL_THREAD
    return thread.name


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside: allocating much that is all acyclic would make each full collection walk it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


WAITING_BYTES = 1 << 28
"""How far the process's resident memory may grow while a log waits for the recording's end before the next
outermost backward call to return replays it (NOTE [what a waiting log holds])."""


def resident_bytes() -> int:
    """The process's resident memory in bytes, or 0 where it cannot be read cheaply (not Linux).

    NOTE [what a waiting log holds]
    A log waiting for the recording's end (`defer`, the default) keeps every grad its hooks saw alive. Its entries are
    bounded (NOTE [replay in parts] in reconstruct.py), but not their bytes: a model of a few hundred nodes with large
    grads would keep a hundred steps' grads. Summing the grads' sizes in the hooks would cost each node what the
    hooks cost; reading the resident set once per outermost backward call costs a few µs. So when a call returns and
    the process has grown by more than WAITING_BYTES since the log began waiting, the log is replayed there, as with
    `defer=False`. The program's own growth counts too: that only moves a replay earlier, never changes the trace.
    """
    pid = os.getpid()
    try:
        if _STATM[0] != pid:  # opened once per process (a forked child's /proc/self is another file): 6 µs a read
            _STATM[:] = [pid, os.open("/proc/self/statm", os.O_RDONLY)]
        return int(os.pread(_STATM[1], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError, AttributeError):  # no /proc, or no os.pread (Windows)
        _STATM[0] = -1
        return 0


_STATM: list = [-1, -1]  # the pid that opened it, and the descriptor
try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):
    _PAGE = 4096


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's `malloc_trim`; elsewhere nothing), before the trace is
    frozen.

    The graphs a program freed (torch's nodes and the bridge's hooks on them: about 2 KB a node) stay in the
    process's heap as free chunks, while freezing a trace takes fresh pages for its columns: without this, a deep
    graph's recording peaks there, at what the graph held plus the frozen trace.
    """
    _malloc_trim()()


@functools.cache
def _malloc_trim() -> Any:
    import ctypes

    if sys.platform.startswith("linux"):
        try:
            trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # not glibc (musl has none)
            pass
        else:
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            return lambda: trim(0)
    return lambda: None
