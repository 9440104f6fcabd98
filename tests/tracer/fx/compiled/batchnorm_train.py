"""BatchNorm in training mode: the running statistics are buffers the compiled graph mutates."""
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU())
model.train()
compiled = torch.compile(model, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)
compiled(torch.randn(6, 3)).sum().backward()
