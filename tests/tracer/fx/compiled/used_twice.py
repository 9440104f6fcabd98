"""A tensor used twice: its two gradients are summed (gradient accumulation nodes)."""
import os

import torch


def f(x, w):
    h = x * w
    return (h.sin() + h.exp() + x.cos()).sum()


torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
w = torch.randn(5, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
