"""The name a user knows a leaf tensor by: the path they write to reach it (`model.fc1.weight`, `model[0].weight`,
`w`). One rule for both sources: the engine's Recorder looks a leaf up when its AccumulateGrad is made, the
real-PyTorch bridge when a backward call meets it (sources/torch/naming.py).

Imports the engine's nn.Module only when the Recorder's look-up runs, and never textual or rich.

NOTE [leaf names]
Every AccumulateGrad has seq_nr max, so the lists told them apart only as `leaf N`. A user knows a leaf by its name
in the program, the expression they would type to reach it:
1. a Parameter owned by a module the user's code holds: the holder's expression and the parameter's path in it,
   in Python's syntax (`model.fc1.weight`, `model[0].weight` for a Sequential, `nets[1].fc.bias` for a module in a
   list, `trainer.model.fc.weight` for one in an object's attribute: module_holders). The holders are read from the
   user's frames outside any module's forward (a forward's `self` is not how the caller knows the model): the
   innermost of those frames' locals, then its globals, then the locals of the two frames that called it
   (bound_names); of the holders owning the parameter, the one giving the longest path wins (the model rather than
   its layer), the first met on a tie;
2. else, for a Parameter, its path in the outermost module that any of those frames holds (outermost_modules), with
   no holder expression (`fc1.weight`: the model is held further out than the frames rule 1 reads); a module only a
   temporary holds (`Net()(x)`) is none of them, and its parameters go to rule 3;
3. else the name bound to the tensor itself (`w`): in the innermost user frame's locals, then its globals, then
   the locals of the two user frames that called it;
4. else none (an expression's result, say): readers say `leaf N`.
When: from the frames of the backward call that counts the leaf, on both sources (CallNames): the bridge meets a
leaf only there, and the engine's Recorder names the leaves of each graph task it sees start the same way, so that a
program recorded by either gets one name per leaf. The engine also names a leaf where its AccumulateGrad is made
(from the op's frames), which stays where a call's frames give no name (a leaf bound only in a function that has
returned: the bridge says `leaf N` there).
Cost: one walk of the stack per AccumulateGrad made and per backward call, not per op; each module's parameters are
mapped once (and again only when one of its Parameters is missing from the map), by weak reference.
Nothing is kept alive: modules and parameters are held weakly, frames are dropped before returning. Reading a
function frame's locals makes Python (3.11, 3.12) snapshot them into a dict the frame holds until it next refreshes
it or ends, which would keep values the program has since dropped alive; so the snapshots this look-up made are
emptied afterwards (the next reader refreshes them), unless a trace or profile function runs on this thread (a
debugger may be evaluating in that very dict: there the snapshot stays, as it would for the debugger itself).
"""
from __future__ import annotations

import sys
import types
import weakref
from typing import Any, Callable, Iterable, Iterator

from agdb.tracer.recording.frames import is_agdb_code

_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, whose f_locals is a snapshot
_MAX_FRAMES = 200
"""Frames walked at most: a deep recursion does not make each look-up slow."""
NAME_FRAMES = 3
"""User frames whose locals are read for a variable's name, innermost first: the op's own frame and two callers
(a helper given the tensor inside a list); not every frame up to the interpreter's (a test runner's, an app's)."""
MAX_ITEMS = 64
"""Items looked at per list, tuple, dict or object a user's variable holds (a list of many modules is not read
whole)."""
_NOT_HOLDERS = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


class ParameterPaths:
    """Where a parameter sits in the modules that hold it (NOTE [leaf names], rules 1 and 2). One per source, which
    owns the map of each module's parameters (held weakly)."""

    def __init__(self, module_cls: type) -> None:
        self.module_cls = module_cls
        self._maps: dict[int, tuple[Any, dict[int, tuple[Any, str]], set[int]]] = {}
        """id(module) -> (weak ref to it, {id(param): (weak ref to it, path)}, ids of params mapped again for)."""

    def name(self, variable: Any, holders: Iterable[tuple[str, Any]], owners: Callable[[], Iterable[Any]]
             ) -> str | None:
        """`variable`'s name: a holder's expression and the parameter's path in it, the longest path of all (rule
        1); else its path in the owner giving the longest (rule 2: `owners()` is asked only then); else None."""
        best = self._longest(variable, holders)
        if best is not None:
            return best[0] + python_path(best[1])
        best = self._longest(variable, (("", module) for module in owners()))
        return best[1] if best is not None else None

    def _longest(self, variable: Any, candidates: Iterable[tuple[str, Any]]) -> tuple[str, str] | None:
        """(expression, dotted path) of the candidate module giving `variable` the longest path; the first on a tie.

        The modules' maps are read as they are first; only when none has `variable` is each mapped again (it may
        have gained the parameter since), so that a leaf costs a dict look-up per holder, not a walk of every
        holder's parameters (a frame holding many modules would make that a walk per holder per leaf)."""
        unique: dict[int, tuple[str, Any]] = {}
        for expression, module in candidates:
            if isinstance(module, self.module_cls):
                unique.setdefault(id(module), (expression, module))
        found = self._best(variable, unique.values(), remap=False)
        return found if found is not None else self._best(variable, unique.values(), remap=True)

    def _best(self, variable: Any, candidates: Iterable[tuple[str, Any]], remap: bool) -> tuple[str, str] | None:
        best: tuple[str, str] | None = None
        for expression, module in candidates:
            path = self._path_in(module, variable, remap)
            if path is not None and (best is None or path.count(".") > best[1].count(".")):
                best = (expression, path)
        return best

    def _path_in(self, module: Any, variable: Any, remap: bool) -> str | None:
        """`variable`'s dotted path among `module`'s parameters (`fc1.weight`), or None; with `remap`, a module whose
        map lacks it is mapped again, once per such parameter."""
        known = self._maps.get(id(module))
        if known is None or known[0]() is not module:
            known = self._maps[id(module)] = (weakref.ref(module), _parameter_map(module), set())
        entry = known[1].get(id(variable))
        if entry is not None and entry[0]() is variable:
            return entry[1]
        if not remap or id(variable) in known[2]:
            return None
        known[2].add(id(variable))
        known[1].clear()
        known[1].update(_parameter_map(module))
        entry = known[1].get(id(variable))
        return entry[1] if entry is not None and entry[0]() is variable else None


