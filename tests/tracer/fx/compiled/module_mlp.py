"""An nn.Module model trained for two steps with SGD (only the model is compiled)."""
import os

import torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(4, 8)
        self.lin2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.lin2(torch.nn.functional.gelu(self.lin1(x)))


torch.manual_seed(0)
model = MLP()
compiled = torch.compile(model, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for _ in range(2):
    opt.zero_grad()
    torch.nn.functional.mse_loss(compiled(x), y).backward()
    opt.step()
