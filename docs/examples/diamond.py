"""A diamond: y feeds two branches whose grads meet again in y's input buffer; a tensor hook on y."""
import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([0.5, -1.0], requires_grad=True)
y = x.exp()
y.register_hook(lambda g: g * 2)
z = (y.sin() * w + y.cos()).sum()
z.backward()
print("x.grad", x.grad.tolist())
