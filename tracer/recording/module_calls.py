"""Which module's call made an op: the path the user writes to reach that module (`model.fc1`, `net[0]`), put on the
op's culprit row by both sources (NOTE [module paths]).

Never imports the engine, torch, textual or rich: each source hands in its own Module class and counter.

NOTE [module paths]
Five layers called by one line (`out = model(x)`) all blame that line; what tells their ops apart is the module
whose call made each: the innermost module call running when the node took its number. A global module hook would
say so, but it puts every module call on nn.Module's slow path (most of a recorded MLP's forward). So while
recording, `Module.__call__` itself is replaced by a thin wrapper (`wrap`) that keeps a stack of the calls running
on its thread, (module, path) each, and, where the op is seen only after the call returned (the bridge's line
tracer), a timeline: the counter's value each time the innermost call changes, so that number s belongs to the
call the last change at or before s started (`path_at`).
A call's path is its parent call's path and the child's name in the parent (`.fc1`, `[0]` in a Sequential or a
ModuleList, `['a']` in a ModuleDict); the outermost call's is the name the user's frame that made it holds the
module by, as leaf names read it (NOTE [leaf names] in leaf_names.py: a variable, or one level into a list, a dict
or an object's attribute), or else the module's class (`Net` for `Net()(x)`). Names are looked up once per module
and parent (held weakly).
"""
from __future__ import annotations

import bisect
import sys
import threading
import weakref
from typing import Any, Callable

from agdb.tracer.recording.leaf_names import bound_names, module_holders, python_path

_ROOT_FRAMES = 3
"""User frames read for the outermost call's module name (the caller and two more, as leaf names)."""


class ModuleCalls:
    """The module calls running on each thread while recording, and their paths (NOTE [module paths])."""

    def __init__(self, module_cls: type, is_user: Callable[[Any], bool], touched: Callable[[list], None],
                 counter: Callable[[], int] | None = None) -> None:
        self._module_cls = module_cls
        self._is_user = is_user  # whether a code object is the user's (not agdb's, not the library's)
        self._touched = touched  # handed the function frames whose locals a root look-up read
        self._counter = counter
        self._local = threading.local()
        self._roots: dict[int, tuple[Any, str]] = {}  # id(module) -> (weak ref, its outermost-call name)
        self._children: dict[tuple[int, int], str] = {}  # (id(parent), id(child)) -> the child's suffix
        self._refs: list = []  # weak refs keeping _children's ids honest: an entry dies with its parent
        self.timeline: list[tuple[int, str]] = []  # (counter value, innermost path) on the timeline thread
        self.timeline_thread: int | None = None  # the thread whose calls go on the timeline (the line tracer's)

    def current(self) -> str:
        """The path of the innermost module call running on this thread ("" for none)."""
        stack = getattr(self._local, "stack", None)
        return stack[-1][1] if stack else ""

    def path_at(self, seq: int) -> str:
        """The path of the innermost module call that was running on the timeline thread when number `seq` was
        taken ("" for none)."""
        timeline = self.timeline
        i = bisect.bisect_right(timeline, (seq, "\U0010ffff")) - 1
        return timeline[i][1] if i >= 0 else ""

    def forget_before(self, seq: int) -> None:
        """Drop the timeline's changes that no number from `seq` on can need (the last one before it stays)."""
        timeline = self.timeline
        i = bisect.bisect_right(timeline, (seq, "\U0010ffff")) - 1
        if i > 0:
            del timeline[:i]

    def wrap(self, original: Callable, aside: Callable[[], bool] | None = None) -> Callable:
        """`original` (Module.__call__) keeping the stack, and the timeline on its thread; while `aside()` is true the
        call goes straight to `original` (the bridge while torch traces: NOTE [compile time])."""
        local, path_of, counter, timeline = self._local, self._path, self._counter, self.timeline
        get_ident = threading.get_ident
        calls = self

        def __call__(module, *args, **kwargs):
            if aside is not None and aside():
                return original(module, *args, **kwargs)
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            path = path_of(module, stack)
            stack.append((module, path))
            timed = counter is not None and calls.timeline_thread == get_ident()
            if timed:
                timeline.append((counter(), path))
            try:
                return original(module, *args, **kwargs)
            finally:
                stack.pop()
                if timed:
                    timeline.append((counter(), stack[-1][1] if stack else ""))

        __call__.__wrapped__ = original  # type: ignore[attr-defined]
        return __call__

    # -- names -----------------------------------------------------------------------------------------------------
    def _path(self, module: Any, stack: list) -> str:
        if stack:
            parent, parent_path = stack[-1]
            suffix = self._children.get((id(parent), id(module)))
            if suffix is None:
                suffix = self._child_name(parent, module)
            if suffix:
                return parent_path + suffix
        return self._root_name(module)

    def _child_name(self, parent: Any, module: Any) -> str:
        """`.fc1`, `[0]`, `['a']` or `.blocks[0]`: where `module` sits in `parent` ("" when it is not inside it)."""
        suffix = ""
        for key, child in getattr(parent, "_modules", {}).items():
            if child is module:
                suffix = python_path(key)
                break
        else:  # a module the parent reaches through a container it holds (`for b in self.blocks: b(x)`)
            named = getattr(parent, "named_modules", None)
            for path, child in named() if named is not None else ():
                if child is module and path:
                    suffix = python_path(path)
                    break
        key = (id(parent), id(module))
        self._children[key] = suffix
        try:
            self._refs.append(weakref.ref(parent, lambda _, key=key: self._children.pop(key, None)))
        except TypeError:  # a module that cannot be weakly referenced: the entry stays
            pass
        return suffix

    def _root_name(self, module: Any) -> str:
        known = self._roots.get(id(module))
        if known is not None and known[0]() is module:
            return known[1]
        name = self._holder_name(module) or type(module).__name__
        try:
            self._roots[id(module)] = (weakref.ref(module), name)
        except TypeError:
            pass
        return name

    def _holder_name(self, module: Any) -> str | None:
        """The expression the user's frames making the call hold `module` by (NOTE [leaf names]'s holders)."""
        users = []
        f = sys._getframe(3)
        while f is not None and len(users) < _ROOT_FRAMES:
            if self._is_user(f.f_code):
                users.append(f)
            f = f.f_back
        touched: list = []
        try:
            for expr, held in module_holders(bound_names(users, touched), self._module_cls):
                if held is module:
                    return expr
            return None
        finally:
            self._touched(touched)
            del users, f
