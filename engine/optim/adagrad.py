"""Adagrad, as torch.optim.Adagrad in PyTorch 2.13 (its single-tensor algorithm, the CPU default).

State per parameter is made in the constructor, for every parameter (with a grad or not): `step` (a float32
0-dim tensor) and `sum` (filled with initial_accumulator_value). Each step, for a parameter with a grad:
`step += 1`; `grad = -grad` if maximize; `grad = grad + wd * param`; `clr = lr / (1 + (step - 1) * lr_decay)`;
`sum.addcmul_(grad, grad, value=1)`; `param.addcdiv_(grad, sqrt(sum) + eps, value=-clr)`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor, make_tensor
from . import _kernels as k
from .optimizer import Optimizer, refuse_tensor_hyperparameter


def _new_state(p: Tensor, initial_accumulator_value: float) -> dict[str, Tensor]:
    return {"step": make_tensor(np.array(0.0, dtype=np.float32)),
            "sum": make_tensor(np.full_like(p._data, initial_accumulator_value), device=p._device)}


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), with optional learning-rate decay, maximize and L2 weight decay."""

    def __init__(self, params: Any, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        refuse_tensor_hyperparameter("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].update(_new_state(p, initial_accumulator_value))

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
        self._steps_as_tensors()
        state_values = list(self.state.values())
        if len(state_values) != 0 and not isinstance(state_values[0]["step"], Tensor):
            for s in state_values:
                s["step"] = make_tensor(np.array(float(s["step"]), dtype=np.float32))

    def _update(self, group: dict[str, Any]) -> None:
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:  # a param added later by add_param_group: the constructor's defaults
                state.update(_new_state(p, self.defaults["initial_accumulator_value"]))
            step_t, state_sum = state["step"], state["sum"]
            k.add_(step_t, np.float32(1))
            step = step_t.item()
            dtype = p._data.dtype.type
            grad = p.grad._data
            if maximize:
                grad = -grad
            if weight_decay != 0:
                grad = grad + dtype(weight_decay) * p._data
            clr = lr / (1 + (step - 1) * lr_decay)
            k.addcmul_(state_sum, grad, grad, value=1)
            std = np.sqrt(state_sum._data) + dtype(eps)
            k.addcdiv_(p, grad, std, value=-clr)
