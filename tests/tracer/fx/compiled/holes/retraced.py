"""A joint pass that re-traces the joint graph with make_fx, keeping node meta but not seq_nr (a planted hole).

Under preserve_node_meta (without preserve_node_seq_nr) every re-traced node takes the autograd counter's current
value, so all of them share one seq_nr; the placeholders get their old names back for the partitioner."""
import os

import torch
import torch._functorch.config
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx


def retrace(gm, joint_inputs):
    with fx_traceback.preserve_node_meta():
        new = make_fx(torch.fx.Interpreter(gm).run)(*joint_inputs)
    for old, n in zip(gm.graph.find_nodes(op="placeholder"), new.graph.find_nodes(op="placeholder"), strict=True):
        n.name = n.target = old.target
    new.recompile()
    return new


torch._functorch.config.joint_custom_pass = retrace


def f(x, w):
    return (x * w).sin().sum()


torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
w = torch.randn(4, requires_grad=True)
torch.compile(f, backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)(x, w).backward()
