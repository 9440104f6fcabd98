"""Module hooks beyond a module's own dicts: the global hooks of every module, and module backward hooks.

A module with full backward hooks or backward pre-hooks passes its tensor inputs, and then its tensor outputs,
through `BackwardHookFunction`, an identity custom Function: each call makes one BackwardHookFunctionBackward
node (one seq_nr). The post-hook of the outputs' node collects grad_output and runs the backward pre-hooks;
the post-hook of the inputs' node runs the full backward hooks with grad_input and grad_output. Learned from
torch/utils/hooks.py (BackwardHook) and torch/nn/modules/module.py of PyTorch 2.13. Imports the engine only.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
import weakref
from collections import OrderedDict
from typing import Any, Callable

from .._node import RemovableHandle
from .._state import tls
from .._tensor import Tensor
from ..autograd.function import Function

__all__ = [
    "register_module_forward_pre_hook", "register_module_forward_hook", "register_module_backward_hook",
    "register_module_full_backward_pre_hook", "register_module_full_backward_hook",
]

_global_backward_pre_hooks: dict[int, Callable] = OrderedDict()
_global_backward_hooks: dict[int, Callable] = OrderedDict()
_global_is_full_backward_hook: bool | None = None
"""Whether the global backward hooks are full ones (True), the deprecated kind (False), or none yet (None)."""
_global_forward_pre_hooks: dict[int, Callable] = OrderedDict()
_global_forward_hooks: dict[int, Callable] = OrderedDict()
_global_forward_hooks_with_kwargs: dict[int, bool] = OrderedDict()

_ERR_MIXED_GLOBAL = ("Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
                     "Please use only one of them.")


def has_any_global_hook() -> bool:
    """Whether any global module hook is registered (a module call then takes the slow path)."""
    return bool(_global_backward_pre_hooks or _global_backward_hooks or _global_forward_pre_hooks
                or _global_forward_hooks)


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """`hook(module, args)` runs before every module's forward, before the module's own pre-hooks."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """`hook(module, args, output)` runs after every module's forward, before the module's own forward hooks."""
    if always_call:
        raise NotImplementedError("agdb's engine does not implement always_call= forward hooks")
    handle = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    return handle


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """The deprecated kind of backward hook, for every module (see Module.register_backward_hook)."""
    return _register_global_backward_hook(hook, full=False)


def _register_global_backward_hook(hook: Callable, full: bool) -> RemovableHandle:
    """One kind of global backward hook at a time, full or deprecated, as torch allows."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError(_ERR_MIXED_GLOBAL)
    _global_is_full_backward_hook = full
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """`hook(module, grad_output)` for every module, before the module's own backward pre-hooks."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """`hook(module, grad_input, grad_output)` for every module, before the module's own backward hooks."""
    return _register_global_backward_hook(hook, full=True)


def backward_hooks_of(module: Any) -> tuple[list, list]:
    """(full hooks, deprecated hooks) that a call of `module` runs: the global ones first."""
    full: list = []
    non_full: list = []
    if _global_is_full_backward_hook is True:
        full += _global_backward_hooks.values()
    if module._is_full_backward_hook is True:
        full += module._backward_hooks.values()
    if _global_is_full_backward_hook is False:
        non_full += _global_backward_hooks.values()
    if module._is_full_backward_hook is False:
        non_full += module._backward_hooks.values()
    return full, non_full


def backward_pre_hooks_of(module: Any) -> list:
    """The backward pre-hooks that a call of `module` runs: the global ones first."""
    return [*_global_backward_pre_hooks.values(), *module._backward_pre_hooks.values()]


class BackwardHookFunction(Function):
    """Returns its tensors as they are (as views of them); its node is where module backward hooks attach."""

    @staticmethod
    def forward(ctx: Any, *args: Tensor) -> tuple:
        ctx.mark_non_differentiable(*[arg for arg in args if not arg.requires_grad])
        return args

    @staticmethod
    def backward(ctx: Any, *args: Any) -> tuple:
        return args


class _WrappedHook:
    """A deprecated module backward hook registered on a node: called with the module first."""

    def __init__(self, hook: Callable, module: Any) -> None:
        self.hook = hook
        functools.update_wrapper(self, hook)  # error messages name the user's hook
        self.module = weakref.ref(module)

    def __call__(self, *args: Any) -> Any:
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args)


_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_stacklevel() -> int:
    """The stacklevel of warnings.warn (called from our caller) that names the first frame outside the engine:
    torch's hooks are called from C++, so its warnings point at the user's backward() line."""
    level, frame = 2, sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_ENGINE_DIR):
        level, frame = level + 1, frame.f_back
    return level


def _pack_with_none(indices: list, values: tuple, size: int) -> tuple:
    res: list = [None] * size
    for idx, val in zip(indices, values, strict=True):
        res[idx] = val
    return tuple(res)


