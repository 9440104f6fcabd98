"""A nested_compile_region called once: kept as an invoke_subgraph (Dynamo would inline a single use)."""
import os

import torch

torch._dynamo.config.inline_single_use_invoke_subgraph = False


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.sin(x @ w).relu()


def f(x, w):
    return block(x, w).sum()


torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
