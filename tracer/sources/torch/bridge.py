"""The bridge proper: records a real PyTorch run through the TraceBuilder. Imports torch (only ever imported from
`tracer.sources.torch.record`, so nothing else pulls torch in).

What is observed, and how (docs/torch-bridge.md says it for users):
- seq_nr culprits: the thread's counter (`torch.autograd._get_sequence_nr()`) is read at every line of the user's
  code (lines.py, NOTE [line culprits]; or, under a debugger's trace function, around each torch call by a
  TorchFunctionMode); an increment is put on the user's line (the first frame outside torch, agdb and Python's own
  library) and its nodes are named from the tensors that line kept (or the call's outputs) and what they reach
  within the new range. Increments neither can see are caught where they happen: `Function.apply` (patched
  while recording: its PyNode takes the counter's value at entry), the GraphRoot of a several-root backward and
  the Identity of an unreachable `inputs=` leaf (named by rule when the call begins), the node hidden inside
  CopySlices (named after the in-place op).
  Anything else shows up as a gap in the counter and is named once a graph walk meets the node.
- the graph and every backward/autograd.grad call: `torch.autograd._engine_run_backward`, through which both
  go, is wrapped while recording; it walks the graph from the roots, puts one pre- and one post-hook on each
  node that has none of ours yet (so once per graph, not once per backward), and removes them all at the end.
- what torch hides: model.EngineModel, fed by the hooks (NOTE [the model and the observed order]).

NOTE [node identity]
torch hands out a fresh Python wrapper for a node whenever it is read, and the wrappers are not weak-
referenceable, so a node is known by what does not change: its (thread, seq_nr) for nodes that took a number,
its leaf tensor (held weakly) for AccumulateGrad, as long as that node lives. A leaf has one AccumulateGrad at a
time, but a new one once the last died (a training loop that frees each step's graph before the next forward
makes one per step): the node's pre-hook dict, which dies with the node and which the bridge refers to weakly,
tells (`_acc_alive`). Within one walk the wrappers are held, so two nodes that share a seq_nr
(`_set_sequence_nr`) still get two keys. No wrapper outlives the call that read it.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import os
import sys
import sysconfig
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from agdb.tracer.recording.builder import CHUNK, ROW, Bump, NodeFacts, TraceBuilder
from agdb.tracer.recording.leaf_names import ParameterPaths, bound_names, module_holders, outermost_modules
from agdb.tracer.sources.torch import tensor_hooks
from agdb.tracer.sources.torch.lines import LineCulprits
from agdb.tracer.sources.torch.model import UINT64_MAX, EngineModel, Graph, GraphTaskModel, first_difference
from agdb.tracer.sources.torch.params import leaf_variables, user_frames
from agdb.tracer.store.events import TensorSummary
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace

_seq = torch.autograd._get_sequence_nr
_getframe = sys._getframe
_TENSOR = torch.Tensor
_gt_id = torch._C._current_graph_task_id  # -1 outside a backward
_running = torch._C._current_autograd_node
_execution_order = torch._C._current_graph_task_execution_order
_multithreading = torch._C._is_multithreading_enabled
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_AGDB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # tracer/
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep
_SITE_DIRS = tuple({sysconfig.get_paths()[k] + os.sep for k in ("purelib", "platlib")})
_SKIP = (_TORCH_DIR, _AGDB_DIR)
_PYTHON = (_STDLIB_DIR, "<frozen ")

_ACC = "torch::autograd::AccumulateGrad"
_BACKWARD = torch.Tensor.backward
_PY_NODE = torch.autograd.function.BackwardCFunction  # the node of a custom Function: its backward is Python
_mode_depth = torch._C._len_torch_function_stack
_push_mode = torch._C._push_on_torch_function_stack
_pop_mode = torch._C._pop_torch_function_stack

_new = tuple.__new__  # NodeFacts and Bump made without their class's Python-level __new__ (NOTE [builder fast path])
_K_BUMP, _K_CREATED = int(Kind.SEQ_NR_BUMPED), int(Kind.NODE_CREATED)
GC_THRESHOLD = 100_000
"""Allocations between two young-generation collections while recording (NOTE [collections while recording])."""

OBSERVED = (Kind.SEQ_NR_BUMPED, Kind.NODE_CREATED, Kind.GRAPH_TASK_STARTED, Kind.HOOK_RAN, Kind.NODE_STARTED,
            Kind.NODE_FINISHED, Kind.GRAD_ACCUMULATED, Kind.ERROR_RAISED, Kind.GRAPH_TASK_FINISHED)
RECONSTRUCTED = (Kind.DEPENDENCIES_COMPUTED, Kind.EXEC_INFO_COMPUTED, Kind.TASK_PUSHED, Kind.TASK_POPPED,
                 Kind.BUFFER_WRITTEN, Kind.GRAD_CAPTURED)
PROVENANCE = {**{k: "observed" for k in OBSERVED}, **{k: "reconstructed" for k in RECONSTRUCTED}}
"""HookRan events are the user's tensor hooks (tensor_hooks.py; the bridge's own Node hooks are not the user's);
a node's creation is its seq_nr increment, or, for a node that took none (AccumulateGrad) or was made before
recording, the walk that first met it."""


def is_library(filename: str) -> bool:
    """Whether code from `filename` is torch's, agdb's or Python's own (never the user's line; a library installed
    in site-packages is the user's, as is code run from a string)."""
    return filename.startswith(_SKIP) or (filename.startswith(_PYTHON) and not filename.startswith(_SITE_DIRS))


class _Emitter:
    """The builder's event methods with this thread's row and CPU queue filled in (what the model writes to)."""

    def __init__(self, builder: TraceBuilder, thread: int) -> None:
        self.b = builder
        queue = builder.queue(f"cpu:{thread}")
        for name in ("graph_task_started", "dependencies_computed", "exec_info_computed", "buffer_written",
                     "hook_ran", "node_started", "node_finished", "grad_captured", "grad_accumulated", "error_raised",
                     "graph_task_finished"):
            setattr(self, name, functools.partial(getattr(builder, name), thread=thread))
        for name in ("task_pushed", "task_popped"):
            setattr(self, name, functools.partial(getattr(builder, name), thread=thread, queue=queue))

    @property
    def num_events(self) -> int:
        return self.b.num_events


class _Call:
    """One backward()/autograd.grad() call: what the walk found before it ran (the rest is in the log)."""

    __slots__ = ("gt", "before", "roots", "inputs", "multi", "keep_graph", "create_graph", "begun", "frame", "grads",
                 "hooked", "torch_id", "parent_id", "witness", "witness_error", "witness_hooks", "retains", "observed")

    def __init__(self) -> None:
        self.begun = False
        self.hooked: list[int] = []  # keys whose hooks this call put on a graph it frees: removed after it
        self.torch_id: int | None = None  # torch's graph task id, read by the witness hook on its roots
        self.parent_id = -1  # the graph task running when the call began (-1: none; else this one is reentrant)
        self.witness: list[int] | None = None  # torch's execution order, read in the root's pre-hook (NOTE [witness])
        self.witness_error = ""
        self.witness_hooks: list = []
        self.retains: dict[int, int] = {}  # node key -> how many retains_grad hooks it carries
        self.observed: list[int] = []  # the nodes whose pre-hooks fired for this call, in order


