"""Two real-model programs whose graphs `agdb export --collapse` must fold: an RNN-like loop and an MLP's training.

Each program is a function of the torch module it runs on (agdb's `engine`, or real `torch`), so bench/export.py
records them with `tracer.record()`, and agdb can record this file as a script:

    agdb record bench/fold_programs.py -o loop.agdb -- loop 25000    # the 25,000-step loop: 75,003 nodes
    agdb record bench/fold_programs.py -o mlp.agdb -- mlp 20 3       # a 20-layer MLP trained for 3 steps
    agdb export loop.agdb -o loop.svg --collapse

**The loop** (``rnn_loop``): ``h = tanh(h * w + x)`` for `steps` steps from ``h = 0``, then ``h.sum()`` and
backward. ``w`` (the shared weight) and ``x`` (the shared input) are leaves that require grad, so every step's
MulBackward0 and AddBackward0 have an edge to the same two AccumulateGrad nodes. Nodes: 3 a step, plus
SumBackward0 and the two AccumulateGrads (75,003 at 25,000 steps). Linear-chain folding alone draws every node:
each step's Mul and Add have two children (the step before, and a leaf).

**The training** (``mlp_training``): ``layers`` Linear layers (32 wide, 10 classes out) with a ReLU after all but
the last, CrossEntropyLoss, SGD with momentum; `steps` steps of zero_grad, forward, backward, step on one fixed
batch of 16. Per step: TBackward0, AddmmBackward0 (and ReluBackward0) per layer, LogSoftmaxBackward0,
NllLossBackward0; the 2 x `layers` AccumulateGrads are shared by every step's backward.
"""
from __future__ import annotations

import sys
from typing import Any

LOOP_STEPS = 25_000
"""Steps of the loop in the issue's case."""
MLP_LAYERS = 20
MLP_STEPS = 3
WIDTH = 32
CLASSES = 10
BATCH = 16


def rnn_loop(torch: Any, steps: int = LOOP_STEPS) -> None:
    """`steps` rounds of h = tanh(h * w + x) with one weight w and one input x, then backward of h.sum()."""
    w = torch.full((4,), 0.5, requires_grad=True)
    x = torch.full((4,), 0.1, requires_grad=True)
    h = torch.zeros(4)
    for _ in range(steps):
        h = torch.tanh(h * w + x)
    h.sum().backward()


def mlp_training(torch: Any, layers: int = MLP_LAYERS, steps: int = MLP_STEPS) -> None:
    """Train a `layers`-layer MLP for `steps` steps (CrossEntropyLoss, SGD with momentum) on one batch."""
    nn = torch.nn
    torch.manual_seed(0)
    parts: list[Any] = []
    for i in range(layers):
        parts.append(nn.Linear(WIDTH, CLASSES if i == layers - 1 else WIDTH))
        if i < layers - 1:
            parts.append(nn.ReLU())
    model = nn.Sequential(*parts)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(BATCH, WIDTH)
    targets = torch.randint(0, CLASSES, (BATCH,))
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()


def main(argv: list[str]) -> None:
    """`loop [STEPS]` or `mlp [LAYERS [STEPS]]`, on `import torch` (agdb's engine when agdb records this file)."""
    import torch

    if not argv or argv[0] not in ("loop", "mlp"):
        raise SystemExit("usage: fold_programs.py loop [STEPS] | mlp [LAYERS [STEPS]]")
    numbers = [int(a) for a in argv[1:]]
    if argv[0] == "loop":
        rnn_loop(torch, *numbers[:1])
    else:
        mlp_training(torch, *numbers[:2])


if __name__ == "__main__":
    main(sys.argv[1:])
