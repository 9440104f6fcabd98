"""The name a user knows a leaf tensor by, looked up once when its AccumulateGrad is made: a module's parameter path
(`fc1.weight`) or the variable bound to it (`w`).

Used by the Recorder while it is attached (so the engine is loaded); imports the engine's nn.Module only when a
look-up runs, and never textual or rich.

NOTE [leaf names]
Every AccumulateGrad has seq_nr max, so the lists told them apart only as `leaf N`. A user knows a leaf by its name
in the program. When the Recorder sees an AccumulateGrad made (or meets one first at a backward's start), it looks
its leaf up once, walking the stack outward from the op that made it:
1. a Parameter owned by a module: of the modules being called (the `self` of each Module.__call__ frame) and the
   modules bound in the innermost user frame (its locals, then its globals), the one that gives the longest path
   (`fc1.weight` from the model rather than `weight` from its `fc1`);
2. else the name bound to the tensor itself (`w`): in the innermost user frame's locals, then its globals, then
   the locals of the two user frames that called it;
3. else none (an expression's result, say): readers say `leaf N`.
Cost: one walk of the stack per AccumulateGrad, not per op; each module's parameters are mapped once (and again only
when one of its Parameters is missing from the map), by weak reference.
Nothing is kept alive: modules and parameters are held weakly, frames are dropped before returning. Reading a
function frame's locals makes Python (3.11, 3.12) snapshot them into a dict the frame holds until it next refreshes
it or ends, which would keep values the program has since dropped alive; so the snapshots this look-up made are
emptied afterwards (the next reader refreshes them), unless a trace or profile function runs on this thread (a
debugger may be evaluating in that very dict: there the snapshot stays, as it would for the debugger itself).
"""
from __future__ import annotations

import sys
import weakref
from typing import Any, Iterator

from agdb.tracer.recording.frames import is_agdb_code

_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, whose f_locals is a snapshot
_MAX_FRAMES = 200
"""Frames walked at most: a deep recursion does not make each look-up slow."""
NAME_FRAMES = 3
"""User frames whose locals are read for a variable's name, innermost first: the op's own frame and two callers
(a helper given the tensor inside a list); not every frame up to the interpreter's (a test runner's, an app's)."""


class LeafNamer:
    """Names leaves as NOTE [leaf names] says; one per Recorder, which owns its map of modules' parameters."""

    def __init__(self) -> None:
        self._maps: dict[int, tuple[Any, dict[int, tuple[Any, str]], set[int]]] = {}
        """id(module) -> (weak ref to it, {id(param): (weak ref to it, path)}, ids of params mapped again for)."""
        self._classes: tuple[Any, Any, Any] | None = None

    def name_of(self, variable: Any) -> str | None:
        """The name the user knows leaf `variable` by, or None."""
        module_cls, parameter_cls, call_code = self._engine_classes()
        calling: list[Any] = []  # modules being called, innermost first
        users: list[Any] = []  # the user's frames, innermost first
        touched: list[Any] = []  # function frames whose locals this look-up snapshot
        f = sys._getframe(1)
        try:
            for _ in range(_MAX_FRAMES):
                if f is None:
                    break
                code = f.f_code
                if code is call_code:
                    touched.append(f)
                    calling.append(f.f_locals.get("self"))
                elif not is_agdb_code(code):
                    users.append(f)
                f = f.f_back
            name = None
            if isinstance(variable, parameter_cls):
                name = self._module_path(variable, calling[::-1], users[:1], module_cls, touched)
            return name or _variable_name(variable, users, touched)
        finally:
            _drop_snapshots(touched)
            del f, calling, users, touched

    def _engine_classes(self) -> tuple[Any, Any, Any]:
        if self._classes is None:
            from agdb.engine.nn.module import Module
            from agdb.engine.nn.parameter import Parameter

            self._classes = (Module, Parameter, Module.__call__.__code__)
        return self._classes

    def _module_path(self, variable: Any, calling: list, users: list, module_cls: Any, touched: list) -> str | None:
        """The longest parameter path of `variable` in the modules being called or bound in the user's frame."""
        candidates = [m for m in calling if isinstance(m, module_cls)]
        for f in users:
            if f.f_code.co_flags & _CO_OPTIMIZED:
                touched.append(f)
            spaces = (f.f_locals,) if f.f_locals is f.f_globals else (f.f_locals, f.f_globals)
            candidates += [v for space in spaces for v in space.values() if isinstance(v, module_cls)]
        best = None
        seen: set[int] = set()
        for module in candidates:
            if id(module) in seen:
                continue
            seen.add(id(module))
            path = self._path_in(module, variable)
            if path is not None and (best is None or path.count(".") > best.count(".")):
                best = path
        return best

    def _path_in(self, module: Any, variable: Any) -> str | None:
        """`variable`'s path among `module`'s parameters, or None."""
        known = self._maps.get(id(module))
        if known is None or known[0]() is not module:
            known = self._maps[id(module)] = (weakref.ref(module), _parameter_map(module), set())
        entry = known[1].get(id(variable))
        if entry is not None and entry[0]() is variable:
            return entry[1]
        if id(variable) in known[2]:
            return None
        # Not mapped: the module may have gained the parameter since. Map it again, once per such parameter.
        known[2].add(id(variable))
        known[1].clear()
        known[1].update(_parameter_map(module))
        entry = known[1].get(id(variable))
        return entry[1] if entry is not None and entry[0]() is variable else None


def _parameter_map(module: Any) -> dict[int, tuple[Any, str]]:
    return {id(p): (weakref.ref(p), path) for path, p in module.named_parameters()}


def bound_names(users: list, touched: list) -> Iterator[tuple[str, Any]]:
    """(name, value) of every variable a leaf may be known by, in the order of NOTE [leaf names]: the innermost user
    frame's locals, then its globals, then the locals of the next user frames (NAME_FRAMES in all). The function
    frames whose locals it read go into `touched`."""
    for i, f in enumerate(users[:NAME_FRAMES]):
        if f.f_code.co_flags & _CO_OPTIMIZED:
            touched.append(f)
        spaces = [f.f_locals]
        if i == 0 and f.f_globals is not f.f_locals:
            spaces.append(f.f_globals)
        for space in spaces:
            for name, value in list(space.items()):
                if not name.startswith("."):  # `.0`: a comprehension's argument
                    yield name, value


def _variable_name(variable: Any, users: list, touched: list) -> str | None:
    """The first name bound to `variable` (bound_names)."""
    return next((name for name, value in bound_names(users, touched) if value is variable), None)


def _drop_snapshots(frames: list) -> None:
    """Empty the locals snapshots this look-up made (NOTE [leaf names]), unless a tracer may be reading them."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return
    for f in frames:
        if f.f_code.co_flags & _CO_OPTIMIZED:
            f.f_locals.clear()