# Log entries (NOTE [observe now, reconstruct later]): tuples whose first item is one of these.
_CALL, _PRE, _POST, _BUMP, _END, _HOOK, _NODE = range(7)


class _State:
    """One thread's recording state."""

    def __init__(self, row: int, model: EngineModel, now: int) -> None:
        self.row = row
        self.model = model
        self.last = now  # the counter as accounted for by the time of the last observation
        self.rlast = now  # the counter as accounted for by the reconstruction
        self.calls: list[_Call] = []  # backward calls in progress, innermost last
        self.log: list[tuple] = []  # observations not reconstructed yet
        self.pushed: list[int] = []  # nodes whose pre-hook put the mode back on (popped by their post-hook)
        self.seen: list[tuple] = []  # (seq_nr, name, frame row) of forward increments not written yet
        self.seen_unnamed: dict[int, int] = {}  # seq_nr -> its index in `seen`, for those named `?` there


class Bridge:
    """Records a real PyTorch run while attached; `finish()` detaches and returns the Trace.

    NOTE [observe now, reconstruct later]
    While a backward runs, the hooks only append what they see to the thread's log (a tuple each: the node, its
    grads, the counter), so that a recorded backward costs about what bare Python hooks cost. Walking the
    model of the engine, summarising grads and writing events happens afterwards, when the outermost backward
    call returns (or, with `defer`, when the recording ends: cheaper while the program runs, but every grad of
    every backward stays alive until then). Increments of the counter seen while a log is pending go into the
    log too, so the trace keeps the order in which things happened.

    Options (`agdb.tracer.record("torch", **options)`):
    values: keep each grad's first values and NaN/inf flags (False: shapes and dtypes only, a little faster).
    defer: reconstruct what torch hides when the recording ends rather than after each backward call (the program
    runs faster, but every grad it computes stays alive until then).
    single_threaded: run backward calls with autograd multithreading disabled (as
    `torch.autograd.set_multithreading_enabled(False)` does), so that torch's own execution order of each is
    recorded as a second witness (docs/torch-bridge.md). On the CPU it changes nothing in what runs.
    culprits: how the forward's seq_nr increments are put on lines: "lines" (the default) reads the counter at
    each line of the user's code through `sys.settrace` (NOTE [line culprits] in lines.py); "mode" reads it
    around each torch call through a TorchFunctionMode (dearer: docs/torch-bridge.md). A trace function already
    set, such as a debugger's or coverage's, keeps its place, and the mode is used.
    Deep graphs: run the recorded code in `run_with_big_stack` (torch frees a deep graph recursively).
    """

    def __init__(self, values: bool = True, defer: bool = False, single_threaded: bool = False,
                 culprits: str = "lines") -> None:
        self.b = TraceBuilder(source="torch", provenance=PROVENANCE)
        self.raw = self.b.raw_buffers()  # NOTE [builder fast path]
        self.values = values  # summarise grads (False: shapes only, cheaper)
        self.defer = defer
        self.single_threaded = single_threaded  # multithreading off while attached: the witness (NOTE [witness])
        self._keys = itertools.count(1)
        self._local = threading.local()
        self._states: list[_State] = []
        self._lock = threading.Lock()
        # NOTE [seq keys]: seq_nr in the low bits, so that a dict of them spreads over its table (with the thread
        # row low, as `seq << 16 | row`, the keys of one thread share their low 16 bits and collide).
        self._seq_keys: dict[int, int] = {}  # seq_nr | thread row << 64 -> key
        self._acc_keys: dict[int, tuple[Any, int]] = {}  # id(leaf) -> (weakref to it, key)
        self._unnamed: set[int] = set()  # bumped as `?`: a walk that meets the node names it
        # Keys whose edges the trace has: an increment writes a node's facts with none (its edges are not known
        # then); the first walk that meets it writes them (_describe).
        self._described: set[int] = set()
        self._is_acc: set[int] = set()
        self._acc_alive: dict[int, Any] = {}  # AccumulateGrad key -> weakref to its pre-hook dict (node identity)
        self._handles: dict[int, tuple[Any, Any, _State]] = {}  # key -> weakrefs to its pre/post hook dicts
        self._walks: dict[tuple, Graph] = {}  # start nodes' keys -> the graph walked from them
        self._new_hooks: list[int] = []  # keys hooked by the walk in progress
        self._frames: dict[tuple, int] = {}
        self._fast_frames: dict[tuple, int] = {}  # (user code, bytecode offset) -> frame row (NOTE [forward hot path])
        self._type_names: dict[type, str] = {}  # a node's Python type -> its name() (one name per C++ node type)
        self._skip: dict[int, bool] = {}  # id(code) -> whether it is a library's
        self._codes: list = []  # the code objects keyed by id (NOTE [code keys] in lines.py)
        self._paths = ParameterPaths(torch.nn.Module)  # NOTE [leaf names] in tracer/recording/leaf_names.py
        self._leaf_names: dict[int, str] = {}
        self.divergences: list[dict] = []
        self.graph_tasks: list[dict] = []  # per graph task: torch's ids, depth, the witness's verdict (meta)
        self._retained: list[Any] = []  # weakrefs to the tensors retain_grad() was called on while recording
        self.failures: list[str] = []  # the bridge's own errors: that backward ran unrecorded (meta["bridge_errors"])
        self._gt_ids = itertools.count(1)
        self._mode: TorchFunctionMode | None = None
        self._lines: LineCulprits | None = None
        self.line_mode: TorchFunctionMode | None = None
        if culprits not in ("lines", "mode"):
            raise ValueError(f"culprits must be 'lines' or 'mode', not {culprits!r}")
        self.culprits = culprits  # how the forward is seen: by line (NOTE [line culprits]) or by a mode
        self._restore: list = []

    # -- attaching ------------------------------------------------------------------------------------------------
    def attach(self) -> Bridge:
        """Start recording on this thread (the mode is per thread; backward calls are caught on any)."""
        import torch.autograd as ag
        from torch.autograd.function import Function

        original_run = ag._engine_run_backward
        ag._engine_run_backward = self._wrap_run_backward(original_run)
        self._restore.append(lambda: setattr(ag, "_engine_run_backward", original_run))
        original_apply = Function.__dict__["apply"]
        Function.apply = classmethod(self._wrap_apply(original_apply.__func__))
        self._restore.append(lambda: setattr(Function, "apply", original_apply))
        mixin = torch.autograd.function._HookMixin
        previous = mixin.__dict__["_register_hook"]  # torch's, or a recording's this one is nested in
        mixin._register_hook = staticmethod(_register_hook)
        self._restore.append(lambda: setattr(mixin, "_register_hook", previous))
        # NOTE [collections while recording]: the bridge allocates a few small objects per op and per node, and
        # with the default threshold each 700 allocations start a collection whose older generations walk
        # every live tensor and node: most of a recording's cost. Fewer, larger collections while recording, and
        # none while a backward call runs: its hooks log a tuple per node run, all acyclic, which each collection
        # reaching the older generations would walk again (what the user's code leaves in cycles meanwhile is
        # collected after the call).
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], GC_THRESHOLD), *threshold[1:])
        self._restore.append(lambda: gc.set_threshold(*threshold))
        if self.single_threaded:  # a per-thread setting, like the mode: this thread's backward calls
            was = _multithreading()
            torch._C._set_multithreading_enabled(False)
            self._restore.append(lambda: torch._C._set_multithreading_enabled(was))
        state = self._state()
        # Lines unless a trace function is already set (a debugger's, coverage's): it keeps its place, and the mode
        # sees the forward instead. Lines were opt-in until the cause of a hang was found: NOTE [the async-exception
        # flag] in tracer/recording/async_exc.py (LineCulprits.attach lowers the flag).
        if self.culprits == "lines" and sys.gettrace() is None:
            self.line_mode = _CulpritMode(self, special=(_BACKWARD,))  # for the lines that need it
            self._lines = LineCulprits(self, state, is_library)
            self._patch_tensor_hooks()
            self._lines.attach()
        else:
            self.culprits = "mode"
            self._mode = _CulpritMode(self)
            self._mode.__enter__()
        return self

    def _patch_tensor_hooks(self) -> None:
        """Without the mode, the calls that put a user's hook on a tensor are caught where torch defines them."""
        bridge = self
        for func in tensor_hooks.REGISTERING:
            name = func.__name__
            original = torch.Tensor.__dict__.get(name)  # None: TensorBase's (C), which ours then shadows

            def patched(*args, __func=func, **kwargs):
                lines = bridge._lines
                if lines is not None:
                    lines.flush(args[:1])
                return tensor_hooks.register(bridge, __func, args, kwargs)

            setattr(torch.Tensor, name, functools.wraps(func)(patched))
            self._restore.append(lambda name=name, original=original: setattr(torch.Tensor, name, original)
                                 if original is not None else delattr(torch.Tensor, name))

    def detach(self) -> None:
        """Stop recording, reconstruct what is pending, and remove every hook the bridge put on a node."""
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        if self._lines is not None:
            lines, self._lines = self._lines, None
            lines.detach()
        while self._restore:
            self._restore.pop()()
        for state in self._states:
            self.write_seen(state)
            if state.log and not state.calls:
                self._replay(state)
            elif state.calls:  # a backward still running on its thread: its log is not replayed, but the nodes
                for entry in list(state.log):  # its walks met are made, so that no edge points at nothing
                    if entry[0] == _NODE:
                        self._node(state, -1, *entry[1:])
        for pre, post, _ in self._handles.values():
            _unhooked(pre)
            _unhooked(post)
        self._handles.clear()
        self._walks.clear()
        self._acc_keys.clear()

    @property
    def num_events(self) -> int:
        """How many events were recorded so far (TraceSource)."""
        return self.b.num_events

    def finish(self, progress: Callable[[int, int], None] | None = None) -> Trace:
        """Detach and freeze the trace; what the model found (divergences) and the leaves' parameter names go in
        its meta, by node index."""
        self.detach()
        raw = self.raw
        index = {key: i for i, key in enumerate(sorted(set(raw.node_facts) | set(raw.bumps)))}
        trace = self.b.finish(progress)
        names = {str(index[k]): v for k, v in self._leaf_names.items() if k in index}
        trace.meta["parameter_names"] = names
        if self.failures:
            trace.meta["bridge_errors"] = self.failures[:20]
        trace.meta["divergences"] = [_by_row(d, index) for d in self.divergences]
        trace.meta["graph_tasks"] = self.graph_tasks
        return trace

    # -- small helpers -------------------------------------------------------------------------------------------
    def _state(self) -> _State:
        try:
            return self._local.state
        except AttributeError:
            pass
        with self._lock:
            row = self.b.thread(threading.current_thread().name)
        state = self._local.state = _State(row, EngineModel(_Emitter(self.b, row), self._diverged), _seq())
        self._states.append(state)
        return state

    def frame_row(self, code: Any, lineno: int) -> int:
        """The frame row of line `lineno` of `code`."""
        key = (id(code), lineno)  # NOTE [code keys] in lines.py
        row = self._frames.get(key)
        if row is None:
            row = self._frames[key] = self.b.frame(code.co_filename, lineno, code.co_name)
            self._codes.append(code)
        return row

    def write_seen(self, state: _State) -> None:
        """Write the increments the line tracer only noted (NOTE [line culprits]): before anything else is."""
        seen = state.seen
        if seen:
            state.seen = []
            state.seen_unnamed = {}
            bump_one, bump = self.bump_one, self._bump
            for start, name, frame in seen:
                if name == "?":  # _bump keeps it among the unnamed, for late_names or a walk to name
                    self._gap(state, start, frame)
                    bump(state.row, start, name, frame)
                    state.rlast = start + 1
                else:
                    bump_one(state, start, name, frame)

    def late_names(self, state: _State, names: dict[int, str]) -> None:
        """Nodes bumped as `?` (seq_nr -> name) met later by a line that kept what they led to (NOTE [line
        culprits])."""
        self.write_seen(state)
        keys, unnamed, high = self._seq_keys, self._unnamed, state.row << 64
        facts_of, bumps = self.raw.node_facts, self.raw.bumps
        for seq, name in names.items():
            key = keys.get(seq | high)
            if key is None or key not in unnamed:
                continue
            unnamed.discard(key)
            facts = facts_of.get(key)
            if facts is not None:
                facts_of[key] = facts._replace(name=name)
            bump = bumps.get(key)
            if bump is not None:
                bumps[key] = bump._replace(name=name)

    def _user_frame(self) -> int:
        """The frame row of the innermost line outside torch and agdb (for `1 - x`, torch/overrides.py calls)."""
        f = sys._getframe(2)
        skip = self._skip
        while f is not None:
            code = f.f_code
            inside = skip.get(id(code))
            if inside is None:
                inside = skip[id(code)] = is_library(code.co_filename)
                self._codes.append(code)
            if not inside:
                return self.frame_row(code, f.f_lineno)
            f = f.f_back
        return -1

    def _bump(self, row: int, seq: int, name: str, frame: int) -> int:
        """Write one increment; a node a walk already met keeps its key (and its name, if ours is a guess)."""
        key = self._seq_keys.get(seq | row << 64)
        if key is None:
            key = self._seq_keys[seq | row << 64] = next(self._keys)
        else:
            facts = self.raw.node_facts.get(key)
            if facts is not None and name.startswith("?"):
                name = facts.name
        if name.startswith("?"):
            self._unnamed.add(key)
        # NOTE [builder fast path]: one increment per forward op, so its two events are appended the way
        # TraceBuilder.seq_nr_bumped and node_created append them (as the engine's Recorder does).
        raw = self.raw
        rows = raw.rows
        raw.bumps[key] = _new(Bump, (name, seq, frame))
        rows.extend((_K_BUMP, row, 0, key, 0, 0, 0))  # flat: ROW ints a row (NOTE [frozen chunks])
        facts = raw.node_facts
        if key not in facts:  # its edges come when a walk meets it (_describe)
            facts[key] = _new(NodeFacts, (name, seq, 0, "cpu", row, (), frame, self.b.num_events, 1))
            rows.extend((_K_CREATED, row, 0, key, 0, 0, 0))
            if len(rows) >= CHUNK * ROW:
                self.b.freeze_rows()
        return key

    def _bumps(self, state: _State, start: int, after: int, names: Any, frame: int) -> None:
        """Increments start..after-1 on `frame`, named by `names` (a list, or one name for the first)."""
        if state.seen:
            self.write_seen(state)
        if state.log or state.calls:  # keep the order of a pending log (NOTE [observe now, reconstruct later])
            state.log.append((_BUMP, start, after, names, frame))
            return
        self._emit_bumps(state, start, after, names, frame)

    def _emit_bumps(self, state: _State, start: int, after: int, names: Any, frame: int) -> None:
        self._gap(state, start, frame)
        for s in range(start, after):
            self._bump(state.row, s, names[s - start] if isinstance(names, list) else names, frame)
            if not isinstance(names, list):
                names = "?"
        state.rlast = max(state.rlast, after)

    def _gap(self, state: _State, now: int, frame: int) -> None:
        """Increments nobody saw (nodes C++ made during a backward, ...): unnamed until a walk meets them."""
        for s in range(state.rlast, now):
            self._bump(state.row, s, "?", frame)
        if now > state.rlast:
            state.rlast = now

    def _read_locals(self, frames: list) -> None:
        """The bridge read these frames' locals, all of this thread (NOTE [stale locals] in lines.py): on the thread
        the line tracer runs on, it refreshes them at their next events. Elsewhere (culprits="mode", another
        thread) they keep the snapshot, as after a `locals()` call of the program's own: it is the dict `locals()`
        returns, which the program may hold, so it is never emptied."""
        if self._lines is not None and self._lines.thread == threading.get_ident():
            self._lines.touch(frames)

    def hook_ran(self, kind: str, name: str) -> None:
        """A hook of the user's returned (tensor_hooks.py): log it for the node torch says is running."""
        state = self._state()
        if state.calls:
            node = _running()
            key = self._lookup(node, state.row) if node is not None else 0
            del node
            state.log.append((_HOOK, key, kind, name, _seq()))

    def retained(self, t: Any) -> None:
        """retain_grad() was called on `t`, a tensor with a grad_fn (its retains_grad hook, NOTE in _retains)."""
        self._retained.append(weakref.ref(t))

    def _diverged(self, d: Any) -> None:
        self.divergences.append({"graph_task": d.graph_task, "step": d.step, "expected": d.expected,
                                 "observed": d.observed})

    # -- forward: culprits ---------------------------------------------------------------------------------------
    def op_bumped(self, func: Any, out: Any, before: int) -> None:
        """`func` took numbers from `before` on: name them from its outputs, put them on the user's line.

        NOTE [forward hot path]
        One op, one node, called from the user's own code, nothing pending: the common case, written straight to
        the builder's rows (NOTE [builder fast path]) with the frame row cached by (code, bytecode offset) and
        the node's name by its Python type, so that no frame walk, no name() call and no call of ours is made.
        """
        try:
            state = self._local.state
        except AttributeError:
            state = self._state()
        after = _seq()
        last = state.last
        start = before if before > last else last  # a backward inside `func` accounted for its own
        state.last = after
        if start >= after:
            return
        f = _getframe(2)  # the caller of __torch_function__
        code = f.f_code
        frame = self._fast_frames.get((id(code), f.f_lasti)) if self._skip.get(id(code)) is False else None
        if frame is None:
            frame = self._user_frame()
            if self._skip.get(id(code)) is False:
                self._fast_frames[(id(code), f.f_lasti)] = frame
        del f
        if after - start == 1 and type(out) is _TENSOR:
            gf = out.grad_fn
            if gf is not None and gf._sequence_nr() == start:
                name = self._type_names.get(type(gf))
                if name is None:
                    name = self._type_names[type(gf)] = gf.name()
                del gf
                self.bump_one(state, start, name, frame)
                return
        self._bumps(state, start, after, _names(func, out, start, after), frame)

    def bump_one(self, state: _State, start: int, name: str, frame: int) -> None:
        """One increment, `start`, on `frame`: the hot path of both ways of seeing the forward (NOTE [forward hot
        path]), written straight to the builder's rows when nothing is pending."""
        if start == state.rlast and not state.log and not state.calls:
            row = state.row
            k = start | row << 64
            keys = self._seq_keys
            if k in keys:  # a walk met a node with this number first
                self._bump(row, start, name, frame)
            else:  # _bump's rows; no entry in the bumps, read only for a node whose facts lack a frame
                key = keys[k] = next(self._keys)
                raw = self.raw
                rows = raw.rows
                raw.node_facts[key] = _new(NodeFacts, (name, start, 0, "cpu", row, (), frame, self.b.num_events + 1, 1))
                rows.extend((_K_BUMP, row, 0, key, 0, 0, 0, _K_CREATED, row, 0, key, 0, 0, 0))
                if len(rows) >= CHUNK * ROW:
                    self.b.freeze_rows()
            state.rlast = start + 1
        else:
            self._bumps(state, start, start + 1, name, frame)

    def function_applied(self, cls: type) -> None:
        """A custom Function's apply begins: its PyNode takes the counter's value now."""
        state = self._state()
        now = _seq()
        state.last = now + 1
        self._bumps(state, now, now + 1, f"{cls.__name__}Backward", self._user_frame())

    def _wrap_apply(self, original: Any) -> Any:
        bridge = self

        def apply(cls, *args, **kwargs):
            lines = bridge._lines
            if lines is not None:
                lines.flush(args)
            bridge.function_applied(cls)
            return original(cls, *args, **kwargs)

        return apply

    # -- backward calls ------------------------------------------------------------------------------------------
    def _wrap_run_backward(self, original: Any) -> Any:
        bridge = self

        def _engine_run_backward(t_outputs, *args, **kwargs):
            state = bridge._state()
            lines = bridge._lines
            tracing = None
            if lines is not None:
                lines.flush(tuple(t_outputs))
                tracing = sys.gettrace()
                if tracing is not None:  # NOTE [line culprits]: no line events inside a backward call
                    sys.settrace(None)
            try:
                return bridge._run_backward(state, original, t_outputs, args, kwargs)
            finally:
                if tracing is not None:
                    sys.settrace(tracing)

        return _engine_run_backward

    def _run_backward(self, state: _State, original: Any, t_outputs: Any, args: tuple, kwargs: dict) -> Any:
        """One backward call, recorded (torch's own `_engine_run_backward` is `original`)."""
        self.write_seen(state)
        local = self._local  # this thread's: leaves' variables, read if a new leaf needs them (_leaf_name)
        local.call_frame, local.variables, local.holders = sys._getframe(1), None, None
        try:
            call = self._call(state, t_outputs, args, kwargs)
        except Exception as e:  # noqa: BLE001 - agdb's failure must not become the program's
            self.failures.append(f"{type(e).__name__}: {e}")
            call = None
        finally:
            local.call_frame = local.variables = local.holders = None
        if call is None:
            return original(t_outputs, *args, **kwargs)
        log = state.log
        log.append((_CALL, call))
        state.calls.append(call)
        collecting = gc.isenabled()
        if collecting:  # NOTE [collections while recording]
            gc.disable()
        try:
            result = original(t_outputs, *args, **kwargs)
        except BaseException as e:
            log.append((_END, call, (type(e).__name__, str(e)), None, _seq()))
            raise
        else:
            log.append((_END, call, None, result, _seq()))
        finally:
            if collecting:
                gc.enable()
            state.calls.remove(call)
            self._unhook(call.hooked)
            for handle in call.witness_hooks:
                handle.remove()
            state.last = _seq()  # the reconstruction accounts for every increment up to here
            if not state.calls:
                state.pushed.clear()  # after an error the engine already took the mode off
                if not self.defer:
                    self._replay(state)
        return result

    def _call(self, state: _State, t_outputs: Any, args: tuple, kwargs: dict) -> _Call | None:
        """Walk the graph a call is about to run and hook its nodes; None when torch will refuse the call."""
        params = _run_args(args, kwargs)
        call = _Call()
        roots = []
        for t in t_outputs:
            edge = _edge(t)
            if edge is None:
                return None  # torch raises "element i of tensors does not require grad"
            roots.append(edge)
        given = tuple(params["inputs"] or ())
        inputs: list = [_input_edge(t) for t in given]
        starts = [n for n, _ in roots] + [n for n, _ in inputs if n is not None]
        graph = self._cached(state, starts)
        if graph is None:
            self._new_hooks = []
            with _gc_paused():  # a walk allocates per node, and no cycles: no collection in the middle
                walked = self._walk(state, starts)
            graph = walked.graph
            key_of = walked.key_of
            if params["retain_graph"]:  # a graph kept for another backward keeps its walk and its hooks
                self._remember(state, starts, key_of, graph)
            else:
                call.hooked = self._new_hooks
            self._new_hooks = []
        else:
            key_of = {id(n): self._key(n, state.row, set())[0] for n in starts}
        for i, (n, _) in enumerate(inputs):
            if n is None:  # a leaf: its AccumulateGrad if the walk met one (torch does not make one here)
                known = self._acc_keys.get(id(given[i]))
                if known is not None and known[0]() is given[i] and known[1] in graph.seq:
                    inputs[i] = (known[1], 0)
        call.before = _seq()
        call.frame = self._user_frame()
        call.roots = [(key_of[id(n)], nr) for n, nr in roots]
        call.inputs = [(n, nr) if isinstance(n, int) else (key_of[id(n)], nr) if n is not None else (0, 0)
                       for n, nr in inputs]
        call.multi = len(roots) > 1
        call.keep_graph = bool(params["retain_graph"])
        call.create_graph = bool(params["create_graph"])
        call.grads = tuple(params["grad_tensors"] or ())
        call.parent_id = _gt_id()
        call.gt = GraphTaskModel(next(self._gt_ids), self._depth(state, call.parent_id), graph, 0, (), (),
                                 params["accumulate_grad"], {})
        if self._retained:
            call.retains = self._retains(state)
        witness = self._witness_hook(state, call)
        call.witness_hooks = [n.register_prehook(witness) for n, _ in roots]
        return call

    @staticmethod
    def _depth(state: _State, parent: int) -> int:
        """The reentrant depth of a call made while graph task `parent` runs: one below the recorded call torch
        says it is nested in (torch's reentrant depth counts the backward calls nested on one thread)."""
        if parent < 0:
            return 0
        for outer in reversed(state.calls):
            if outer.torch_id == parent:
                return outer.gt.depth + 1
        return max(1, len(state.calls))  # nested in a backward the bridge did not record

    def _witness_hook(self, state: _State, call: _Call) -> Any:
        """A pre-hook for the call's roots, put on for this call only: torch's id of the graph task and, with
        multithreading disabled, its execution order.

        NOTE [witness]
        With multithreading disabled, `torch._C._current_graph_task_execution_order()` lists, from inside the
        root's pre-hook, every node the graph task will pop, in order: a second witness of the order, beside the
        pre-hooks that fire. torch allows it only there (anywhere later it fails an internal assert), so it is
        read once per call, by the first root whose pre-hook fires (after a GraphRoot, the first of its roots).
        It lists the nodes that are only captured as well as those that run.
        """
        def witness(grad_outputs: Any) -> None:
            if call.torch_id is not None:
                return
            call.torch_id = _gt_id()
            if _multithreading():
                return
            try:
                order = _execution_order()
            except RuntimeError as e:  # torch refused: say why in the trace, never fail the program
                call.witness_error = str(e).split("\n")[0]
                return
            row = state.row
            call.witness = [self._lookup(n, row) for n in order]

        return witness

    def _lookup(self, n: Any, row: int) -> int:
        """The key a walk gave node `n` (0 if none did), making none (NOTE [node identity])."""
        seq = n._sequence_nr()
        if seq != UINT64_MAX:
            return self._seq_keys.get(seq | row << 64, 0)
        var = getattr(n, "variable", None)
        known = self._acc_keys.get(id(var)) if var is not None else None
        return known[1] if known is not None and known[0]() is var else 0

    def _retains(self, state: _State) -> dict[int, int]:
        """Node key -> how many retains_grad hooks it carries, for the tensors retain_grad() was called on that
        still retain their grad. A view is left out: reading its grad_fn after an in-place write would make a
        node (NOTE [node identity])."""
        found: dict[int, int] = {}
        alive = []
        for ref in self._retained:
            t = ref()
            if t is None or not t.retains_grad:
                continue
            alive.append(ref)
            if t._is_view() or t.grad_fn is None:
                continue
            key = self._lookup(t.grad_fn, state.row)  # the walk's keys are the calling thread's
            if key:
                found[key] = found.get(key, 0) + 1
        self._retained = alive
        return found

    def _unhook(self, keys: list[int]) -> None:
        handles = self._handles
        for key in keys:
            held = handles.pop(key, None)
            if held is not None:
                _unhooked(held[0])
                _unhooked(held[1])

    def _cached(self, state: _State, starts: list) -> Graph | None:
        """The graph a former call walked from the same nodes, while they live (a live node keeps everything below
        it alive and unchanged): a second backward over a retained graph does not walk it again."""
        keys = tuple(self._key(n, state.row, set())[0] for n in starts)
        found = self._walks.get((state.row, keys))  # per thread: the hooks log into the walking thread's log
        if found is None:
            return None
        for key in keys:
            held = self._handles.get(key)
            if held is None or held[0]() is None:
                del self._walks[(state.row, keys)]
                return None
        return found

    def _remember(self, state: _State, starts: list, key_of: dict, graph: Graph) -> None:
        if len(self._walks) >= 64:  # forget the walks of graphs that are gone
            for row, keys in list(self._walks):
                if any(self._handles.get(k) is None or self._handles[k][0]() is None for k in keys):
                    del self._walks[(row, keys)]
        self._walks[(state.row, tuple(key_of[id(n)] for n in starts))] = graph

    # -- reconstruction ------------------------------------------------------------------------------------------
    def _replay(self, state: _State) -> None:
        """Run the log through the model: events in the order things happened."""
        with torch._C.DisableTorchFunction(), _gc_paused():  # our own tensor calls; no cycles made here
            self._replay_log(state)

    def _replay_log(self, state: _State) -> None:
        log = state.log[:]  # the hooks hold state.log itself: empty it in place
        del state.log[:len(log)]
        model = state.model
        stack: list[_Call] = []
        values = self._value
        after_accumulation: list[tuple] = []  # post_accumulate_grad hooks: their events follow GradAccumulated
        for entry in log:
            kind = entry[0]
            if kind == _PRE:
                if not stack:
                    continue
                call = stack[-1]
                now = entry[3]
                if not call.begun:
                    self._begin(state, call, now)
                elif now > state.rlast:
                    self._gap(state, now, call.frame)
                key = entry[1]
                self._check_running(call, key, entry[4], entry[5])
                call.observed.append(key)
                for _ in range(call.retains.get(key, 0)):  # torch runs them after the tensor hooks
                    model.hook_ran(call.gt, key, "retains_grad", "retain_grad")
                model.node_started(call.gt, key, [values(g) for g in entry[2]])
            elif kind == _HOOK:
                _, key, hook_kind, name, now = entry
                if not stack or not key:
                    continue
                call = stack[-1]
                if not call.begun:
                    self._begin(state, call, now)
                if hook_kind == "post_accumulate_grad":
                    after_accumulation.append((key, name))
                else:
                    model.hook_ran(call.gt, key, hook_kind, name)
            elif kind == _POST:
                if not stack:
                    continue
                gt, key, grad_inputs, grad_outputs = stack[-1].gt, entry[1], entry[2], entry[3]
                if key in self._is_acc and grad_outputs and grad_outputs[0] is not None:
                    self.b.grad_accumulated(thread=state.row, graph_task=gt.id, node=key,
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
            elif kind == _BUMP:
                _, start, after, names, frame = entry
                if stack and not stack[-1].begun:
                    self._begin(state, stack[-1], start)
                self._emit_bumps(state, start, after, names, frame)
            elif kind == _NODE:
                self._node(state, stack[-1].frame if stack else -1, *entry[1:])
            elif kind == _CALL:
                call = entry[1]
                self._gap(state, call.before, call.frame)
                stack.append(call)
            else:  # _END
                _, call, error, result, now = entry
                if not call.begun:
                    self._begin(state, call, now)
                self._gap(state, now, call.frame)
                results = tuple(result) if isinstance(result, (tuple, list)) else ()
                model.finish(call.gt, error, lambda gt, node, i, r=results: values(r[i]) if i < len(r) else None)
                self._task_ended(call, error is None)
                stack.remove(call)

    def _node(self, state: _State, frame: int, key: int, name: str, seq: int, edges: tuple, num_inputs: int) -> None:
        """A node a walk met while a reconstruction was pending, in its place: made now if no increment of the log
        made it (an AccumulateGrad), else given its edges and real name. A numbered node whose increment nobody
        saw (hooks that push no mode: values=False) takes it here first, as a gap. The writes are _describe's
        per-node ones, which that loop keeps inline: a call per node there costs the 100k wide graph's
        registration 4-7% (a 10 µs/node target it sits just under)."""
        b, raw = self.b, self.raw
        if seq != UINT64_MAX and seq >= state.rlast and key not in raw.node_facts:
            self._gap(state, seq + 1, frame)
        facts = raw.node_facts.get(key)
        if facts is None:
            b.node_created(thread=state.row, node=key, name=name, seq_nr=seq, topological_nr=0, next_edges=edges,
                           num_inputs=num_inputs)
            return
        raw.node_facts[key] = _new(NodeFacts, (name, seq, facts.topological_nr, facts.device, facts.thread,
                                               tuple(_flat(edges)), facts.frame, facts.step, num_inputs))
        bump = raw.bumps.get(key)
        if bump is not None and bump.name != name:
            raw.bumps[key] = bump._replace(name=name)
        self._unnamed.discard(key)

    def _check_running(self, call: _Call, key: int, torch_id: int, running_seq: int) -> None:
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

    def _task_ended(self, call: _Call, complete: bool) -> None:
        """The call's entry in meta["graph_tasks"]; with a witness (NOTE [witness]), compare it with the order
        the model popped and the order the pre-hooks saw."""
        gt = call.gt
        entry: dict[str, Any] = {"graph_task": gt.id, "torch_id": -1 if call.torch_id is None else call.torch_id,
                                 "parent_torch_id": call.parent_id, "reentrant_depth": gt.depth}
        if call.witness_error:
            entry["execution_order_error"] = call.witness_error
        witness = call.witness
        if witness is not None:
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

    def _begin(self, state: _State, call: _Call, now: int) -> None:
        """The call's first sign of life: name the nodes the engine made (Identity, GraphRoot), then start the
        model (dependencies, exec_info, the root's push)."""
        call.begun = True
        row = state.row
        self._gap(state, call.before, call.frame)
        made = now - call.before
        multi = 1 if call.multi else 0
        s = call.before
        inputs = list(call.inputs)
        missing = [i for i, (k, _) in enumerate(inputs) if not k]
        for j, i in enumerate(missing):
            if j < made - multi:  # an unreachable leaf with no AccumulateGrad yet: torch made an Identity
                key = self._bump(row, s, "torch::autograd::Identity", call.frame)
                self.b.node(key, name="torch::autograd::Identity", seq_nr=s, thread=row, frame=call.frame)
                s += 1
            else:  # an unreachable leaf whose AccumulateGrad lives elsewhere
                key = next(self._keys)
                self.b.node(key, name=_ACC, seq_nr=UINT64_MAX, thread=row)
            inputs[i] = (key, 0)
        gt = call.gt
        graph = gt.graph
        if call.multi:
            root = self._bump(row, s, "GraphRoot", call.frame)
            graph.seq[root] = s
            graph.edges[root] = tuple(call.roots)
            self.b.node(root, name="GraphRoot", seq_nr=s, thread=row, next_edges=call.roots, num_inputs=0,
                        frame=call.frame)
            s += 1
            state.model.simulated.add(root)
            gt.graph_root, gt.root_slots = root, ()
            gt.root_grads = tuple(self._value(g) for g in call.grads)
        else:
            gt.graph_root, slot = call.roots[0]
            gt.root_slots = (slot,)
        state.rlast = max(state.rlast, s)
        gt.inputs = tuple(inputs)
        gt.exec_info = bool(inputs)
        gt.topo = graph.topological_nrs([gt.graph_root] + [n for n, _ in gt.inputs])  # inputs= may lie off it
        facts_of = self.raw.node_facts
        for key, topo in gt.topo.items():
            facts = facts_of.get(key)
            if facts is not None and facts.topological_nr != topo:
                facts_of[key] = facts._replace(topological_nr=topo)
        state.model.start(gt, call.roots, call.keep_graph, call.create_graph)

    # -- hooks ---------------------------------------------------------------------------------------------------
    def _hook(self, n: Any, key: int, state: _State) -> None:
        held = self._handles.get(key)
        if held is not None and held[0]() is not None:
            if held[2] is state:
                return  # this node already has ours: once per graph, not once per backward
            # hooked for another thread's backward: this thread's log from now on (registering again replaces them)
        # The hooks append to this thread's log list itself: a backward on the CPU runs on the thread that
        # called it, and a lookup per call (threading.local) would cost as much as the hook.
        # A pre-hook logs torch's graph task id and the seq_nr of the node torch says is running
        # (`_current_autograd_node()`), checked against the hook's own node and call when the log is replayed.
        log, mode, values = state.log, self._mode or self.line_mode, self.values
        if not isinstance(n, _PY_NODE) and not values:  # keep no grad alive: only which outputs were defined
            def pre(grad_outputs):
                log.append((_PRE, key, (), _seq(), _gt_id(), _running()._sequence_nr()))

            def post(grad_inputs, grad_outputs):
                log.append((_POST, key, (grad_inputs[0] is not None,) if len(grad_inputs) == 1 else
                            tuple([g is not None for g in grad_inputs]), ()))
        elif not isinstance(n, _PY_NODE):  # a C++ node runs no Python of its own: log and return
            def pre(grad_outputs):
                log.append((_PRE, key, grad_outputs, _seq(), _gt_id(), _running()._sequence_nr()))

            def post(grad_inputs, grad_outputs):
                log.append((_POST, key, grad_inputs, grad_outputs))
        else:  # a custom Function's node (with values=False too: its increments need the mode as much)
            def pre(grad_outputs):
                log.append((_PRE, key, grad_outputs if values else (), _seq(), _gt_id(), _running()._sequence_nr()))
                if not _mode_depth() and mode is not None:
                    # The engine runs nodes with no torch-function mode: put ours back for a custom Function's
                    # backward (its ops, a reentrant backward) so its increments get their lines. The engine
                    # restores the thread's state after each node, so a node that fails cannot leave it behind.
                    _push_mode(mode)
                    state.pushed.append(key)

            def post(grad_inputs, grad_outputs):
                if state.pushed and state.pushed[-1] == key:
                    state.pushed.pop()
                    if _mode_depth():
                        _pop_mode()
                if values:
                    log.append((_POST, key, grad_inputs, grad_outputs))
                else:
                    log.append((_POST, key, tuple([g is not None for g in grad_inputs]), ()))

        # NOTE [lean registration]: during a walk, registering returns the node's hook dict itself.
        self._handles[key] = (_weakref(n.register_prehook(pre)), _weakref(n.register_hook(post)), state)
        self._new_hooks.append(key)
        if key in self._is_acc:
            self._acc_alive[key] = self._handles[key][0]

    # -- the graph -----------------------------------------------------------------------------------------------
    def _walk(self, state: _State, nodes: list) -> _Walk:
        """Every node reachable from `nodes`, in one pass: keys, edges, hooks, and facts for nodes new to the trace."""
        walk = _Walk()
        held: list = []  # wrappers stay alive during the walk, so id() names one node (NOTE [node identity])
        new: list = []
        _LEAN.thread = threading.get_ident()
        try:
            self._walk_into(state, walk, nodes, held, new)
        finally:
            _LEAN.thread = None
        self._describe(new, walk.graph, state)
        del held, new
        return walk

    def _walk_into(self, state: _State, walk: _Walk, nodes: list, held: list, new: list) -> None:
        row = state.row
        key_of = walk.key_of
        graph = walk.graph
        seq_of, edges_of, inputs_of = graph.seq, graph.edges, graph.num_inputs
        used: set[int] = set()
        stack = []
        key_fn, hook, described = self._key, self._hook, self._described
        for n in nodes:
            if n is not None and id(n) not in key_of:
                key, seq = key_fn(n, row, used)
                key_of[id(n)] = key
                seq_of[key] = seq
                held.append(n)
                stack.append((n, key))
        while stack:
            n, key = stack.pop()
            edges = []
            for c, nr in n.next_functions:
                if c is None:
                    edges.append((0, nr))
                    continue
                ck = key_of.get(id(c))
                if ck is None:
                    ck, cseq = key_fn(c, row, used)
                    key_of[id(c)] = ck
                    seq_of[ck] = cseq
                    held.append(c)
                    stack.append((c, ck))
                edges.append((ck, nr))
                if inputs_of.get(ck, 0) <= nr:
                    inputs_of[ck] = nr + 1
            edges_of[key] = tuple(edges)
            hook(n, key, state)
            if key not in described:
                new.append((n, key))

    def _describe(self, new: list, graph: Graph, state: _State) -> None:
        """Node facts for nodes the trace has not described yet: their edges, input count and real name (an increment
        wrote a guess, or `?`). While a reconstruction is pending (a backward call in progress: a reentrant one's
        walk; or calls deferred), a node the trace does not have yet is logged, to be made in its place (_node)."""
        b, row = self.b, state.row
        pending = state.log if state.log or state.calls else None
        facts_of, bumps, unnamed, type_names = self.raw.node_facts, self.raw.bumps, self._unnamed, self._type_names
        described = self._described
        seq_of, edges_of, inputs_of = graph.seq, graph.edges, graph.num_inputs
        for n, key in new:
            name = type_names.get(type(n))
            if name is None:
                name = type_names[type(n)] = n.name()
            bump = bumps.get(key)
            if bump is not None and bump.name != name:
                bumps[key] = _new(Bump, (name, bump.seq_nr, bump.frame))
            unnamed.discard(key)
            described.add(key)
            old = facts_of.get(key)
            if old is None and pending is not None:  # after what the log holds (its increment may be there)
                pending.append((_NODE, key, name, seq_of[key], edges_of[key], inputs_of.get(key, 1)))
            elif old is None:  # met first by a walk (an AccumulateGrad, or a node made before recording)
                b.node_created(thread=row, node=key, name=name, seq_nr=seq_of[key], topological_nr=0,
                               next_edges=edges_of[key], num_inputs=inputs_of.get(key, 1))
            else:  # made while recording: its name and edges now; its creation step, thread and line as they were.
                # The fields of TraceBuilder.node, written here (a walk's edges are already (key or 0, int) pairs);
                # _node writes them the same way for a node described from the log.
                facts_of[key] = _new(NodeFacts, (name, seq_of[key], 0, "cpu", old.thread, tuple(_flat(edges_of[key])),
                                                 old.frame, old.step, inputs_of.get(key, 1)))

    def _key(self, n: Any, row: int, used: set[int]) -> tuple[int, int]:
        """(key, seq_nr) of a node (NOTE [node identity])."""
        seq = n._sequence_nr()
        if seq == UINT64_MAX:
            var = getattr(n, "variable", None)
            if var is None:
                return next(self._keys), seq  # an Error node: no number, no leaf
            known = self._acc_keys.get(id(var))
            if known is not None and known[0]() is var:
                alive = self._acc_alive.get(known[1])
                if alive is None or alive() is not None:  # the same node (NOTE [node identity])
                    return known[1], seq
                del self._acc_alive[known[1]]  # that one died: this leaf's new one takes its place
            key = next(self._keys)
            self._acc_keys[id(var)] = (weakref.ref(var), key)
            self._is_acc.add(key)
            self._leaf_name(key, var)
            return key, seq
        key = self._seq_keys.get(seq | row << 64)
        if key is None or key in used:
            key = next(self._keys)
            self._seq_keys.setdefault(seq | row << 64, key)
        used.add(key)
        return key, seq

    def _leaf_name(self, key: int, var: Any) -> None:
        """The name of AccumulateGrad `key`'s leaf (NOTE [leaf names] in tracer/recording/leaf_names.py, the engine's
        rule): a parameter's path from a module the user's frames hold where the backward call was made, else its
        path in the outermost module they hold, else the variable bound to the leaf there, else none."""
        local = self._local
        frame = getattr(local, "call_frame", None)
        if isinstance(var, torch.nn.Parameter):
            holders = getattr(local, "holders", None)
            if holders is None:
                read: list = []
                holders = local.holders = list(module_holders(bound_names(user_frames(frame, is_library), read),
                                                              torch.nn.Module))
                self._read_locals(read)
            name = self._paths.name(var, holders, lambda: self._outermost_modules(frame))
            if name is not None:
                self._leaf_names[key] = name
                return
        variables = getattr(local, "variables", None)
        if variables is None:
            read = []
            variables = local.variables = leaf_variables(frame, is_library, read)
            self._read_locals(read)
        name = variables.get(id(var))
        if name is not None:
            self._leaf_names[key] = name

    def _outermost_modules(self, frame: Any) -> list:
        """The outermost modules the user's frames hold at a backward call (NOTE [leaf names], rule 2)."""
        read: list = []
        found = outermost_modules(user_frames(frame, is_library, most=sys.getrecursionlimit()), torch.nn.Module, read)
        self._read_locals(read)
        return found

    def _value(self, t: Any) -> Any:
        """What the trace keeps of a grad: a numpy view (the builder copies small ones, summarises others)."""
        if t is None:
            return None
        if not self.values:
            return TensorSummary(tuple(t.shape), str(t.dtype).removeprefix("torch."), str(t.device), (), False, False)
        try:
            return t.detach().numpy()
        except (RuntimeError, TypeError):  # not on the CPU, or a dtype numpy lacks
            return TensorSummary(tuple(t.shape), str(t.dtype).removeprefix("torch."), str(t.device), (), False,
                                 False)


class _LeanRegistration(threading.local):
    """NOTE [lean registration]
    Registering a hook on a node calls torch's `_HookMixin._register_hook`, which makes a RemovableHandle (a
    Python object, a weak reference and a class counter): a third of what walking and hooking a new graph cost.
    While the bridge walks on this thread, the bridge's version stores the hook in the node's hook dict under
    a key no RemovableHandle takes (ids count up from 0) and hands back the dict itself, which the bridge refers
    to weakly (the dict lives as long as the node) and removes its hook from by that key. Any other thread,
    and this one outside a walk, gets torch's own.
    """

    thread: int | None = None


_LEAN = _LeanRegistration()
_HOOK_KEY = -(1 << 62)
_ORIGINAL_REGISTER = torch.autograd.function._HookMixin.__dict__["_register_hook"]
_weakref = weakref.ref
_flat = itertools.chain.from_iterable


def _register_hook(backward_hooks: Any, hook: Any) -> tuple:
    if _LEAN.thread is None:
        return _ORIGINAL_REGISTER.__func__(backward_hooks, hook)
    if backward_hooks is None:
        backward_hooks = OrderedDict()
    backward_hooks[_HOOK_KEY] = hook
    return backward_hooks, backward_hooks


def _unhooked(ref: Any) -> None:
    """Take the bridge's hook out of a node's hook dict (NOTE [lean registration]), if the node still lives."""
    hooks = ref()
    if hooks is not None:
        hooks.pop(_HOOK_KEY, None)


class _Walk:
    def __init__(self) -> None:
        self.key_of: dict[int, int] = {}
        self.graph = Graph({}, {}, {})


class _CulpritMode(TorchFunctionMode):
    """Reads the counter around every torch call; see Bridge.op_bumped."""

    def __init__(self, bridge: Bridge, special: Any = None) -> None:
        super().__init__()
        self.bridge = bridge
        self._bumped = bridge.op_bumped
        self._special_funcs = _SPECIAL if special is None else frozenset(special)  # lines: tensor hooks are patched

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # NOTE [forward hot path]: this runs around every torch call of the program, so it does nothing but read
        # the counter unless it moved; Bridge.op_bumped does the rest in one call.
        before = _seq()
        if func in self._special_funcs:
            out = self._special(func, args, kwargs or {})
        else:
            out = func(*args, **kwargs) if kwargs else func(*args)
        if _seq() != before:
            self._bumped(func, out, before)
        return out

    def _special(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """backward, and the calls that put a hook of the user's on a tensor (tensor_hooks.py)."""
        if func is _BACKWARD:  # the mode is off inside its own handler: keep it on for hooks and custom backwards
            with self:
                return _tensor_backward(*args, **kwargs)
        return tensor_hooks.register(self.bridge, func, args, kwargs)


_SPECIAL = frozenset((_BACKWARD, *tensor_hooks.REGISTERING))
"""The torch calls the mode does more for than read the counter around."""


def _tensor_backward(self: Any, gradient: Any = None, retain_graph: Any = None, create_graph: bool = False,
                     inputs: Any = None) -> None:
    """What Tensor.backward does once past its own __torch_function__ check."""
    torch.autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic collection inside: allocating much that is all acyclic would make each full collection walk it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _names(func: Any, out: Any, start: int, after: int) -> list[str]:
    """Names of the nodes `func` made (seq_nrs start..after-1), from its outputs' grad_fn and what they reach in
    that range; the node an in-place op on a view hides inside CopySlices is named after the op."""
    names: dict[int, str] = {}
    todo = []
    for t in _tensors(out):
        is_node = hasattr(t, "_sequence_nr")
        gf = t if is_node else t.grad_fn
        if gf is not None:
            todo.append(gf)
        if not is_node and t._is_view() and t._base is not None and t._base.grad_fn is not None:
            todo.append(t._base.grad_fn)  # CopySlices of an in-place op on a view sits on the base
    while todo:
        n = todo.pop()
        s = n._sequence_nr()
        if start <= s < after and s not in names:
            names[s] = n.name()
            todo.extend(c for c, _ in n.next_functions if c is not None)
    op = getattr(func, "__name__", "") or ""
    return [names.get(s) or (_hidden_name(op) if s == start else f"? (inside {op})") for s in range(start, after)]


def _tensors(out: Any) -> list:
    if isinstance(out, torch.Tensor) or hasattr(out, "_sequence_nr"):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def _hidden_name(op: str) -> str:
    """The node an in-place op on a view makes and hides inside CopySlices: `mul_` -> MulBackward0."""
    base = op.strip("_")
    if not base or not op.endswith("_") or op.startswith("__"):
        return f"? (inside {op})" if op else "?"
    return "".join(part.capitalize() for part in base.split("_")) + "Backward0"


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



def _by_row(d: dict, index: dict[int, int]) -> dict:
    """A divergence with its node keys turned into the trace's node rows (-1 for none)."""
    out = dict(d)
    for field in ("expected", "observed", "node"):
        if field in out:
            out[field] = index.get(out[field], -1) if out[field] else -1
    return out