class CallNames:
    """Leaf names as one moment's frames give them (NOTE [leaf names]), each look-up made once, when a leaf first
    needs it: the holders of modules (rule 1), the outermost modules (rule 2), the bound variables (rule 3). Both
    sources use one per backward call (the bridge for the leaves a walk meets, the engine's Recorder for those a
    graph task counts), and the Recorder one per AccumulateGrad it sees made.

    Args:
        paths: the source's ParameterPaths.
        parameter_cls: what a parameter is (`nn.Parameter` of the engine or of torch).
        holder_frames: the user's frames outside any module's forward, innermost first: rule 1 reads NAME_FRAMES.
        owner_frames: asked once, if rule 2 is needed: every user frame out to the interpreter's.
        variable_frames: the user's frames rule 3 reads (NAME_FRAMES of them), innermost first.
        is_variable: which bound values rule 3 may name (the bridge asks no view for its grad_fn).
    """

    def __init__(self, paths: ParameterPaths, parameter_cls: type, holder_frames: list,
                 owner_frames: Callable[[], list], variable_frames: list,
                 is_variable: Callable[[Any], bool] | None = None) -> None:
        self.paths, self.parameter_cls = paths, parameter_cls
        self._holder_frames, self._owner_frames, self._variable_frames = holder_frames, owner_frames, variable_frames
        self._is_variable = is_variable
        self.touched: list = []
        """The function frames whose locals the look-ups read, in the order read (a source refreshes or empties
        their snapshots: NOTE [leaf names])."""
        self._holders: list | None = None
        self._owners: list | None = None
        self._variables: dict[int, str] | None = None

    def name(self, variable: Any) -> str | None:
        """The name the user knows leaf `variable` by from these frames, or None."""
        # issubclass of the type, not isinstance: torch's Parameter has an __instancecheck__ in Python (~2 µs a leaf)
        if issubclass(type(variable), self.parameter_cls):
            name = self.paths.name(variable, self._module_holders(), self._outermost)
            if name is not None:
                return name
        if self._variables is None:
            is_variable = self._is_variable
            self._variables = {}
            for name, value in bound_names(self._variable_frames, self.touched):
                if is_variable is None or is_variable(value):
                    self._variables.setdefault(id(value), name)
        return self._variables.get(id(variable))

    def _module_holders(self) -> list:
        if self._holders is None:
            self._holders = list(module_holders(bound_names(self._holder_frames, self.touched),
                                                self.paths.module_cls))
        return self._holders

    def _outermost(self) -> list:
        if self._owners is None:
            self._owners = outermost_modules(self._owner_frames(), self.paths.module_cls, self.touched)
        return self._owners


class LeafNamer:
    """Names the engine's leaves as NOTE [leaf names] says; one per Recorder. `at_call` names them from a backward
    call's frames, as the bridge does (the name a trace keeps); `name_of` when an AccumulateGrad is made (kept where
    the call's frames give none: a leaf bound only in a function that has returned)."""

    def __init__(self) -> None:
        self._paths: ParameterPaths | None = None
        self._classes: tuple[Any, Any] | None = None

    def name_of(self, variable: Any) -> str | None:
        """The name the user knows leaf `variable` by where it is being used now (its AccumulateGrad is made), or
        None."""
        users, outside = self._user_frames()
        names = self._names(users, outside)
        try:
            return names.name(variable)
        finally:
            drop_snapshots(names.touched)

    def at_call(self) -> CallNames:
        """Leaf names from the frames of the backward call running now; the caller drops their snapshots
        (`drop_snapshots(names.touched)`) once it has named its leaves."""
        return self._names(*self._user_frames())

    def _names(self, users: list, outside: int) -> CallNames:
        parameter_cls, _ = self._engine_classes()
        paths, outer = self._paths, users[outside:]
        assert paths is not None
        return CallNames(paths, parameter_cls, outer, lambda: outer, users)

    def _user_frames(self) -> tuple[list, int]:
        """The user's frames (not agdb's) from the caller's outwards, innermost first, and where those outside every
        module's forward begin (the outermost Module.__call__)."""
        _, call_code = self._engine_classes()
        users: list[Any] = []
        outside = 0
        f = sys._getframe(2)
        for _ in range(_MAX_FRAMES):
            if f is None:
                break
            code = f.f_code
            if code is call_code:
                outside = len(users)
            elif not is_agdb_code(code):
                users.append(f)
            f = f.f_back
        return users, outside

    def _engine_classes(self) -> tuple[Any, Any]:
        if self._classes is None:
            from agdb.engine.nn.module import Module
            from agdb.engine.nn.parameter import Parameter

            self._paths = ParameterPaths(Module)
            self._classes = (Parameter, Module.__call__.__code__)
        return self._classes


