"""Custom `autograd.Function`: the ctx is the backward node, as in PyTorch (engine-semantics §10)."""
from __future__ import annotations

import functools
import inspect
from typing import Any

import numpy as np

from .. import _observer, _views
from .._node import ERR_BACKWARD_TWICE, UNDEFINED_INPUT, DelayedError, Error, InputMetadata, Node
from .._state import tls
from .._tensor import Tensor, make_tensor
from .._version import saved_versions, version_of


class FunctionCtx:
    """What `ctx` offers inside forward and backward."""

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors for backward; checked (tensors or None only) once forward returns."""
        self.to_save = tensors

    def mark_non_differentiable(self, *args: Tensor) -> None:
        """These outputs will not require grad; their grads still arrive materialised as zeros."""
        self.non_differentiable = args

    def mark_dirty(self, *args: Tensor) -> None:
        """Declare inputs forward modified in place (recorded only: their history is not rebased onto this node)."""
        self.dirty_tensors = args

    def set_materialize_grads(self, value: bool) -> None:
        """Whether undefined output grads reach backward as zeros (default) or as None."""
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to save_for_backward, unpacked one by one as PyTorch does (a saved output comes back
        as a new tensor object; hooks run); raises once backward has freed them or one was modified in place."""
        from .._saved import unpack_all

        if self._released:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        return unpack_all(self)

    @property
    def _raw_saved_tensors(self) -> tuple:
        """One SavedTensor per saved value (None included), for `register_hooks`."""
        from .._saved import saved_records

        if self._released:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        return tuple(saved_records(self).by_key.values())


