"""Resetting `.grad`: what Module.zero_grad and Optimizer.zero_grad share, as in PyTorch."""
from __future__ import annotations

from typing import Any, Iterable


def zero_grads(params: Iterable[Any], set_to_none: bool = True) -> None:
    """Each param's grad to None (the default), or detached from any graph and filled with zeros in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if p.grad.grad_fn is not None:
            p.grad.detach_()
        else:
            p.grad.requires_grad_(False)
        p.grad.zero_()
