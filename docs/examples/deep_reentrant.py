"""Reentrant backward nested 65 deep: torch runs the first 60 reentrant calls inline on the calling thread and
hands the 61st to its reentrant thread pool, whose thread runs the rest (depths 61 to 65) on the caller's queue."""
import torch


class Nest(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, depth):
        ctx.depth = depth
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if ctx.depth > 0:
            with torch.enable_grad():
                inner = torch.ones(1, requires_grad=True)
                waiting = inner.exp().sum()  # queued in this graph task while the deeper one runs
                (Nest.apply(inner, ctx.depth - 1).sum() + waiting).backward()
        return grad, None


x = torch.ones(1, requires_grad=True)
Nest.apply(x, 65).sum().backward()
print("x.grad", x.grad.tolist())
