"""The bridge under DistributedDataParallel, in one process (gloo, world size 1): the model's parameters, which
AccumulateGrad is whose and the unused ones per backward call, held to the program's own post-accumulate-grad hooks;
and recording changes none of DDP's grads. (Two ranks launched by torch's launcher: tests/app/test_ranks.py.)"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from agdb import tracer  # noqa: E402
from agdb.tracer.views.ranks import read_rank  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 3)
        self.frozen = torch.nn.Linear(3, 3)
        self.frozen.requires_grad_(False)  # not DDP's: no grad is expected of it

    def forward(self, x, use_b):
        x = self.a(x)
        return self.b(x) if use_b else x


@pytest.fixture
def group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _train(seen):
    torch.manual_seed(0)
    model = Net()
    for name, p in model.named_parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(lambda p, name=name: seen[-1].append(name))
    ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    grads = []
    for use_b in (True, False, True):
        seen.append([])
        ddp.zero_grad()
        ddp(torch.ones(2, 3), use_b).pow(2).sum().backward()
        grads.append([None if p.grad is None else p.grad.clone() for p in model.parameters()])
    return grads


def test_unused_parameters_per_backward_call_are_what_the_hooks_saw(group):
    seen = []
    with tracer.record("torch") as rec:
        _train(seen)
    trace = rec.trace
    assert (trace.meta["rank"], trace.meta["world_size"]) == (0, 1)
    assert trace.meta["ddp"][0]["parameters"] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    rank = read_rank(trace)
    assert [list(s.params_with_grad) for s in rank.steps] == seen
    everything = ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert [list(s.unused_params) for s in rank.steps] == [[n for n in everything if n not in got] for got in seen]
    assert rank.steps[1].unused_params == ("b.weight", "b.bias")


def test_recording_changes_none_of_ddps_grads(group):
    plain = _train([])
    with tracer.record("torch"):
        recorded = _train([])
    for step_plain, step_recorded in zip(plain, recorded, strict=True):
        for x, y in zip(step_plain, step_recorded, strict=True):
            assert (x is None) == (y is None)
            if x is not None:
                assert torch.equal(x, y)
