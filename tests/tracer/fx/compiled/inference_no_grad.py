"""A compiled model called under no_grad (an inference graph), then once for training."""
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())
compiled = torch.compile(model, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"))
x = torch.randn(2, 3)
with torch.no_grad():
    compiled(x)
compiled(x).sum().backward()
