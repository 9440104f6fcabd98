"""A whole training loop runs unchanged on the engine and on torch 2.13: an nn.Sequential MLP with
CrossEntropyLoss and Adam, 3 steps from the same initial weights, gives the same graph, seq_nrs, losses and
parameters after every step."""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine

RNG = np.random.default_rng(7)
W1, B1 = RNG.normal(size=(5, 4)), RNG.normal(size=5)
W2, B2 = RNG.normal(size=(3, 5)), RNG.normal(size=3)
X = RNG.normal(size=(6, 4))
Y = np.array([0, 2, 1, 1, 0, 2])


def _graph(root) -> list[tuple[str, int]]:
    """(name, seq_nr relative to the root's) of every node below `root`, in depth-first order."""
    out, stack, seen = [], [root], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        seq = node._sequence_nr()
        out.append((type(node).__name__ if not hasattr(node, "name") else node.name(),
                    -1 if seq >= 2**63 else seq - root._sequence_nr()))
        stack.extend(child for child, _ in reversed(node.next_functions))
    return out


def train(torch) -> list[dict]:
    """The user's program, written against `torch`: three Adam steps of a two-layer MLP."""
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    with torch.no_grad():
        for param, value in zip(model.parameters(), (W1, B1, W2, B2), strict=True):
            param.copy_(torch.tensor(value, dtype=torch.float64))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    x, y = torch.tensor(X, dtype=torch.float64), torch.tensor(Y)
    steps = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        steps.append({"loss": loss.item(), "graph": _graph(loss.grad_fn),
                      "params": [p.detach().numpy().copy() for p in model.parameters()],
                      "exp_avg": [optimizer.state[p]["exp_avg"].numpy().copy() for p in model.parameters()]})
    return steps


@pytest.mark.torch
def test_an_mlp_trained_with_adam_matches_torch_step_by_step():
    """Node names and relative seq_nrs of every step's graph, the losses, the parameters and Adam's exp_avg
    after each of the 3 steps agree with torch 2.13 (float64, to 1e-12)."""
    torch = pytest.importorskip("torch")
    ours, theirs = train(engine), train(torch)
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a["graph"] == b["graph"], step
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-12), step
        for mine, real in zip(a["params"] + a["exp_avg"], b["params"] + b["exp_avg"], strict=True):
            np.testing.assert_allclose(mine, real, rtol=0, atol=1e-12)


def test_the_loss_goes_down_on_the_engine():
    """Without torch: three Adam steps on the engine lower the loss (an independent sanity check)."""
    losses = [s["loss"] for s in train(engine)]
    assert losses[0] > losses[1] > losses[2]
