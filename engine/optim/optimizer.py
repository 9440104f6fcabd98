"""The Optimizer base class, as torch.optim.Optimizer in PyTorch 2.13 (less hooks and profiling).

`param_groups` is a list of dicts holding each group's params and every default filled in, `state` a
defaultdict(dict) keyed by parameter; `state_dict()` numbers the parameters in group order and
`load_state_dict()` maps them back, casting floating state (all but `step`) to the parameter's dtype.
Errors carry PyTorch's types and wording. agdb runs the single-tensor algorithms only: `foreach`, `fused`,
`capturable` and `differentiable` set to True are refused, as are tensor learning rates and betas.
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable
from copy import deepcopy
from itertools import chain
from typing import Any, Callable

import numpy as np

from .._dtype import legacy_type_name
from .._grads import zero_grads
from .._state import enable_grad, is_grad_enabled, set_grad_enabled
from .._tensor import Tensor, make_tensor


class _RequiredParameter:
    """Singleton class representing a required parameter for an Optimizer."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

_UNSUPPORTED = ("foreach", "fused", "capturable", "differentiable")


def typename(obj: Any) -> str:
    """torch.typename: `torch.FloatTensor` for a tensor, else the object's class name (module-qualified)."""
    if isinstance(obj, Tensor):
        return legacy_type_name(obj.dtype, obj._device)
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in (None, "builtins") else f"{module}.{cls.__qualname__}"


def refuse_tensor_hyperparameter(name: str, value: Any) -> None:
    """agdb's optimizers take numbers: a Tensor lr or beta is refused with a clear error."""
    if isinstance(value, Tensor):
        raise NotImplementedError(f"agdb's optimizers take {name} as a Python number, not a Tensor; "
                                  f"pass {name}=float(...)")


class Optimizer:
    """Base class for all optimizers: holds `param_groups`, `state` and `defaults`, as torch.optim.Optimizer."""

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + typename(params))
        self.state: defaultdict[Tensor, Any] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        format_string += ")"
        return format_string

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors: to None (default), or detached and zero-filled."""
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform a single optimization step; returns the closure's loss (or None).

        The frame of every step: the closure under enable_grad, then `_update(group)` for each group under
        no_grad (PyTorch's _use_grad_for_differentiable with differentiable=False).
        """
        prev = is_grad_enabled()
        try:
            set_grad_enabled(False)
            loss = None
            if closure is not None:
                with enable_grad():
                    loss = closure()
            for group in self.param_groups:
                _check_supported(group)
                self._update(group)
        finally:
            set_grad_enabled(prev)
        return loss

    def _update(self, group: dict[str, Any]) -> None:
        """One group's update, in place under no_grad (each optimizer's own)."""
        raise NotImplementedError

    def _steps_as_tensors(self) -> None:
        """State loaded from an older PyTorch keeps `step` as a number; make it the float32 tensor it is now."""
        for group in self.param_groups:
            for p in group["params"]:
                p_state = self.state.get(p, [])
                if len(p_state) != 0 and not isinstance(p_state["step"], Tensor):
                    p_state["step"] = make_tensor(np.array(float(p_state["step"]), dtype=np.float32))

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: state}, "param_groups": [group with params as indices]}, indices in group order.

        The state's tensors are the optimizer's own, not copies (as in PyTorch).
        """
        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state_dict() of an optimizer over parameters of the same group sizes."""
        state_dict = state_dict.copy()
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups, strict=True)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups), strict=True))

        def _cast(param: Tensor, value: Any, key: Any = None) -> Any:
            if isinstance(value, Tensor):
                return _to_param(param, value, key)
            if isinstance(value, dict):
                return {k: _cast(param, v, key=k) for k, v in value.items()}
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
                return type(value)(_cast(param, v) for v in value)  # type: ignore[call-arg]
            return value

        state: defaultdict[Any, dict[Any, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = _cast(id_map[k], v)
            else:
                state[k] = v

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups, strict=True)]
        self.__setstate__({"state": state, "param_groups": param_groups})

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters, with options of its own; missing options take the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)

        tensors, names = [], []
        for param in param_group["params"]:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + typename(param))
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        param_set: set[Tensor] = set()
        for group in self.param_groups:
            param_set.update(set(group["params"]))
            if ("param_names" in param_group) != ("param_names" in group):
                current = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {current} to the optimizer")
        if not param_set.isdisjoint(set(param_group["params"])):
            raise ValueError("some parameters appear in more than one parameter group")
        _check_supported(param_group)
        self.param_groups.append(param_group)


def _check_supported(group: dict[str, Any]) -> None:
    """Refuse the options agdb does not implement, with a clear error (PyTorch would run them)."""
    for option in _UNSUPPORTED:
        if group.get(option):
            raise NotImplementedError(f"agdb's optimizers run PyTorch's single-tensor algorithm only: {option}=True "
                                      f"is not supported (leave it at its default)")
    for name in ("lr", "betas"):
        value = group.get(name)
        for v in value if isinstance(value, tuple) else (value,):
            refuse_tensor_hyperparameter(name, v)


def _to_param(param: Tensor, value: Tensor, key: Any) -> Tensor:
    """PyTorch's _process_value_according_to_param_policy: state (but `step`) takes a floating param's dtype
    and every state tensor its device; `.to` returns the tensor itself when nothing changes."""
    if key == "step":
        return value
    data = value._data
    if param._data.dtype.kind == "f" and data.dtype != param._data.dtype:
        data = data.astype(param._data.dtype)
    if data is value._data and value._device == param._device:
        return value
    return make_tensor(np.array(data, copy=data is value._data), device=param._device)
