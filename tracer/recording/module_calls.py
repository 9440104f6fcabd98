"""Which module's call made an op: the path the user writes to reach that module (`model.fc1`, `net[0]`), put on the
op's culprit row by both sources (NOTE [module paths]).

Never imports the engine, torch, textual or rich: each source hands in its own Module class and counter.

NOTE [module paths]
Five layers called by one line (`out = model(x)`) all blame that line; what tells their ops apart is the module
whose call made each: the innermost module call running when the node took its number. A global module hook would
say so, but it puts every module call on nn.Module's slow path (most of a recorded MLP's forward). So while
recording, `Module.__call__` itself is replaced by a thin wrapper (`wrap`) that keeps the calls running on the
recording thread (a linked list, (module, the call it runs in) each) and, where the op is seen only after the call
returned (the bridge's line tracer), a timeline: the counter's value each time the innermost call changes, so that
number s belongs to the call the last change at or before s made innermost (`path_at`). Paths are made from those
calls only when a number is taken, not per call.
A call's path is its parent call's path and the child's name in the parent (`.fc1`, `[0]` in a Sequential or a
ModuleList, `['a']` in a ModuleDict); the outermost call's is the name the user's frame that made it holds the
module by, as leaf names read it (NOTE [leaf names] in leaf_names.py: a variable, or one level into a list, a dict
or an object's attribute), or else the module's class (`Net` for `Net()(x)`). Names are looked up once per module
and parent (held weakly).
"""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Callable

from agdb.tracer.recording.leaf_names import bound_names, module_holders, python_path

_ROOT_FRAMES = 3
"""User frames read for the outermost call's module name (the caller and two more, as leaf names)."""


