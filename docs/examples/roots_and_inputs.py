"""Two roots in one backward (the GraphRoot takes a seq_nr), then an `inputs=` backward that prunes a branch,
then autograd.grad on an intermediate tensor."""
import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([3.0, 4.0], requires_grad=True)
torch.autograd.backward([(x * 2).sum(), (w * w).sum()])
h = x * w
u = h.sum() + w.exp().sum()
u.backward(inputs=[h])
k = x.exp() * 3
(gk,) = torch.autograd.grad(k.sin().sum(), [k])
print("x.grad", x.grad.tolist(), "gk", gk.tolist())
