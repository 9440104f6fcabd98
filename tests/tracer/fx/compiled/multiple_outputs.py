"""A compiled function with two outputs that both reach the loss."""
import os

import torch


def f(x, w):
    h = x @ w
    return h.sin(), h.cos() * x[:, :1]


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w = torch.randn(3, 2, requires_grad=True)
a, b = torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w)
(a.sum() + 2 * b.sum()).backward()