def _parameter_map(module: Any) -> dict[int, tuple[Any, str]]:
    wrapped = _compiled_wrappers(module)
    return {id(p): (weakref.ref(p), _unwrapped(path, wrapped) if wrapped else path)
            for path, p in module.named_parameters()}


def _compiled_wrappers(module: Any) -> list[str]:
    """The paths, inside `module`, of torch.compile's wrappers (OptimizedModule) it holds, itself included ("").

    A compiled module's parameters sit under `_orig_mod.`, its wrapped module (`named_parameters()` says
    `_orig_mod.fc1.weight`), but the wrapper hands every attribute it lacks on to that module, so the user writes
    `model.fc1.weight`: that step is left out of the name where the next one is an attribute (_unwrapped). Indexing
    is not handed on (`model[0]` of a compiled Sequential raises), so `model._orig_mod[0].weight` keeps it. Matched
    by class name, so that this module needs no torch (the engine has no torch.compile)."""
    if not hasattr(module, "named_modules"):
        return []
    return [name for name, m in module.named_modules() if type(m).__name__ == "OptimizedModule"
            and getattr(m, "_orig_mod", None) is not None]


def _unwrapped(path: str, wrapped: list[str]) -> str:
    """`path` without the `_orig_mod` step of each wrapper in `wrapped` (_compiled_wrappers) that an attribute
    follows (python_path writes a step that is no identifier as an index, which the wrapper does not hand on)."""
    steps = path.split(".")
    keep = [step for i, step in enumerate(steps)
            if not (step == "_orig_mod" and ".".join(steps[:i]) in wrapped and i + 1 < len(steps)
                    and steps[i + 1].isidentifier())]
    return ".".join(keep)


def python_path(dotted: str) -> str:
    """A dotted parameter path as Python reaches it from its holder: `.fc1.weight`, `[0].weight` (a Sequential's or
    ModuleList's child), `['a b'].weight` (a ModuleDict key that is no identifier)."""
    return "".join(f".{part}" if part.isidentifier() else f"[{part}]" if part.isdigit() else f"[{part!r}]"
                   for part in dotted.split("."))


def module_holders(bindings: Iterable[tuple[str, Any]], module_cls: type) -> Iterator[tuple[str, Any]]:
    """(expression, module) for every module the bindings hold: bound to a variable (`model`), or one level inside
    one, in a list or tuple (`nets[1]`), a dict (`heads['cls']`) or an object's attribute (`trainer.model`);
    MAX_ITEMS a container at most."""
    for name, v in bindings:
        if isinstance(v, module_cls):
            yield name, v
        elif isinstance(v, (list, tuple)):
            yield from ((f"{name}[{i}]", item) for i, item in enumerate(v[:MAX_ITEMS]) if isinstance(item, module_cls))
        elif isinstance(v, dict):
            yield from ((f"{name}[{key!r}]", item) for key, item in list(v.items())[:MAX_ITEMS]
                        if isinstance(item, module_cls) and isinstance(key, (str, int)))
        elif not isinstance(v, _NOT_HOLDERS):
            attrs = getattr(v, "__dict__", None)
            if type(attrs) is dict:
                yield from ((f"{name}.{attr}", item) for attr, item in list(attrs.items())[:MAX_ITEMS]
                            if isinstance(item, module_cls) and attr.isidentifier())


def outermost_modules(frames: list, module_cls: type, touched: list) -> list:
    """The outermost modules `frames` hold (module_holders of each frame's locals, innermost frame first, in the order
    met); a module inside another one met is not an owner of its own. The function frames whose locals it read go
    into `touched`."""
    found: dict[int, Any] = {}
    for f in frames:
        if f.f_code.co_flags & _CO_OPTIMIZED:
            touched.append(f)
        for _, m in module_holders(list(f.f_locals.items()), module_cls):
            found.setdefault(id(m), m)
    inner: set[int] = set()
    for m in found.values():
        inner.update(id(sub) for sub in m.modules() if sub is not m)
    return [m for i, m in found.items() if i not in inner]


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


def drop_snapshots(frames: list) -> None:
    """Empty the locals snapshots this look-up made (NOTE [leaf names]), unless a tracer may be reading them."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return
    for f in frames:
        if f.f_code.co_flags & _CO_OPTIMIZED:
            f.f_locals.clear()
