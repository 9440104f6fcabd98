"""A nested_compile_region that calls another one, twice over."""
import os

import torch


@torch.compiler.nested_compile_region
def inner(x):
    return torch.sin(x) * x


@torch.compiler.nested_compile_region
def outer(x, w):
    return inner(inner(x @ w)).cos()


def f(x, w):
    return (outer(x, w) + outer(x * 2, w)).sum()


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
