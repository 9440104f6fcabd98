"""What the bridge changes in torch while it records, and puts back after: `_engine_run_backward` (every backward
call), `Function.apply` (a custom Function's node) and `nn.Module.__call__` (the module calls running) wrapped,
Dynamo's `_compile` (or `torch.compile` until Dynamo is imported) wrapped to note the numbers each compile takes
(compiling.py), the lean registration of a node's hooks (hooks.py),
the collector's threshold (NOTE [collections while recording]), multithreading (single_threaded), and how the
forward is watched: the line tracer (lines.py) with the calls that put a user's hook on a tensor patched, or a
TorchFunctionMode around every torch call (culprits="mode", or a trace function already set).

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import bisect
import functools
import gc
import sys
import threading
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from agdb.tracer.recording.module_calls import ModuleCalls
from agdb.tracer.sources.torch import tensor_hooks
from agdb.tracer.sources.torch.backward import Backward
from agdb.tracer.sources.torch.compiling import _is_compiling, compile_time_entry, tracing, watch_compiles
from agdb.tracer.sources.torch.forward import Forward
from agdb.tracer.sources.torch.hooks import register_hook
from agdb.tracer.sources.torch.lines import LineCulprits
from agdb.tracer.sources.torch.naming import is_library
from agdb.tracer.sources.torch.state import BridgeState
from agdb.tracer.sources.torch.threads import watch_new_threads

_seq = torch.autograd._get_sequence_nr
_BACKWARD = torch.Tensor.backward
_is_dynamo_compiling = torch.compiler.is_dynamo_compiling

GC_THRESHOLD = 100_000
"""Allocations between two young-generation collections while recording (NOTE [collections while recording])."""


class Patches:
    """Puts the bridge into torch (`attach`) and takes it out again (`detach`), in the reverse order."""

    def __init__(self, shared: BridgeState, forward: Forward, backward: Backward, single_threaded: bool,
                 modules: bool = True) -> None:
        self.shared = shared
        self.forward = forward
        self.backward = backward
        self.single_threaded = single_threaded  # multithreading off while attached: the witness (NOTE [witness])
        self.modules = modules  # whether module calls are followed (NOTE [module paths])
        self._restore: list[Callable[[], Any]] = []

    def attach(self, culprits: str) -> str:
        """Patch torch for this thread (the mode is per thread; backward calls are caught on any); returns how the
        forward is watched: `culprits`, or "mode" when a trace function is already set."""
        import torch.autograd as ag
        from torch.autograd.function import Function

        shared = self.shared
        original_run = ag._engine_run_backward
        ag._engine_run_backward = self._wrap_run_backward(original_run)
        self._restore.append(lambda: setattr(ag, "_engine_run_backward", original_run))
        original_apply = Function.__dict__["apply"]
        Function.apply = classmethod(self._wrap_apply(original_apply.__func__))
        self._restore.append(lambda: setattr(Function, "apply", original_apply))
        self._restore.append(watch_compiles(self._compiled))  # NOTE [numbers taken while compiling]
        if self.modules:
            self._attach_module_calls(culprits == "lines" and sys.gettrace() is None)
        mixin = torch.autograd.function._HookMixin
        previous = mixin.__dict__["_register_hook"]  # torch's, or a recording's this one is nested in
        mixin._register_hook = staticmethod(register_hook)
        self._restore.append(lambda: setattr(mixin, "_register_hook", previous))
        # NOTE [collections while recording]: the bridge allocates a few small objects per op and per node, and
        # with the default threshold each 700 allocations start a collection whose older generations walk
        # every live tensor and node: most of a recording's cost. Fewer, larger collections while recording, and
        # none while a backward call runs: its hooks log a tuple per node run, all acyclic, which each collection
        # reaching the older generations would walk again (what the user's code leaves in cycles meanwhile is
        # collected after the call).
        self._patch_thread_start()  # NOTE [deferral on one thread] in backward.py
        self._patch_imports()  # NOTE [library imports]
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], GC_THRESHOLD), *threshold[1:])
        self._restore.append(lambda: gc.set_threshold(*threshold))
        if self.single_threaded:  # a per-thread setting, like the mode: this thread's backward calls
            was = torch._C._is_multithreading_enabled()
            torch._C._set_multithreading_enabled(False)
            self._restore.append(lambda: torch._C._set_multithreading_enabled(was))
        state = shared.thread_state()
        # Lines unless a trace function is already set (a debugger's, coverage's): it keeps its place, and the mode
        # sees the forward instead. Lines were opt-in until the cause of a hang was found: NOTE [the async-exception
        # flag] in tracer/recording/async_exc.py (LineCulprits.attach lowers the flag).
        if culprits == "lines" and sys.gettrace() is None:
            # The mode for the lines that need it; a user's tensor hook is caught by the patched Tensor methods.
            shared.line_mode = CulpritMode(self.forward, self.backward, special=(_BACKWARD,))
            shared.lines = shared.local.lines = LineCulprits(self.forward, shared.line_mode, state, is_library)
            self._patch_tensor_hooks()
            shared.lines.attach()
            self._restore.append(watch_new_threads(shared, shared.lines, shared.line_mode))
            return "lines"
        shared.mode = CulpritMode(self.forward, self.backward)
        shared.mode.__enter__()
        self._restore.append(watch_new_threads(shared, None, shared.mode))
        return "mode"

    def detach(self) -> None:
        """Take the mode or the line tracer off, and put back what attach changed."""
        shared = self.shared
        if shared.mode is not None:
            mode, shared.mode = shared.mode, None
            mode.recording = False  # on another thread's stack it stays, doing nothing (NOTE [threads' line tracers])
            mode.__exit__(None, None, None)
        if shared.lines is not None:
            lines, shared.lines = shared.lines, None
            shared.line_mode.recording = False
            lines.detach()
        while self._restore:
            self._restore.pop()()

    def _patch_imports(self) -> None:
        """NOTE [library imports]: a module loaded while recording runs its body, and every function that body calls,
        under the thread's trace function, which gets a call event per frame even where it then ignores the frame.
        torch loads much lazily (DDP's constructor imports torch._dynamo, and with it sympy: millions of calls),
        which then cost about twice their plain time for no line of the user's. So a module of a library package
        already loaded (torch's, or the standard library's: `is_library`), or one that library code imports, loads
        with no trace function on its thread; the user's own modules still get their lines. CPython's import
        statement calls importlib._bootstrap's `_find_and_load` by name on every import that is not in
        sys.modules yet, so wrapping it there sees each load once."""
        import importlib._bootstrap as bootstrap

        original = bootstrap._find_and_load

        def _find_and_load(name: str, import_: Any) -> Any:
            trace_fn = sys.gettrace()
            if trace_fn is None or not _library_import(name, sys._getframe(1)):
                return original(name, import_)
            sys.settrace(None)
            try:
                return original(name, import_)
            finally:
                sys.settrace(trace_fn)

        bootstrap._find_and_load = _find_and_load
        self._restore.append(lambda: setattr(bootstrap, "_find_and_load", original))

    def _patch_thread_start(self) -> None:
        """Wrap threading.Thread.start while recording: a thread that starts another first replays its waiting log
        (NOTE [deferral on one thread] in backward.py)."""
        original = threading.Thread.__dict__["start"]
        starting = self.backward.thread_starting

        @functools.wraps(original)
        def start(thread: threading.Thread) -> None:
            try:
                starting()
            except Exception as e:  # noqa: BLE001 - agdb's failure must not become the program's
                self.shared.failures.append(f"{type(e).__name__}: {e}")
            original(thread)

        threading.Thread.start = start
        self._restore.append(lambda: setattr(threading.Thread, "start", original))

    def _compiled(self, start: int, stop: int) -> None:
        """A Dynamo compile on this thread took numbers start..stop-1 (NOTE [numbers taken while compiling])."""
        shared = self.shared
        row = shared.thread_state().row
        with shared.lock:  # sorted and disjoint, for is_compile_time: a compile nested in this one is inside it
            ranges = shared.compile_seqs.setdefault(row, [])
            ranges[:] = [r for r in ranges if not start <= r[0] < stop]
            bisect.insort(ranges, (start, stop))

    def _attach_module_calls(self, lines: bool) -> None:
        """Wrap nn.Module.__call__ while recording, so that each op knows the module call that made it (NOTE [module
        paths] in tracer/recording/module_calls.py): a thin wrapper, not a global module hook, which would put every
        module call on nn.Module's slow path. The line tracer, which sees an op after its call returned, reads the
        counter's timeline of module calls; the mode reads the calls running. A recording nested in another keeps
        the outer one's."""
        original = torch.nn.Module.__dict__["__call__"]
        if getattr(original, "__wrapped__", None) is not None:
            return
        shared = self.shared

        def touched(frames: list) -> None:  # NOTE [stale locals] in lines.py
            if shared.lines is not None:
                shared.lines.touch(frames)

        calls = ModuleCalls(torch.nn.Module, lambda code: not is_library(code.co_filename), touched,
                            torch.autograd._get_sequence_nr)
        calls.timed = lines  # before wrapping: the wrapper reads it once
        # Dynamo inlines the wrapper and folds is_dynamo_compiling to True (NOTE [compile time]); at run time it is a
        # bare `return False`, one call (each call is an event for the line tracer). Module calls under AOT's fake
        # tensors only read the counter, which takes nothing from them.
        torch.nn.Module.__call__ = calls.wrap(original, torch.compiler.is_dynamo_compiling, torch_call=True)
        self.forward.calls = calls

        def restore() -> None:
            torch.nn.Module.__call__ = original
            self.forward.calls = None

        self._restore.append(restore)

    def _patch_tensor_hooks(self) -> None:
        """Without the mode, the calls that put a user's hook on a tensor are caught where torch defines them."""
        shared, backward = self.shared, self.backward
        for func in tensor_hooks.REGISTERING:
            name = func.__name__
            original = torch.Tensor.__dict__.get(name)  # None: TensorBase's (C), which ours then shadows

            def patched(*args, __func=func, **kwargs):
                if tracing():  # NOTE [compile time]
                    return __func(*args, **kwargs)
                lines = shared.lines_here()
                if lines is not None:
                    lines.flush(args[:1])
                return tensor_hooks.register(backward, __func, args, kwargs)

            setattr(torch.Tensor, name, functools.wraps(func)(patched))
            self._restore.append(lambda name=name, original=original: setattr(torch.Tensor, name, original)
                                 if original is not None else delattr(torch.Tensor, name))

    def _wrap_apply(self, original: Any) -> Any:
        shared, forward = self.shared, self.forward

        def apply(cls, *args, **kwargs):
            if tracing():  # NOTE [compile time]
                return original(cls, *args, **kwargs)
            lines = shared.lines_here()
            if lines is not None:
                lines.flush(args)
            aot_id = cls.__dict__.get("_aot_id")
            if aot_id is not None:  # NOTE [compiled function nodes] in compiling.py
                shared.compiled_functions.append((shared.thread_state().row, _seq(), aot_id))
            forward.function_applied(cls, args)
            return original(cls, *args, **kwargs)

        return apply

    def _wrap_run_backward(self, original: Any) -> Any:
        shared, backward = self.shared, self.backward

        def _engine_run_backward(t_outputs, *args, **kwargs):
            if _is_dynamo_compiling():  # Dynamo inlines this wrapper (a backward inside a compiled function, under
                return original(t_outputs, *args, **kwargs)  # compiled autograd): it must see the plain call
            if tracing():  # NOTE [compile time]: AOTAutograd's own autograd.grad while it builds a joint graph
                try:
                    shared.compile_time_calls.append(compile_time_entry(t_outputs, args, kwargs))
                except Exception as e:  # noqa: BLE001 - agdb's failure must not become the program's
                    shared.failures.append(f"a compile-time backward call: {type(e).__name__}: {e}")
                return original(t_outputs, *args, **kwargs)
            state = shared.thread_state()
            lines = shared.lines_here()
            trace_fn = None
            if lines is not None:
                lines.flush(tuple(t_outputs))
                trace_fn = sys.gettrace()
                if trace_fn is not None:  # NOTE [line culprits]: no line events inside a backward call
                    sys.settrace(None)
            try:
                return backward.run(state, original, t_outputs, args, kwargs)
            finally:
                if trace_fn is not None:
                    sys.settrace(trace_fn)

        return _engine_run_backward


def _library_import(name: str, importer: Any) -> bool:
    """Whether loading module `name` is a library's business (NOTE [library imports]): its top package is loaded
    from a library's files, or the first frame past importlib's own that asked for it is a library's."""
    top = sys.modules.get(name.partition(".")[0])
    if top is not None:
        file = getattr(top, "__file__", None)
        return file is not None and is_library(file)
    while importer is not None and importer.f_code.co_filename.startswith("<frozen importlib"):
        importer = importer.f_back
    return importer is not None and is_library(importer.f_code.co_filename)


class CulpritMode(TorchFunctionMode):
    """Reads the counter around every torch call; see Forward.op_bumped."""

    def __init__(self, forward: Forward, backward: Backward, special: Any = None) -> None:
        super().__init__()
        self.backward = backward  # what the user's tensor hooks report to (tensor_hooks.py)
        self._bumped = forward.op_bumped
        self._special_funcs = _SPECIAL if special is None else frozenset(special)  # lines: tensor hooks are patched
        self.recording = True  # False once the recording ended: a thread's stack may still hold this mode

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # NOTE [forward hot path]: this runs around every torch call of the program, so it does nothing but read
        # the counter unless it moved; Forward.op_bumped does the rest in one call.
        if _is_compiling():  # NOTE [compile time]: Dynamo inlines this method; it must see the plain call
            return func(*args, **kwargs) if kwargs else func(*args)
        before = _seq()
        if func in self._special_funcs and not tracing():
            out = self._special(func, args, kwargs or {})
        else:
            out = func(*args, **kwargs) if kwargs else func(*args)
        # AOTAutograd's fake tensors take numbers too: not the program's
        if _seq() != before and self.recording and not tracing():
            self._bumped(func, out, before)
        return out

    def _special(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """backward, and the calls that put a hook of the user's on a tensor (tensor_hooks.py)."""
        if func is _BACKWARD:  # the mode is off inside its own handler: keep it on for hooks and custom backwards
            with self:
                return _tensor_backward(*args, **kwargs)
        return tensor_hooks.register(self.backward, func, args, kwargs)


_SPECIAL = frozenset((_BACKWARD, *tensor_hooks.REGISTERING))
"""The torch calls the mode does more for than read the counter around."""


def _tensor_backward(self: Any, gradient: Any = None, retain_graph: Any = None, create_graph: bool = False,
                     inputs: Any = None) -> None:
    """What Tensor.backward does once past its own __torch_function__ check."""
    torch.autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)
