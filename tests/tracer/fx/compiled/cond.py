"""torch.cond with both branches differentiable, under an annotation."""
import os

import torch
import torch.fx.traceback as fx_traceback


def f(x, w):
    y = x @ w
    with fx_traceback.annotate({"block": "cond"}):
        z = torch.cond(y.sum() > 0, lambda t: t.sin(), lambda t: t.cos() * 2, (y,))
    return z.sum()


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