class ModuleCalls:
    """The module calls running on the recording thread, and their paths (NOTE [module paths])."""

    def __init__(self, module_cls: type, is_user: Callable[[Any], bool], touched: Callable[[list], None],
                 counter: Callable[[], int] | None = None) -> None:
        self._module_cls = module_cls
        self._is_user = is_user  # whether a code object is the user's (not agdb's, not the library's)
        self._touched = touched  # handed the function frames whose locals a root look-up read
        self._counter = counter
        self.thread = threading.get_ident()  # the recording thread: calls on others go straight on
        self.cell: list = [None]  # the innermost call running: (module, the call it runs in), a linked list
        self.timeline: list[tuple[int, Any]] = []  # (counter value, the innermost call from then on), if timed
        self.timed = False  # whether calls go on the timeline (the line tracer's recording thread)
        self._last: tuple[Any, str] = (None, "")  # the call whose path was asked last, and its path
        self._roots: dict[int, tuple[Any, str]] = {}  # id(module) -> (weak ref, its outermost-call name)
        self._children: dict[tuple[int, int], str] = {}  # (id(parent), id(child)) -> the child's suffix
        self._refs: list = []  # weak refs keeping _children's ids honest: an entry dies with its parent

    def current(self) -> str:
        """The path of the innermost module call running on the recording thread ("" for none, or on another)."""
        top = self.cell[0]
        if top is None or threading.get_ident() != self.thread:
            return ""
        return self.path(top)

    def paths(self, start: int, after: int) -> list[str]:
        """The path of the innermost module call that was running when each number start..after-1 was taken ("" for
        none; [] when none was in a module call), in one pass over the timeline; the changes no later number can need
        are dropped."""
        timeline = self.timeline
        if timeline and timeline[-1][0] <= start:  # no change while they were taken: one call (or none) for all
            del timeline[:-1]
            path = self.path(timeline[0][1])
            return [path] * (after - start) if path else []
        i = -1
        while i + 1 < len(timeline) and timeline[i + 1][0] <= start:
            i += 1
        memo: dict[int, tuple[Any, str]] = {}
        out = []
        for s in range(start, after):
            while i + 1 < len(timeline) and timeline[i + 1][0] <= s:
                i += 1
            out.append(self._path(timeline[i][1], memo) if i >= 0 else "")
        if i > 0:
            del timeline[:i]
        return out

    def path(self, call: Any) -> str:
        """The path of a running (or ran) call: its module's place in the call it ran in, up to the outermost (the
        engine asks at each number: the last call asked is remembered)."""
        last = self._last
        if last[0] is call:
            return last[1]
        path = self._path(call, {})
        self._last = (call, path)
        return path

    def _path(self, call: Any, memo: dict) -> str:
        if call is None:
            return ""
        known = memo.get(id(call))  # the calls are alive while the memo is: their ids name them
        if known is not None:
            return known[1]
        module, up = call
        suffix = ""
        if up is not None:
            suffix = self._children.get((id(up[0]), id(module)))
            if suffix is None:
                suffix = self._child_name(up[0], module)
        # not inside the module calling it (or an outermost call): named as an outermost call
        path = self._path(up, memo) + suffix if suffix else self._root_name(module)
        memo[id(call)] = (call, path)
        return path

    def wrap(self, original: Callable, aside: Callable[[], bool] | None = None, torch_call: bool = False) -> Callable:
        """`original` (Module.__call__) keeping the innermost call, and the timeline if `timed`; while `aside()` is
        true the call goes straight to `original` (the bridge while Dynamo traces: NOTE [compile time]).
        Set `timed` before wrapping. `torch_call`: do what torch's `_wrapped_call_impl` (`original`) does instead of
        calling it, so that a module
        call costs no Python frame more than unrecorded. Every instruction here runs on each module call, and under
        the line tracer on CPython's slower tracing path: the paths are made only when a number is taken."""
        counter, timeline, get_ident = self._counter, self.timeline, threading.get_ident
        thread, roots, root_name, cell, timed = self.thread, self._roots, self._root_name, self.cell, self.timed
        if timed and torch_call and aside is not None:
            return self._wrap_timed(original, aside)

        def __call__(module, *args, **kwargs):
            if aside is not None and aside() or get_ident() != thread:  # aside first: Dynamo folds it to True
                return original(module, *args, **kwargs)
            up = cell[0]
            if up is None:  # an outermost call: named now, from the frame making it (NOTE [module paths])
                known = roots.get(id(module))
                if known is None or known[0]() is not module:
                    root_name(module)
            cell[0] = top = (module, up)
            if timed:  # a change at the counter's value replaces the one before at that value: calls that take no
                now = counter()  # number (a no_grad loop) keep the timeline one entry long
                if timeline and timeline[-1][0] == now:
                    timeline[-1] = (now, top)
                else:
                    timeline.append((now, top))
            try:
                if torch_call:
                    impl = module._compiled_call_impl
                    return impl(*args, **kwargs) if impl is not None else module._call_impl(*args, **kwargs)
                return original(module, *args, **kwargs)
            finally:
                cell[0] = up
                if timed:
                    now = counter()
                    if timeline and timeline[-1][0] == now:
                        timeline[-1] = (now, up)
                    else:
                        timeline.append((now, up))

        __call__.__wrapped__ = original  # type: ignore[attr-defined]
        return __call__

    def _wrap_timed(self, original: Callable, aside: Callable[[], bool]) -> Callable:
        """`wrap` for the line tracer's recording thread with torch's `_wrapped_call_impl` done inline: the same steps
        with no option looked at per call, and the timeline's last counter value kept beside it (`last`), so that
        a change is one compare (each instruction here runs on CPython's tracing path)."""
        counter, timeline, get_ident = self._counter, self.timeline, threading.get_ident
        thread, roots, root_name, cell = self.thread, self._roots, self._root_name, self.cell
        last = [timeline[-1][0] if timeline else -1]  # the timeline's last counter value (never emptied once filled)

        def __call__(module, *args, **kwargs):
            if aside() or get_ident() != thread:  # aside first: Dynamo folds it to True (NOTE [compile time])
                return original(module, *args, **kwargs)
            up = cell[0]
            if up is None:  # an outermost call: named now, from the frame making it (NOTE [module paths])
                known = roots.get(id(module))
                if known is None or known[0]() is not module:
                    root_name(module)
            cell[0] = top = (module, up)
            now = counter()
            if last[0] == now:  # a change at the counter's value replaces the one before at that value
                timeline[-1] = (now, top)
            else:
                timeline.append((now, top))
                last[0] = now
            try:
                impl = module._compiled_call_impl
                return impl(*args, **kwargs) if impl is not None else module._call_impl(*args, **kwargs)
            finally:
                cell[0] = up
                now = counter()
                if last[0] == now:
                    timeline[-1] = (now, up)
                else:
                    timeline.append((now, up))
                    last[0] = now

        __call__.__wrapped__ = original  # type: ignore[attr-defined]
        return __call__

    # -- names -----------------------------------------------------------------------------------------------------
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
        f = sys._getframe(2)
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
