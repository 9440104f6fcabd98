"""Backward nodes: the Node base class, hooks, AccumulateGrad, GraphRoot, Identity and Error."""
from __future__ import annotations

import itertools
import os
import sys
import threading
import traceback
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from . import _observer
from ._state import UINT64_MAX, tls
from ._version import any_writes, version_of

if TYPE_CHECKING:
    from ._tensor import Tensor

Edge = tuple  # (Node | None, input_nr): PyTorch's Edge; (None, 0) is an invalid edge.

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


class _Anomaly:
    """Process-wide anomaly-mode switches (PyTorch keeps them global, not per thread)."""

    enabled = False
    check_nan = True


anomaly = _Anomaly()


class _Freed:
    """What a released saved-tensor slot holds (None means the node saved nothing there)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<freed saved tensor>"


_FREED = _Freed()


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor", "bool": "BoolTensor"}


def _op_name(node_name: str) -> str:
    """How PyTorch's saved-tensor message names a node (checked on torch 2.13): MulBackward0 -> Mul, PowBackward2
    -> Pow2, a custom Function's FBackward -> F (the last "Backward" goes); torch::autograd::CopySlices and the
    like stay whole."""
    if "::" in node_name:
        return node_name
    head, found, tail = node_name.rpartition("Backward")  # BackwardHookFunctionBackward -> BackwardHookFunction
    return head + ("" if tail == "0" else tail) if found else node_name


def modified_in_place(tensor: Any, grad_fn: Any, output_nr: int, now: int, expected: int) -> str:
    """PyTorch's text for a saved tensor that an in-place op changed after it was saved."""
    kind = _TYPE_NAMES.get(str(tensor._data.dtype), "Tensor")
    shape = ", ".join(str(d) for d in tensor._data.shape)
    which = ""
    if grad_fn is not None:
        which = f", which is output {output_nr} of {_op_name(grad_fn.name())},"
    hint = ("Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
            "variable in question was changed in there or anywhere later. Good luck!" if anomaly.enabled else
            "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
            "torch.autograd.set_detect_anomaly(True, check_nan=False).")
    return (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[torch.{kind} [{shape}]]{which} is at version {now}; expected version {expected} instead. {hint}")


_uids = itertools.count(1)

_ENGINE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_stack() -> list[str]:
    """The current Python stack as traceback.format_stack gives it, ending at the caller's own line.

    Frames inside the engine at the top of the stack are dropped: PyTorch's ops are C++, so its
    stored stacks end at the user's line.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_ENGINE_DIR):
        frame = frame.f_back
    return traceback.format_stack(frame) if frame is not None else []


class RemovableHandle:
    """A handle that removes the hook it was returned for, like torch.utils.hooks.RemovableHandle."""

    _next_id = 0

    def __init__(self, hooks_dict: dict) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict) if hooks_dict is not None else None
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        """Remove the hook; removing twice is harmless."""
        hooks = self.hooks_dict_ref() if self.hooks_dict_ref is not None else None
        if hooks is not None and self.id in hooks:
            del hooks[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class _HookDict(OrderedDict):
    """An ordered dict of hooks; a class of its own so weakrefs to it work."""


def add_hook(hooks: _HookDict, fn: Callable) -> RemovableHandle:
    """Store `fn` in `hooks` under a fresh handle id and return the handle."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class InputMetadata:
    """Shape, dtype and device of one input slot of a node (one forward output)."""

    __slots__ = ("shape", "dtype", "device", "is_defined")

    def __init__(self, shape: tuple, dtype: Any, device: str = "cpu", is_defined: bool = True) -> None:
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.is_defined = is_defined

    def __repr__(self) -> str:
        return f"InputMetadata(shape={list(self.shape)}, dtype={self.dtype}, device={self.device!r})"


UNDEFINED_INPUT = InputMetadata((), None, "cpu", False)


def hook_name(hook: Callable) -> str:
    """The name PyTorch quotes in hook error messages."""
    name = getattr(hook, "__name__", None)
    return name if isinstance(name, str) else type(hook).__name__


class Node:
    """A backward function in the autograd graph, with PyTorch's Python API and a few additions."""

    __slots__ = (
        "_seq", "_topo", "_has_parent", "next_edges", "_input_metadata", "_pre_hooks", "_post_hooks",
        "_tensor_pre_hooks", "_retains_grad_hooks", "_metadata", "thread_id", "_released", "_parent", "_uid",
        "_saved_versions", "__weakref__",
    )

    _name: str | None = None
    _saved_tensor_names: tuple[str, ...] = ()
    """Attributes holding saved tensors, in the order PyTorch saves them (and calls pack hooks); they are freed
    after the node runs unless retain_graph. Each reads as `_saved_<name>` and `_raw_saved_<name>`."""
    _saved_values: tuple[str, ...] = ()
    """Attributes holding the other saved arguments (sizes, dims, scalars), read as `_saved_<name>` and kept
    after backward, as PyTorch's generated nodes expose them."""
    _saved_int64: tuple[str, ...] = ()
    """Those of `_saved_values` that PyTorch stores as int64 (dims, indices): they read back unsigned."""

    def __init__(self, sequence_nr: int | None = None) -> None:
        # Two constructors, as in PyTorch (engine-semantics §1.2): an explicit seq leaves the counter alone.
        self._uid = next(_uids)  # unique for the process, unlike id(): observers key nodes by it
        if sequence_nr is None:
            sequence_nr = tls.seq_nr
            tls.seq_nr = sequence_nr + 1
            if _observer.observers:
                _observer.notify("seq_nr_bumped", self, sequence_nr)
        self._seq = sequence_nr
        self._topo = 0
        self._has_parent = False
        self.next_edges: list[Edge] = []
        self._input_metadata: list[InputMetadata] = []
        self._pre_hooks: _HookDict | None = None
        self._post_hooks: _HookDict | None = None
        self._tensor_pre_hooks: list | None = None
        self._retains_grad_hooks: dict | None = None
        self._metadata: dict | None = None
        self._released = False
        self._saved_versions: tuple | None = None  # (tensor, version, grad_fn, output_nr) when saved
        self._parent = None
        self.thread_id = threading.get_ident()
        if anomaly.enabled:
            # engine-semantics §11.3: each node stores its forward stack and the node being evaluated.
            self.metadata["traceback_"] = _user_stack()
            self._parent = tls.current_node

    # -- PyTorch's Node API ------------------------------------------------------------------------
    def name(self) -> str:
        """The node's name as PyTorch prints it (`MulBackward0`, `torch::autograd::AccumulateGrad`)."""
        return self._name or type(self).__name__

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """One `(node_or_None, input_nr)` pair per forward input slot."""
        return tuple(self.next_edges)

    @property
    def metadata(self) -> dict:
        """A persistent per-node dict; holds `traceback_` under anomaly mode."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def _sequence_nr(self) -> int:
        return self._seq

    def _set_sequence_nr(self, sequence_nr: int) -> None:
        self._seq = int(sequence_nr)

    def _topological_nr(self) -> int:
        """Longest path to a sink (engine-semantics §2). Reading it freezes the node, as in PyTorch."""
        self._has_parent = True
        return self._topo

    def num_inputs(self) -> int:
        """Number of input slots (forward outputs) of this node."""
        return len(self._input_metadata)

    def input_metadata(self, index: int) -> InputMetadata:
        """Metadata of input slot `index`."""
        return self._input_metadata[index]

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """`fn(grad_outputs) -> tuple | None` runs before the node; returns a removable handle."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return add_hook(self._pre_hooks, fn)

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """`fn(grad_inputs, grad_outputs) -> tuple | None` runs after the node."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        return add_hook(self._post_hooks, fn)

    def _register_hook_dict(self, tensor: Tensor) -> None:
        """Attach `tensor`'s hook dict as a tensor pre-hook of this node (its first hook)."""
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = []
        self._tensor_pre_hooks.append((tensor._backward_hooks, tensor._output_nr))

    @property
    def requires_grad(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    def __getattr__(self, attr: str) -> Any:
        # `_saved_self` and friends, as generated nodes expose them (NOTE [saved tensors] in engine/_saved.py).
        if attr.startswith("_saved_") or attr.startswith("_raw_saved_"):
            from . import _saved

            value = _saved.saved_attribute(self, attr)
            if value is not _saved._MISSING:
                return value
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    def __dir__(self) -> list[str]:
        # The saved values are attributes in PyTorch; the engine's bookkeeping under the same prefix is not.
        cls = type(self)
        names = [n for n in super().__dir__() if not n.startswith("_saved_")]
        names += [f"_saved_{n}" for n in cls._saved_tensor_names + cls._saved_values]
        names += [f"_raw_saved_{n}" for n in cls._saved_tensor_names]
        return sorted(names)

    def _saved_items(self) -> list[tuple[Any, Any]]:
        """(key, slot value) of each saved tensor, in saving order; a slot holding a tuple of tensors (index's
        `indices`) gives one item per element, keyed (name, position)."""
        items = []
        for name in self._saved_tensor_names:
            value = getattr(self, name, None)
            if type(value) is tuple:
                items.extend(((name, i), v) for i, v in enumerate(value))
            else:
                items.append((name, value))
        return items

    def _set_saved(self, key: Any, value: Any) -> None:
        if type(key) is tuple:
            name, i = key
            values = list(object.__getattribute__(self, name))
            values[i] = value
            object.__setattr__(self, name, tuple(values))
        else:
            object.__setattr__(self, key, value)

    # -- what the engine uses ---------------------------------------------------------------------
    def set_next_edges(self, edges: list[Edge]) -> None:
        """Attach next edges and raise topological_nr accordingly (engine-semantics §2.2)."""
        self.next_edges = edges
        for edge in edges:
            self._update_topological_nr(edge)

    def _update_topological_nr(self, edge: Edge) -> None:
        if self._has_parent:
            raise AssertionError(
                "Cannot update a node's topological_nr after it already has a parent. If we allow "
                "this, we can no longer guarantee that a parent's topo_nr is always greater than "
                "those of all its children")
        child = edge[0]
        if child is not None:
            child_topo = child._topological_nr()
            if self._topo <= child_topo:
                self._topo = child_topo + 1

    def tensor_pre_hooks(self) -> list:
        """(hooks dict, slot) pairs from Tensor.register_hook on this node's outputs."""
        return self._tensor_pre_hooks or ()

    def apply(self, grads: list) -> list:
        """The backward formula: grads w.r.t. outputs in, grads w.r.t. inputs out."""
        raise NotImplementedError(f"{self.name()} does not implement apply")

    def release_variables(self) -> None:
        """Free saved tensors so a second backward through this node raises (engine-semantics §5.4).

        A slot that held a tensor keeps _FREED, so that `_saved_<name>` can tell it from one that saved None.
        """
        names = self._saved_tensor_names
        if names:
            if self._saved_versions.__class__ is not tuple and self._saved_versions is not None:
                from . import _saved

                _saved.release(self)
            for name in names:
                if getattr(self, name, None) is not None:
                    object.__setattr__(self, name, _FREED)
                    # torch saves only what the grads asked for need: with nothing saved (addmm of a bias
                    # alone), nothing is freed and a second backward runs again
                    self._released = True

    def check_saved(self) -> None:
        """Raise PyTorch's errors for saved tensors: freed (backward twice), or modified in place since.

        Off the common path (hooks, NOTE [saved tensors] in engine/_saved.py), unpack them into their slots.
        """
        if self._released:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        records = self._saved_versions
        if records is None:
            return
        if records.__class__ is not tuple:
            from . import _saved

            return _saved.unpack_into_slots(self)
        if not any_writes():  # no in-place write ever: versions all 0
            return
        for tensor, version, grad_fn, output_nr in records:
            now = version_of(tensor._data)
            if now != version:
                # SavedVariable::unpack names a saved input's grad_fn as it is now (an in-place op since may have
                # rebased it; a view's is regenerated by reading it), and a saved output's node as this one.
                if grad_fn is not None and grad_fn is not self:
                    grad_fn = tensor.grad_fn or self
                raise RuntimeError(modified_in_place(tensor, grad_fn, output_nr, now, version))

    def should_compute_output(self, index: int) -> bool:
        """task_should_compute_output: the edge is valid and, under exec_info, leads somewhere needed."""
        fn = self.next_edges[index][0]
        if fn is None:
            return False
        graph_task = tls.current_graph_task
        if graph_task is not None and graph_task.exec_info:
            info = graph_task.exec_info.get(fn)
            return info is not None and info.should_execute()
        return True

    def device(self) -> str:
        """First non-CPU device among the input metadata, else cpu (engine-semantics §12.1)."""
        for meta in self._input_metadata:
            if meta.is_defined and meta.device != "cpu":
                return meta.device
        return "cpu"


class AccumulateGrad(Node):
    """Sink node of a leaf: writes the incoming grad into `variable.grad` (engine-semantics §8)."""

    __slots__ = ("variable",)
    _name = "torch::autograd::AccumulateGrad"

    def __init__(self, variable: Tensor) -> None:
        super().__init__(UINT64_MAX)  # runs as early as possible and bumps nothing (engine-semantics §1.3)
        self.variable = variable
        self._input_metadata = [InputMetadata(variable.shape, variable.dtype, variable._device)]

    def tensor_pre_hooks(self) -> list:
        # The leaf's hooks are read lazily, so hooks registered after this node exists still run.
        hooks = self.variable._backward_hooks
        return ((hooks, 0),) if hooks else ()

    def apply(self, grads: list) -> list:
        variable = self.variable
        if variable.grad_fn is not None:
            raise RuntimeError("leaf variable has been moved into the graph interior")
        new_grad = grads[0]
        if new_grad is not None and variable.requires_grad:
            # torch steals new_grad when nothing else holds it: use_count() <= 1 + (post hooks hold the
            # inputs list too). Here the one expected holder is the list given to apply (two with post hooks).
            refs = sys.getrefcount(new_grad) - 2  # less getrefcount's argument and the local `new_grad`
            _tensor_mod().accumulate_into_grad(variable, new_grad, refs <= 1 + bool(self._post_hooks))
            if _observer.observers:
                _observer.notify("grad_accumulated", tls.current_graph_task, self, variable, variable._grad)
        hooks = variable._post_acc_hooks
        if hooks:
            from ._hooks import check_single_result  # only when post-accumulate hooks exist

            for hook in list(hooks.values()):
                res = hook(variable)
                if res is not None and res is not variable:
                    # PyTorch runs these through its generic hook checks, then refuses any change.
                    check_single_result(variable, res, hook)
                    raise RuntimeError("Tensor post accumulate grad hooks should return None.")
                if _observer.observers:
                    _observer.notify("hook_ran", tls.current_graph_task, self, "post_accumulate_grad", hook)
        return []


def _tensor_mod():
    """engine._tensor, imported on first use: it imports this module."""
    from . import _tensor

    return _tensor


class GraphRoot(Node):
    """The dummy root of a backward with several roots; returns the root grads (engine-semantics §3.1)."""

    __slots__ = ("outputs",)
    _name = "GraphRoot"

    def __init__(self, root_edges: list[Edge], grads: list) -> None:
        super().__init__()  # a numbered node: a multi-root backward bumps the counter by 1
        self.outputs = list(grads)
        self.set_next_edges(list(root_edges))

    def apply(self, grads: list) -> list:
        return list(self.outputs)


class Identity(Node):
    """Placeholder for an `inputs=` tensor with no grad accumulator yet: never reachable."""

    __slots__ = ()
    _name = "torch::autograd::Identity"

    def apply(self, grads: list) -> list:
        return list(grads)


class Error(Node):
    """A node that raises when run; seq 2**64-1 so it runs at once (engine-semantics §1.3)."""

    __slots__ = ("msg",)
    _name = "torch::autograd::Error"

    def __init__(self, msg: str, sequence_nr: int = UINT64_MAX) -> None:
        super().__init__(sequence_nr)
        self.msg = msg

    def apply(self, grads: list) -> list:
        raise RuntimeError(self.msg)


class DelayedError(Node):
    """Wraps outputs so that differentiating them raises; a numbered node (engine-semantics §1.4, §10.9)."""

    __slots__ = ("msg",)
    _name = "torch::autograd::DelayedError"

    def __init__(self, msg: str) -> None:
        super().__init__()
        self.msg = msg

    def apply(self, grads: list) -> list:
        raise RuntimeError(self.msg)
