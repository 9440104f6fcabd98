"""One nested_compile_region called twice on the same input: one subgraph, two invoke_subgraph calls."""
import os

import torch


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.tanh(x @ w) * 2


def f(x, w1, w2):
    return (block(x, w1) * block(x, w2)).sum()


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w1 = torch.randn(3, 3, requires_grad=True)
w2 = torch.randn(3, 3, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w1, w2).backward()
