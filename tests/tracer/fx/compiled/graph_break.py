"""A graph break in the middle: two compiled pieces, each with its own forward and backward graph."""
import os

import torch


def f(x, w):
    h = (x @ w).tanh()
    torch._dynamo.graph_break()
    return (h * h).sum()


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w = torch.randn(3, 2, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"))(x, w).backward()
