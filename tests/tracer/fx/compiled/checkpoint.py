"""Activation checkpointing (non-reentrant) around a block of a compiled function."""
import os

import torch
from torch.utils.checkpoint import checkpoint


def block(x, w):
    return torch.sin(x @ w).relu() * 2


def f(x, w):
    return checkpoint(block, x, w, use_reentrant=False).sum()


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
