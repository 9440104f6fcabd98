"""Annotations inside a nested_compile_region called twice, and around its calls."""
import os

import torch
import torch.fx.traceback as fx_traceback


@torch.compiler.nested_compile_region
def block(x, w):
    with fx_traceback.annotate({"inside": "block"}):
        return torch.sigmoid(x @ w) * x


def f(x, w):
    with fx_traceback.annotate({"call": 1}):
        y = block(x, w)
    with fx_traceback.annotate({"call": 2}):
        z = block(y, w)
    return z.sum()


torch.manual_seed(0)
x = torch.randn(3, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
