"""The smallest compiled function: one op, its gradient taken outside the compiled region."""
import os

import torch


def f(x):
    return x.sin()


torch.manual_seed(0)
x = torch.randn(6, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x).sum().backward()
