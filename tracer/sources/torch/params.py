"""Names the user's code gives leaves: the nn.Modules it holds, for the names of parameters (NOTE [parameter names]),
and its variables, for other leaves (leaf_variables).

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import types
from typing import Any, Callable, Iterator

import torch

from agdb.tracer.recording.leaf_names import NAME_FRAMES, bound_names

_MODULE = torch.nn.Module
_NOT_HOLDERS = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
MAX_ITEMS = 64
"""Items looked at per list, tuple or dict the user's frames hold (a list of many small modules is not read whole)."""


def held_modules(frame: Any, is_library: Callable[[str], bool], seen: set[int], read: list) -> list:
    """NOTE [parameter names]
    A parameter's AccumulateGrad is named after the module owning it (`Sequential.0.weight`), found when a
    backward call begins rather than by a global module forward pre-hook: that hook puts every module call of the
    forward on nn.Module's slow path and costs most of a recorded MLP forward. The modules are the ones the
    user's frames hold, from `frame` outwards: in a variable, in a list, tuple or dict in one, or as an
    attribute of an object in one (`self.model`), in the order met; a module inside another one met is not an
    owner of its own (the outermost names the parameter). A module that only a temporary held (`Net()(x)`)
    is not found, and its parameters keep the leaf's own name. Nothing when every module found is in `seen` (ids
    of modules an earlier call returned): a model's submodules are walked once, not at every backward. The frames
    whose locals it read go into `read` (NOTE [stale locals] in lines.py)."""
    found: dict[int, Any] = {}
    f = frame
    while f is not None:
        if not is_library(f.f_code.co_filename):
            read.append(f)
            for v in list(f.f_locals.values()):
                for m in _modules_in(v):
                    found.setdefault(id(m), m)
        f = f.f_back
    if all(i in seen for i in found):
        return []
    inner: set[int] = set()
    for m in found.values():
        inner.update(id(sub) for sub in m.modules() if sub is not m)
    return [m for i, m in found.items() if i not in inner]


def leaf_variables(frame: Any, is_library: Callable[[str], bool], read: list) -> dict[int, str]:
    """id(leaf tensor) -> the variable bound to it, for a leaf that is no module's parameter (`x`, `w`): the first
    name bound_names gives it from the user's frames outward from `frame` (the engine's rule, NOTE [leaf names] in
    tracer/recording/leaf_names.py), read once for all the leaves a walk meets. Read when a backward call begins, so a
    leaf only a returned function's frame named has none. The ids hold while the frames hold the tensors: use the map
    at once. The frames whose locals it read go into `read` (NOTE [stale locals])."""
    users = []
    f = frame
    while f is not None and len(users) < NAME_FRAMES:
        if not is_library(f.f_code.co_filename):
            users.append(f)
        f = f.f_back
    names: dict[int, str] = {}
    for name, v in bound_names(users, read):
        # A view is never asked for its grad_fn (a stale one would make a node: NOTE [line culprits]), and a leaf
        # is no view.
        if isinstance(v, torch.Tensor) and v._base is None and v.requires_grad and v.grad_fn is None:
            names.setdefault(id(v), name)
    return names


def _modules_in(v: Any) -> Iterator[Any]:
    if isinstance(v, _MODULE):
        yield v
    elif isinstance(v, (list, tuple)):
        yield from (item for item in v[:MAX_ITEMS] if isinstance(item, _MODULE))
    elif isinstance(v, dict):
        yield from (item for item in list(v.values())[:MAX_ITEMS] if isinstance(item, _MODULE))
    elif not isinstance(v, _NOT_HOLDERS) and not isinstance(v, torch.Tensor):
        attrs = getattr(v, "__dict__", None)
        if type(attrs) is dict:
            yield from (item for item in list(attrs.values())[:MAX_ITEMS] if isinstance(item, _MODULE))
