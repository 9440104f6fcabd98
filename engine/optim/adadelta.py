"""Adadelta, as torch.optim.Adadelta in PyTorch 2.13 (its single-tensor algorithm, the CPU default).

State per parameter, made on its first step with a grad: `step` (a float32 0-dim tensor), `square_avg` and
`acc_delta` (zeros). Each step: `step += 1`; `grad = -grad` if maximize; `grad = grad + wd * param`;
`square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)`; `std = (square_avg + eps).sqrt_()`;
`delta = (acc_delta + eps).sqrt_().div_(std).mul_(grad)`; `acc_delta.mul_(rho).addcmul_(delta, delta,
value=1 - rho)`; `param.add_(delta, alpha=-lr)`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import make_tensor
from . import _kernels as k
from .optimizer import Optimizer, refuse_tensor_hyperparameter


class Adadelta(Optimizer):
    """Adadelta (Zeiler), with maximize and L2 weight decay."""

    def __init__(self, params: Any, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach: bool | None = None, *, capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        refuse_tensor_hyperparameter("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay, "maximize": maximize,
                    "capturable": capturable, "foreach": foreach, "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
        self._steps_as_tensors()

    def _update(self, group: dict[str, Any]) -> None:
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        weight_decay, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:  # lazy initialization: step on the CPU in float32, the rest like the param
                state["step"] = make_tensor(np.array(0.0, dtype=np.float32))
                state["square_avg"] = make_tensor(np.zeros_like(p._data), device=p._device)
                state["acc_delta"] = make_tensor(np.zeros_like(p._data), device=p._device)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            dtype = p._data.dtype.type
            k.add_(state["step"], np.float32(1))
            grad = p.grad._data
            if maximize:
                grad = -grad
            if weight_decay != 0:
                grad = grad + dtype(weight_decay) * p._data
            k.addcmul_(k.mul_(square_avg, rho), grad, grad, value=1 - rho)
            std = np.sqrt(square_avg._data + dtype(eps))
            delta = np.sqrt(acc_delta._data + dtype(eps)) / std * grad
            k.addcmul_(k.mul_(acc_delta, rho), delta, delta, value=1 - rho)
            k.add_(p, delta, alpha=-lr)


__all__ = ["Adadelta"]
