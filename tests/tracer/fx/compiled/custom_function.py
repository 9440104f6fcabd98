"""A custom autograd.Function inside a compiled function."""
import os

import torch


class ScaledSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x * ctx.scale, None


def f(x):
    return ScaledSquare.apply(x.sin(), 3.0).sum()


torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x).backward()
