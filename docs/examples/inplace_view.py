"""An in-place update of a view: CopySlices on the base, the node it hides, AsStridedBackward0 on the view."""
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
g = a.clone()
v = g[0:2]
v.mul_(2)
(g.sum() + v.sum()).backward()
print("a.grad", a.grad.tolist())
