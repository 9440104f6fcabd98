"""Where the bridge finds the names the user's code gives leaves, for the shared rule (NOTE [leaf names] in
tracer/recording/leaf_names.py): the user's frames at a backward call, the modules they hold, the variables they
bind.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from agdb.tracer.recording.leaf_names import NAME_FRAMES, bound_names

_MODULE = torch.nn.Module


def user_frames(frame: Any, is_library: Callable[[str], bool], most: int = NAME_FRAMES) -> list:
    """The first `most` frames of the user's code from `frame` outwards (library frames skipped)."""
    users = []
    f = frame
    while f is not None and len(users) < most:
        if not is_library(f.f_code.co_filename):
            users.append(f)
        f = f.f_back
    return users


def leaf_variables(frame: Any, is_library: Callable[[str], bool], read: list) -> dict[int, str]:
    """id(leaf tensor) -> the variable bound to it, for a leaf that is no module's parameter (`x`, `w`): the first
    name bound_names gives it from the user's frames outward from `frame` (the engine's rule, NOTE [leaf names] in
    tracer/recording/leaf_names.py), read once for all the leaves a walk meets. Read when a backward call begins, so a
    leaf only a returned function's frame named has none. The ids hold while the frames hold the tensors: use the map
    at once. The frames whose locals it read go into `read` (NOTE [stale locals])."""
    names: dict[int, str] = {}
    for name, v in bound_names(user_frames(frame, is_library), read):
        # A view is never asked for its grad_fn (a stale one would make a node: NOTE [line culprits]), and a leaf
        # is no view.
        if isinstance(v, torch.Tensor) and v._base is None and v.requires_grad and v.grad_fn is None:
            names.setdefault(id(v), name)
    return names
