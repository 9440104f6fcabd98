"""A DDP program for `agdb torch --nproc` and `agdb ranks` (tests/app/test_ranks.py), run by torch's launcher.

Gloo on the CPU, `find_unused_parameters=True`, 3 steps; rank 1 skips the `extra` submodule at step 1, so that
the ranks build different graphs there. Each rank writes what its own post-accumulate-grad hooks saw, per step, to
OUT.rankN.json: the independent truth agdb's report is held to; and its parameters after training, which a run
without agdb must end with too. With KILL_AT, rank 1 kills itself with SIGKILL at
the start of that step (with `raise` after it, it raises instead; with `hang`, it waits there for a message rank 0
never sends, while rank 0 goes on into that step's backward, whose allreduce waits for rank 1: both hang; each
writes OUT.rankN.hangs just before its blocking call, so that a test knows when to interrupt them).

usage: ddp_program.py OUT [KILL_AT [raise|hang]]
"""
import gc
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.extra = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.head = nn.Linear(4, 1)

    def forward(self, x, skip):
        x = torch.relu(self.body(x))
        if not skip:
            x = self.extra(x)
        return self.head(x)


def _mark_before_ddp_waits(path):
    """Write `path` at the end of this backward, just before DDP's reducer waits for the allreduce rank 1 never
    joins: a callback queued from the loss's hook (the backward's first) runs before the one DDP queues once its
    last bucket is ready, and after it only C++ runs up to the wait."""
    torch.autograd.Variable._execution_engine.queue_callback(lambda: open(path, "w").close())


def main():
    out = sys.argv[1]
    kill_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    raises = sys.argv[3:] == ["raise"]
    hangs = sys.argv[3:] == ["hang"]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net()
    ddp = DistributedDataParallel(model, find_unused_parameters=True)
    names = dict(model.named_parameters())
    seen = []
    for name, p in names.items():
        p.register_post_accumulate_grad_hook(lambda p, name=name: seen[-1].append(name))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    for step in range(3):
        if rank == 1 and step == kill_at:
            if raises:
                raise RuntimeError(f"rank 1 fails at step {step}")
            if hangs:
                open(f"{out}.rank1.hangs", "w").close()
                dist.recv(torch.zeros(1), src=0)
            os.kill(os.getpid(), signal.SIGKILL)
        seen.append([])
        opt.zero_grad()
        loss = ddp(torch.randn(8, 4), skip=rank == 1 and step == 1).pow(2).mean()
        if hangs and step == kill_at:
            loss.register_hook(lambda grad: _mark_before_ddp_waits(f"{out}.rank{rank}.hangs"))
        loss.backward()
        opt.step()
    steps = [{"step": i, "params_with_grad": got, "unused_params": [n for n in names if n not in got]}
             for i, got in enumerate(seen)]
    with open(f"{out}.rank{rank}.json", "w") as f:
        json.dump({"rank": rank, "world_size": dist.get_world_size(), "steps": steps,
                   "params": {n: p.tolist() for n, p in names.items()}}, f)
    dist.barrier()  # both ranks done before the group goes: else gloo's threads may abort one at exit (SIGABRT)
    del ddp, opt, loss  # DDP's reducer holds the group: destroyed only with it, at exit, gloo's threads may abort
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
