"""SGD, as torch.optim.SGD in PyTorch 2.13 (its single-tensor algorithm, the CPU default).

Per parameter with a grad: `grad = -grad` if maximize; `grad = grad + weight_decay * param`; with momentum,
the buffer is a clone of grad on the first step, then `buf.mul_(momentum).add_(grad, alpha=1 - dampening)`
(two writes), and grad becomes `grad + momentum * buf` (nesterov) or buf; finally
`param.add_(grad, alpha=-lr)`: one write, one version, per step.
"""
from __future__ import annotations

from typing import Any

from . import _kernels as k
from .optimizer import Optimizer, refuse_tensor_hyperparameter


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum (Nesterov's too) and weight decay."""

    def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        refuse_tensor_hyperparameter("lr", lr)
        refuse_tensor_hyperparameter("weight_decay", weight_decay)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
                    "nesterov": nesterov, "maximize": maximize, "foreach": foreach,
                    "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def _update(self, group: dict[str, Any]) -> None:
        weight_decay, momentum, lr = group["weight_decay"], group["momentum"], group["lr"]
        dampening, nesterov, maximize = group["dampening"], group["nesterov"], group["maximize"]
        params = [p for p in group["params"] if p.grad is not None]
        # torch reads every buffer before the loop and stores them after it: a parameter listed twice gets two
        # fresh buffers on its first step (the last one kept), and shares the stored one afterwards
        bufs = [self.state[p].get("momentum_buffer") for p in params] if momentum != 0 else []
        for i, p in enumerate(params):
            grad = p.grad._data
            if maximize:
                grad = -grad
            if weight_decay != 0:
                grad = grad + p._data.dtype.type(weight_decay) * p._data
            if momentum != 0:
                buf = bufs[i]
                if buf is None:
                    buf = bufs[i] = k.clone(p, grad)
                else:
                    k.add_(k.mul_(buf, momentum), grad, alpha=1 - dampening)
                grad = grad + p._data.dtype.type(momentum) * buf._data if nesterov else buf._data
            k.add_(p, grad, alpha=-lr)
        for p, buf in zip(params, bufs, strict=False):  # bufs is empty without momentum
            self.state[p]["momentum_buffer"] = buf
