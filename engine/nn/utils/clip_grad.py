"""Gradient clipping as torch.nn.utils does it on CPU: under no_grad (no node, no seq_nr), each grad scaled or
clamped in place by torch's foreach kernels (one version per kernel and grad: `clip_grad_value_` is two)."""
from __future__ import annotations

import math
import types
import warnings
from typing import Any, Iterable

from ... import _state
from ..._dispatch import table
from ..._tensor import Tensor
from ...linalg import vector_norm

_torch = table("torch")  # public entries, so that an observer sees the ops as torch's dispatcher would
clamp, stack, tensor = _torch["clamp"], _torch["stack"], _torch["tensor"]


def _as_list(tensors: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _by_device_and_dtype(tensors: list[Tensor]) -> list[list[Tensor]]:
    """torch's _group_tensors_by_device_and_dtype: groups in order of first appearance."""
    groups: dict[tuple[str, Any], list[Tensor]] = {}
    for t in tensors:
        groups.setdefault((t._device, t.dtype), []).append(t)
    return list(groups.values())


def get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The norm of the tensors' norms: the norm of all their elements as one vector."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return tensor(0.0)
    first_device = tensors[0].device
    norms = [vector_norm(g, norm_type) for group in _by_device_and_dtype(tensors) for g in group]
    total_norm = vector_norm(stack([n.to(first_device) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total_norm.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                           "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                           "anyway, set `error_if_nonfinite=False`")
    return total_norm


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the grads by min(max_norm / (total_norm + 1e-6), 1), in place."""
    with _state.no_grad():
        grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
        max_norm = float(max_norm)
        if len(grads) == 0:
            return
        clip_coef_clamped = clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for group in _by_device_and_dtype(grads):
            coef = clip_coef_clamped.to(group[0].device)
            for g in group:
                g.mul_(coef)


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the parameters' grads so that their total norm is at most `max_norm`; returns the norm before."""
    with _state.no_grad():
        if isinstance(parameters, Tensor):
            parameters = [parameters]
        else:
            is_generator = isinstance(parameters, types.GeneratorType)
            parameters = list(parameters)
            if is_generator and len(parameters) == 0:
                warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
        grads = [p.grad for p in parameters if p.grad is not None]
        total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
        clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
        return total_norm


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None) -> None:
    """Clamp the parameters' grads to [-clip_value, clip_value], in place."""
    with _state.no_grad():
        clip_value = float(clip_value)
        grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
        if not grads:  # torch groups the grads before looking: its C++ grouping refuses an empty list
            raise RuntimeError("Expected !nested_tensorlist[0].empty() to be true, but got false.  (Could this error "
                               "message be improved?  If so, please report an enhancement request to PyTorch.)")
        for group in _by_device_and_dtype(grads):
            for g in group:  # torch's _foreach_clamp_min_ then _foreach_clamp_max_ over the group
                g.clamp_min_(-clip_value)
            for g in group:
                g.clamp_max_(clip_value)
