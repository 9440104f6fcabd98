"""RMSprop, as torch.optim.RMSprop in PyTorch 2.13 (its single-tensor algorithm, the CPU default).

State per parameter, made on its first step with a grad: `step` (a float32 0-dim tensor), `square_avg`
(zeros), with momentum > 0 `momentum_buffer` (zeros) and, centered, `grad_avg` (zeros). Each step:
`grad = -grad` if maximize; `step += 1`; `grad = grad + wd * param`;
`square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)`; centered, `grad_avg.lerp_(grad, 1 - alpha)`
and `avg = sqrt(square_avg - grad_avg**2) + eps`, else `avg = sqrt(square_avg) + eps`; then with momentum
`buf.mul_(momentum).addcdiv_(grad, avg)` and `param.add_(buf, alpha=-lr)`, else
`param.addcdiv_(grad, avg, value=-lr)`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import make_tensor
from . import _kernels as k
from .optimizer import Optimizer, refuse_tensor_hyperparameter


class RMSprop(Optimizer):
    """RMSprop (Hinton), with optional momentum, centering, maximize and L2 weight decay."""

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        refuse_tensor_hyperparameter("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                    "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
        self._steps_as_tensors()

    def _update(self, group: dict[str, Any]) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        weight_decay, momentum, centered, maximize = (group["weight_decay"], group["momentum"], group["centered"],
                                                      group["maximize"])
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:  # lazy initialization: step on the CPU in float32, the rest like the param
                state["step"] = make_tensor(np.array(0.0, dtype=np.float32))
                state["square_avg"] = make_tensor(np.zeros_like(p._data), device=p._device)
                if momentum > 0:
                    state["momentum_buffer"] = make_tensor(np.zeros_like(p._data), device=p._device)
                if centered:
                    state["grad_avg"] = make_tensor(np.zeros_like(p._data), device=p._device)
            dtype = p._data.dtype.type
            grad = p.grad._data
            if maximize:
                grad = -grad
            square_avg = state["square_avg"]
            k.add_(state["step"], np.float32(1))
            if weight_decay != 0:
                grad = grad + dtype(weight_decay) * p._data
            k.addcmul_(k.mul_(square_avg, alpha), grad, grad, value=1 - alpha)
            if centered:
                grad_avg = state["grad_avg"]
                k.lerp_(grad_avg, grad, 1 - alpha)
                avg = np.sqrt(square_avg._data + dtype(-1) * grad_avg._data * grad_avg._data)
            else:
                avg = np.sqrt(square_avg._data)
            avg = avg + dtype(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                k.addcdiv_(k.mul_(buf, momentum), grad, avg)
                k.add_(p, buf._data, alpha=-lr)
            else:
                k.addcdiv_(p, grad, avg, value=-lr)