class BackwardCFunction(Node, FunctionCtx):
    """The PyNode of a custom Function: `<Class>Backward`, which is also the `ctx` object."""

    _forward_cls: type
    _unpacks_for_itself = True  # see Node._unpacks_for_itself

    def __init__(self) -> None:
        super().__init__()  # a numbered node, even under no_grad (engine-semantics §1.4)
        self.to_save = None
        self._saved = None
        self.non_differentiable = ()
        self.dirty_tensors = ()
        self.materialize_grads = True
        self.needs_input_grad: tuple = ()
        self.is_variable_input: list[bool] = []
        self._output_info: list = []

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        cls = type(self)
        return f"<{cls.__module__}.{cls.__qualname__} object at {id(self):#x}>"

    def apply(self, grads: list) -> list:  # type: ignore[override]
        """PyNode::apply: materialise grads, call backward, check and map the result (engine-semantics §10.5–§10.6)."""
        args = []
        for i, g in enumerate(grads):
            if g is None and self.materialize_grads and self._output_info[i] is not None:
                shape, np_dtype, device = self._output_info[i]
                g = make_tensor(np.zeros(shape, dtype=np_dtype), device=device)
            args.append(g)
        cls = self._forward_cls
        backward_fn = cls.backward
        if getattr(cls, "vjp", Function.vjp) is not Function.vjp:
            if backward_fn is not Function.backward:
                raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is not allowed. "
                                   "You should only implement one of them.")
            backward_fn = cls.vjp
        result = backward_fn(self, *args)
        if not isinstance(result, tuple):
            result = (result,)
        n_inputs = len(self.is_variable_input)
        if len(result) > n_inputs and all(r is None for r in result[n_inputs:]):
            result = result[:n_inputs]
        if len(result) != n_inputs:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients (expected "
                               f"{n_inputs}, got {len(result)})")
        out = []
        for i, r in enumerate(result):
            if not self.is_variable_input[i]:
                if r is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at position {i + 1}, but "
                        "the corresponding forward input was not a Variable")
                continue
            if r is not None and not isinstance(r, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
            out.append(r)
        return out

    def release_variables(self) -> None:
        if self._saved_versions.__class__ is not tuple and self._saved_versions is not None:
            from .._saved import release

            release(self)
        elif self._saved_versions is not None:  # its records hold a saved output too (Node.release_variables)
            self._saved_versions = None
        self._saved = None
        self._released = True

    def _saved_items(self) -> list:
        return list(enumerate(self._saved or ()))

    def _set_saved(self, key: Any, value: Any) -> None:
        self._saved[key] = value


class FunctionMeta(type):
    """Gives every Function subclass its `<Name>Backward` node class."""

    def __init__(cls, name: str, bases: tuple, attrs: dict) -> None:
        # Like PyTorch's, the node type lives in this module: engine.autograd.function.<Name>Backward.
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Base class for custom differentiable operations: define forward and backward as staticmethods."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method.")

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def vjp(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run forward with grad mode off and attach `<Name>Backward` to the outputs (engine-semantics §10.2)."""
        has_setup_context = cls.setup_context is not Function.setup_context
        if kwargs or has_setup_context:
            args = _bind_args(cls.forward, has_setup_context, args, kwargs)
        return _apply(cls, args, has_setup_context)


def _bind_args(forward: Any, has_setup_context: bool, args: tuple, kwargs: dict) -> tuple:
    sig = inspect.signature(forward)
    if not has_setup_context:
        # old style: forward(ctx, *args); bind against a placeholder ctx
        bound = sig.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.args[1:])
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args)


def _apply(cls: type, args: tuple, has_setup_context: bool) -> Any:
    from .._ops import collect_next_edges

    needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
    is_executable = tls.grad_enabled and any(needs_input_grad)
    tensor_inputs = [a for a in args if isinstance(a, Tensor)]
    # torch unpacks the inputs and collects their edges first: a view whose base was written in place gets its
    # AsStridedBackward0 (a seq_nr) before the node does
    next_edges = collect_next_edges(tensor_inputs) if is_executable else None
    ctx = cls._backward_cls()  # takes the seq_nr before forward runs (engine-semantics §10.2 step 4)
    ctx.is_variable_input = [isinstance(a, Tensor) for a in args]
    if is_executable:
        ctx.set_next_edges(next_edges)
    ctx.needs_input_grad = needs_input_grad
    prev = tls.grad_enabled
    tls.grad_enabled = False
    try:
        if has_setup_context:
            output = cls.forward(*args)
            cls.setup_context(ctx, args, output)
        else:
            output = cls.forward(ctx, *args)
    finally:
        tls.grad_enabled = prev
    return _process_outputs(ctx, tensor_inputs, output, is_executable)


def _process_outputs(ctx: BackwardCFunction, tensor_inputs: list, output: Any, is_executable: bool) -> Any:
    is_tuple = isinstance(output, tuple)
    outputs = output if is_tuple else (output,)
    input_ids = {id(t) for t in tensor_inputs}
    non_diff_ids = {id(t) for t in ctx.non_differentiable}
    result, metadata, output_info = [], [], []
    views: list = []  # (alias, input) for inputs returned as-is, which become views of them
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            result.append(o)
            metadata.append(UNDEFINED_INPUT)
            output_info.append(None)
            continue
        output_info.append((o._data.shape, o._data.dtype, o._device))
        is_input = id(o) in input_ids
        differentiable = is_executable and id(o) not in non_diff_ids and o.dtype.is_floating_point
        if not differentiable:
            metadata.append(UNDEFINED_INPUT)
            if not o.requires_grad:
                o = _alias(o, is_executable and views) if is_input else o
            else:
                o = o.detach() if is_input else o.detach_()
        else:
            metadata.append(InputMetadata(o._data.shape, o.dtype, o._device))
            if is_input:
                o = _alias(o, views)
            o.grad_fn, o._output_nr, o._requires_grad = ctx, i, True
        result.append(o)
    ctx._output_info = output_info
    if is_executable:  # views among the outputs may not be written in place later (engine/_views.py)
        n_differentiable = sum(meta is not UNDEFINED_INPUT for meta in metadata)
        meta = _views.MULTI_OUTPUT_NODE if n_differentiable > 1 else _views.IN_CUSTOM_FUNCTION
        for view, of in views:
            _views.mark_view(view, of, meta, version_of(of._data))
        for o, info in zip(result, metadata, strict=True):
            if info is not UNDEFINED_INPUT and o._view is not None:
                o._view.creation_meta = meta
    if is_executable:
        ctx._input_metadata = metadata
        if ctx.to_save is not None:
            for i, t in enumerate(ctx.to_save):
                if t is not None and not isinstance(t, Tensor):
                    raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                    f"{type(t).__name__}")
            ctx._saved = list(ctx.to_save)
            from .._ops._common import keep_outputs_unowned

            # packs them under saved_tensors_hooks; a saved output is kept without its grad_fn, as a generated node's
            ctx._saved_versions = keep_outputs_unowned(ctx, saved_versions(ctx._saved, ctx))
            ctx.to_save = None  # as torch's: saved now (and a saved output must not keep its own node alive)
        if _observer.observers:
            _observer.notify("node_created", ctx)
    return tuple(result) if is_tuple else result[0]


def _alias(t: Tensor, views: list | bool) -> Tensor:
    """view_as(self) with no grad: a new tensor object sharing data; appended to `views` when it is a list.

    An input returned as-is by a recorded Function is a view that PyTorch refuses to modify in place later."""
    out = make_tensor(t._data.view(), device=t._device)
    if isinstance(views, list):
        views.append((out, t))
    return out


def once_differentiable(fn: Any) -> Any:
    """Run backward under no_grad; differentiating its result raises (engine-semantics §10.9)."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        prev = tls.grad_enabled
        tls.grad_enabled = False
        try:
            outputs = fn(ctx, *args)
        finally:
            tls.grad_enabled = prev
        if not tls.grad_enabled:
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        was_tuple = isinstance(outputs, tuple)
        outputs = outputs if was_tuple else (outputs,)
        wrapped = _delayed_error(
            "trying to differentiate twice a function that was marked with @once_differentiable", outputs)
        return wrapped if was_tuple else wrapped[0]

    return wrapper


def _delayed_error(msg: str, outputs: tuple) -> tuple:
    """DelayedError: a numbered node whose outputs carry an Error grad_fn (seq 2**64-1)."""
    from .._ops import collect_next_edges

    DelayedError(msg)
    fakes = []
    for v in outputs:
        if isinstance(v, Tensor):
            v = v.detach()
            v._requires_grad = True
        fakes.append(v)
    err = Error(msg)
    err.set_next_edges(collect_next_edges([v if isinstance(v, Tensor) else None for v in fakes]))
    result = []
    for i, v in enumerate(fakes):
        if isinstance(v, Tensor):
            out = make_tensor(v._data, device=v._device)
            out.grad_fn, out._output_nr, out._requires_grad = err, i, True
            err._input_metadata.append(InputMetadata(out._data.shape, out.dtype, out._device))
            result.append(out)
        else:
            err._input_metadata.append(UNDEFINED_INPUT)
            result.append(v)
    return tuple(result)
