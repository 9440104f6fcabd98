"""Adam, as torch.optim.Adam in PyTorch 2.13 (its single-tensor algorithm, the CPU default).

State per parameter, made on its first step with a grad: `step` (a float32 0-dim tensor), `exp_avg`,
`exp_avg_sq` and, with amsgrad, `max_exp_avg_sq`. Each step: `step += 1`; weight decay (decoupled:
`param.mul_(1 - lr * wd)`, else `grad = grad + wd * param`); `exp_avg.lerp_(grad, 1 - beta1)`;
`exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)`; amsgrad's `maximum(..., out=)`; then
`param.addcdiv_(exp_avg, sqrt(v) / sqrt(1 - beta2**step) + eps, value=-lr / (1 - beta1**step))`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor, make_tensor
from . import _kernels as k
from .optimizer import Optimizer, refuse_tensor_hyperparameter


class Adam(Optimizer):
    """Adam (Kingma and Ba), with optional amsgrad, maximize, and L2 or decoupled (AdamW) weight decay."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        refuse_tensor_hyperparameter("lr", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))):
            raise ValueError("betas must be either both floats or both Tensors")
        refuse_tensor_hyperparameter("betas", betas[0])
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable, "fused": fused, "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)
        self._steps_as_tensors()

    def _update(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:  # lazy initialization: step on the CPU in float32, moments like the param
                state["step"] = make_tensor(np.array(0.0, dtype=np.float32))
                state["exp_avg"] = make_tensor(np.zeros_like(p._data), device=p._device)
                state["exp_avg_sq"] = make_tensor(np.zeros_like(p._data), device=p._device)
                if amsgrad:
                    state["max_exp_avg_sq"] = make_tensor(np.zeros_like(p._data), device=p._device)
            grad = p.grad._data
            if maximize:
                grad = -grad
            step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
            k.add_(step_t, np.float32(1))
            if weight_decay != 0:
                if decoupled:
                    k.mul_(p, 1 - lr * weight_decay)
                else:
                    grad = grad + p._data.dtype.type(weight_decay) * p._data
            k.lerp_(exp_avg, grad, 1 - beta1)
            k.addcmul_(k.mul_(exp_avg_sq, beta2), grad, grad, value=1 - beta2)
            step = step_t.item()
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            dtype = p._data.dtype.type
            if amsgrad:
                max_exp_avg_sq = state["max_exp_avg_sq"]
                k.maximum_(max_exp_avg_sq, exp_avg_sq._data)
                denom = np.sqrt(max_exp_avg_sq._data) / dtype(bias_correction2_sqrt) + dtype(eps)
            else:
                denom = np.sqrt(exp_avg_sq._data) / dtype(bias_correction2_sqrt) + dtype(eps)
            k.addcdiv_(p, exp_avg._data, denom, value=-step_size)
