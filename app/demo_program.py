"""The program `agdb demo` records (app/demo.py records and shows it). Its own module, short and importing only the
engine, so that its lines, which the snapshot tests pin (culprits, sources, the forward view), move only when the
program does."""
from __future__ import annotations

from agdb import engine as torch


class Cube(torch.autograd.Function):
    """x**3, whose backward asks the engine for d(x**3)/dx with a nested (reentrant) backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            inner = x.detach().requires_grad_()
            (inner * inner * inner).sum().backward()  # reentrant: runs inside this node
        return grad * inner.grad


def example() -> None:
    """The program the demo records."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    y = x.exp()
    y.register_hook(lambda g: g * 2)                   # a tensor hook on the diamond's top
    z = (y.sin() * w + y.cos()).sum()                  # the diamond: y feeds sin and cos
    z.backward(retain_graph=True)
    torch.autograd.backward([(x * 2).sum(), (w * w).sum()])   # two roots
    h = x * w
    u = h.sum() + w.exp().sum()
    u.backward(inputs=[h])     # exec_info runs only the path to h; topological_nr prunes what lies below it
    Cube.apply(x).sum().backward()                     # custom Function + reentrant backward