class BackwardHook:
    """One module call's backward hooks: wraps its inputs and outputs, then runs the hooks from their nodes."""

    def __init__(self, module: Any, user_hooks: list, user_pre_hooks: list) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_outputs = -1
        self.output_tensors_index: list | None = None
        self.n_inputs = -1
        self.input_tensors_index: list | None = None

    def setup_input_hook(self, args: tuple) -> tuple:
        """Pass the module's tensor arguments through BackwardHookFunction; its node will run the full hooks."""
        res, self.input_tensors_index = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result: Any) -> Any:
        """Pass the module's tensor outputs through BackwardHookFunction; its node collects grad_output."""
        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, self.output_tensors_index = self._apply_on_tensors(self._set_output_hook, args)
        self.n_outputs = len(args)
        return res if is_tuple else res[0]

    def _apply_on_tensors(self, attach: Callable, args: tuple) -> tuple[Any, list | None]:
        tensors_idx = [i for i, arg in enumerate(args) if isinstance(arg, Tensor)]
        tensors = [args[i] for i in tensors_idx]
        if not (any(t.requires_grad for t in tensors) and tls.grad_enabled):
            return args, None
        new_tensors = BackwardHookFunction.apply(*tensors)
        if len(new_tensors) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input Tensors.")
        grad_fns = [t.grad_fn for t in new_tensors
                    if t.grad_fn is not None and t.grad_fn.name() == "BackwardHookFunctionBackward"]
        if not grad_fns:
            raise RuntimeError("Error while setting up backward hooks. Please open an issue with a code sample to "
                               "reproduce this.")
        attach(grad_fns[0])
        arg_list = list(args)
        for idx, val in zip(tensors_idx, new_tensors, strict=True):
            arg_list[idx] = val
        return (tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)), tensors_idx

    def _set_user_hook(self, grad_fn: Any) -> None:
        def hook(grad_input: tuple, _: tuple) -> tuple | None:
            if self.grad_outputs is None:
                return None  # the grad reached the inputs without passing the outputs (e.g. double backward)
            res = _pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, got "
                                       f"{len(out)}, but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return tuple(res[i] for i in self.input_tensors_index)

        grad_fn.register_hook(hook)

    def _set_output_hook(self, grad_fn: Any) -> None:
        def hook(_: tuple, grad_output: tuple) -> tuple | None:
            self.grad_outputs = _pack_with_none(self.output_tensors_index, grad_output, self.n_outputs)
            self._run_pre_hooks()
            local_grad_outputs = self.grad_outputs  # kept: the branch below clears self.grad_outputs
            if self.input_tensors_index is None:
                self._run_hooks_without_input_grads()
            if local_grad_outputs is None:
                return None
            return tuple(local_grad_outputs[i] for i in self.output_tensors_index)

        grad_fn.register_hook(hook)

    def _run_pre_hooks(self) -> None:
        expected = len(self.grad_outputs)
        for user_pre_hook in self.user_pre_hooks:
            new = user_pre_hook(self.module, self.grad_outputs)
            if new is None:
                continue
            if len(new) != expected:
                raise RuntimeError("Backward pre hook returned an invalid number of grad_output, got "
                                   f"{len(new)}, but expected {expected}")
            self.grad_outputs = new

    def _run_hooks_without_input_grads(self) -> None:
        """No input requires grad: the full hooks run now, with a grad_input of Nones."""
        warnings.warn("Full backward hook is firing when gradients are computed with respect to module outputs "
                      "since no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/"
                      "torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more details.",
                      stacklevel=_user_stacklevel())
        grad_inputs = _pack_with_none([], [], self.n_inputs)
        for user_hook in self.user_hooks:
            res = user_hook(self.module, grad_inputs, self.grad_outputs)
            if res is not None and not (isinstance(res, tuple) and all(el is None for el in res)):
                raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                   "return None or None for all gradients.")
        self.grad_outputs = None


def register_non_full_hooks(module: Any, args: tuple, result: Any, hooks: list) -> None:
    """The deprecated module backward hooks: node post-hooks on the grad_fn of the first output tensor."""
    var = result
    while not isinstance(var, Tensor):
        var = next(v for v in var.values() if isinstance(v, Tensor)) if isinstance(var, dict) else var[0]
    grad_fn = var.grad_fn
    if grad_fn is None:
        return
    for hook in hooks:
        grad_fn.register_hook(_WrappedHook(hook, module))
    _maybe_warn_non_full_backward_hook(args, result, grad_fn)


def _warn_non_full(msg: str) -> None:
    warnings.warn(msg, FutureWarning, stacklevel=_user_stacklevel())


def _maybe_warn_non_full_backward_hook(inputs: Any, result: Any, grad_fn: Any) -> None:
    """Say when a deprecated module backward hook will see only part of the grads, as PyTorch does."""
    if not isinstance(result, Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            return _warn_non_full(
                "Using non-full backward hooks on a Module that does not return a single Tensor or a tuple of "
                "Tensors is deprecated and will be removed in future versions. This hook will be missing some of "
                "the grad_output. Please use register_full_backward_hook to get the documented behavior.")
    else:
        result = (result,)
    if not isinstance(inputs, Tensor):
        if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
            return _warn_non_full(
                "Using non-full backward hooks on a Module that does not take as input a single Tensor or a tuple "
                "of Tensors is deprecated and will be removed in future versions. This hook will be missing some "
                "of the grad_input. Please use register_full_backward_hook to get the documented behavior.")
    else:
        inputs = (inputs,)
    out_grad_fn = {r.grad_fn for r in result if r.grad_fn is not None}
    if not out_grad_fn or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
        _warn_non_full("Using a non-full backward hook when outputs are nested in python data structure is "
                       "deprecated and will be removed in future versions. This hook will be missing some "
                       "grad_output.")
    elif len(out_grad_fn) > 1:
        _warn_non_full("Using a non-full backward hook when outputs are generated by different autograd Nodes is "
                       "deprecated and will be removed in future versions. This hook will be missing some "
                       "grad_output. Please use register_full_backward_hook to get the documented behavior.")
    elif {i.grad_fn for i in inputs if i.grad_fn is not None} != {n[0] for n in grad_fn.next_functions}:
        _warn_non_full("Using a non-full backward hook when the forward contains multiple autograd Nodes is "
                       "deprecated and will be removed in future versions. This hook will be missing some "
                       "grad_input. Please use register_full_backward_hook to get the documented behavior.")
    return None
