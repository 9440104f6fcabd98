"""A custom Function whose backward runs a backward of its own (reentrant), next to ordinary ops."""
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            inner = x.detach().requires_grad_()
            (inner * inner * inner).sum().backward()
        return grad * inner.grad


x = torch.tensor([1.0, 2.0], requires_grad=True)
y = Cube.apply(x).sum() + (1 - x).exp().sum()
y.backward()
print("x.grad", x.grad.tolist())
