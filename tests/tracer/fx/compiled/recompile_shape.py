"""The same compiled function called on a new shape: Dynamo recompiles it."""
import os

import torch


def f(x):
    return (x.exp() * x).mean()


torch.manual_seed(0)
compiled = torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), dynamic=False)
compiled(torch.randn(3, requires_grad=True)).backward()
compiled(torch.randn(5, requires_grad=True)).backward()
