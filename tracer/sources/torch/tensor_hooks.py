"""The hooks a user puts on tensors, seen by the bridge: `register_hook`, `retain_grad()` and
`register_post_accumulate_grad_hook` reach the bridge's TorchFunctionMode, which registers a wrapper that reports
each run (as a HookRan event, the engine Recorder's kinds: tensor_pre, post_accumulate_grad) and returns what the
user's hook returned. A retains_grad hook is torch's own C++ hook, which no wrapper reaches: the bridge remembers
the tensor, and reports the hook when its node runs (backward.Backward._retains).

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import functools
from typing import Any

import torch

_REGISTER_HOOK = torch.Tensor.register_hook
_RETAIN_GRAD = torch.Tensor.retain_grad
_POST_ACCUMULATE = torch.Tensor.register_post_accumulate_grad_hook
REGISTERING = (_REGISTER_HOOK, _RETAIN_GRAD, _POST_ACCUMULATE)
"""The torch calls that put a hook of the user's on a tensor (each reaches a TorchFunctionMode)."""


def register(backward: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """Run one of REGISTERING for the user, with the bridge (backward.py's Backward) watching the hook it registers."""
    if func is _RETAIN_GRAD:
        t = args[0] if args else kwargs.get("self")
        was = t.retains_grad
        out = func(*args, **kwargs)
        if not was and t.retains_grad:  # a leaf's retain_grad() is a no-op: no hook
            backward.retained(t)
        return out
    kind = "tensor_pre" if func is _REGISTER_HOOK else "post_accumulate_grad"
    args = list(args)
    if len(args) > 1:
        args[1] = _reporting(backward, args[1], kind)
    elif "hook" in kwargs:
        kwargs = {**kwargs, "hook": _reporting(backward, kwargs["hook"], kind)}
    return func(*args, **kwargs)


def _reporting(backward: Any, hook: Any, kind: str) -> Any:
    """`hook`, reporting each run that returns (as the engine reports a hook: after it returned). A hook that reports
    already is left as it is: with the mode on (inside a custom Function's backward) the patched Tensor method calls
    torch's, whose torch-function dispatch hands the call, wrapped hook and all, to the mode and the patched method
    again."""
    if not callable(hook) or getattr(hook, "_agdb_reports", False):
        return hook  # not callable: torch's own error says what is wrong
    name = getattr(hook, "__qualname__", None) or type(hook).__name__

    @functools.wraps(hook)
    def reported(*args: Any) -> Any:
        result = hook(*args)
        backward.hook_ran(kind, name)
        return result

    reported._agdb_reports = True  # type: ignore[attr-defined]
    return reported
