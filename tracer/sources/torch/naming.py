"""Names: which code is the user's (`is_library`), the names of the nodes an op made (from its outputs), and the
names the user's code gives leaves, for the shared rule (NOTE [leaf names] in tracer/recording/leaf_names.py): the
user's frames at a backward call, the modules they hold, the variables they bind.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import threading
from typing import Any, Callable

import torch

from agdb.tracer.recording.leaf_names import NAME_FRAMES, CallNames, ParameterPaths
from agdb.tracer.sources.torch.state import BridgeState

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_AGDB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep  # tracer/
_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep
_SITE_DIRS = tuple({sysconfig.get_paths()[k] + os.sep for k in ("purelib", "platlib")})
_SKIP = (_TORCH_DIR, _AGDB_DIR)
_PYTHON = (_STDLIB_DIR, "<frozen ")


def is_library(filename: str) -> bool:
    """Whether code from `filename` is torch's, agdb's or Python's own (never the user's line; a library installed
    in site-packages is the user's, as is code run from a string)."""
    return filename.startswith(_SKIP) or (filename.startswith(_PYTHON) and not filename.startswith(_SITE_DIRS))


# -- the nodes an op made ----------------------------------------------------------------------------------------
def node_names(func: Any, out: Any, start: int, after: int) -> list[str]:
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


# -- leaves ------------------------------------------------------------------------------------------------------
class LeafNames:
    """The names of the AccumulateGrads' leaves, looked up when a walk meets a new one from the frames of the
    backward call (NOTE [leaf names] in tracer/recording/leaf_names.py: the engine's rule, and its CallNames) and
    written through the builder, as the engine's Recorder writes them."""

    def __init__(self, shared: BridgeState) -> None:
        self.shared = shared
        self._local = shared.local  # call_frame, names: set by a backward call as it begins
        self._paths = ParameterPaths(torch.nn.Module)
        self.on_leaf: Callable[[int, Any], None] | None = None  # told of each new AccumulateGrad (ddp.py)

    def leaf_name(self, key: int, var: Any) -> None:
        """Name AccumulateGrad `key`'s leaf from the frames of the backward call that met it, if they name it."""
        if self.on_leaf is not None:
            self.on_leaf(key, var)
        local = self._local
        names = getattr(local, "names", None)
        if names is None:
            frame = getattr(local, "call_frame", None)
            near = user_frames(frame, is_library)
            names = local.names = CallNames(
                self._paths, torch.nn.Parameter, near, lambda: user_frames(frame, is_library, sys.getrecursionlimit()),
                near, is_variable=_is_leaf)
        read = len(names.touched)
        name = names.name(var)
        if len(names.touched) > read:
            self._read_locals(names.touched[read:])
        if name is not None:
            self.shared.b.leaf_name(key, name)

    def _read_locals(self, frames: list) -> None:
        """The bridge read these frames' locals, all of this thread (NOTE [stale locals] in lines.py): on the thread
        the line tracer runs on, it refreshes them at their next events. Elsewhere (culprits="mode", another
        thread) they keep the snapshot, as after a `locals()` call of the program's own: it is the dict `locals()`
        returns, which the program may hold, so it is never emptied."""
        lines = self.shared.lines
        if lines is not None and lines.thread == threading.get_ident():
            lines.touch(frames)


def _is_leaf(v: Any) -> bool:
    """A leaf tensor: what a variable may name besides a parameter. A view is never asked for its grad_fn (a stale
    one would make a node: NOTE [line culprits]), and a leaf is no view."""
    return isinstance(v, torch.Tensor) and v._base is None and v.requires_grad and v.grad_fn is None


def user_frames(frame: Any, is_library: Callable[[str], bool], most: int = NAME_FRAMES) -> list:
    """The first `most` frames of the user's code from `frame` outwards (library frames skipped)."""
    users = []
    f = frame
    while f is not None and len(users) < most:
        if not is_library(f.f_code.co_filename):
            users.append(f)
        f = f.f_back
    return users
