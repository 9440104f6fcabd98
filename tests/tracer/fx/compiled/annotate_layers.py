"""torch.fx.traceback.annotate around each layer of a small model."""
import os

import torch
import torch.fx.traceback as fx_traceback


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(4, 8)
        self.lin2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        with fx_traceback.annotate({"layer": "lin1", "stage": 0}):
            h = self.lin1(x).relu()
        with fx_traceback.annotate({"layer": "lin2", "stage": 1}):
            return self.lin2(h).sum()


torch.manual_seed(0)
model = torch.compile(Net(), backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)
model(torch.randn(5, 4)).backward()
