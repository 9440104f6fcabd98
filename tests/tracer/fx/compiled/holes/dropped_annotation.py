"""A joint pass that drops the `custom` annotation of one backward node (a propagation hole, planted)."""
import os
import sys

import torch
import torch._functorch.config
import torch.fx.traceback as fx_traceback


def drop_one_annotation(gm, joint_inputs):
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.meta.get("partitioner_tag") == "is_backward" and n.meta.get("custom"):
            del n.meta["custom"]
            print(f"dropped custom from {n.name}", file=sys.stderr)
            break
    return gm


torch._functorch.config.joint_custom_pass = drop_one_annotation


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(4, 8)
        self.lin2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        with fx_traceback.annotate({"layer": "lin1"}):
            h = self.lin1(x).relu()
        with fx_traceback.annotate({"layer": "lin2"}):
            return self.lin2(h).sum()


torch.manual_seed(0)
model = torch.compile(Net(), backend=os.environ.get("FX_CORPUS_BACKEND", "aot_eager"), fullgraph=True)
model(torch.randn(5, 4)).backward()
