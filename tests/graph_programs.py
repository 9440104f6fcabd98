"""Small recorded programs whose drawn graphs the layout and TUI tests pin: a diamond, an edge that skips a
layer, and a loop that folds. Each is recorded on a fresh thread, so its seq_nrs start at 0 in every process."""
from __future__ import annotations

import threading

from agdb import engine as torch
from agdb import tracer
from agdb.tracer.store.trace import Trace


def recorded_on_fresh_thread(program, name: str = "graph") -> Trace:  # snapshots pin the lines below
    result: list = []

    def run() -> None:
        with tracer.record() as rec:
            program()
        result.append(rec.trace)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    thread.join()
    return result[0]


def diamond() -> Trace:
    """y = x.exp() feeds sin and cos, which meet again in an add: ExpBackward0 gets two grads."""
    def program() -> None:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        (y.sin() + y.cos()).sum().backward()
    return recorded_on_fresh_thread(program)


def skip() -> Trace:
    """(x.exp() * x).sum(): MulBackward0 (topo 2) has an edge straight to x's AccumulateGrad (topo 0)."""
    def program() -> None:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        (x.exp() * x).sum().backward()
    return recorded_on_fresh_thread(program)


def loop(steps: int = 100) -> Trace:
    """h = tanh(h * w + x) `steps` times from zeros, then backward: 3 * steps + 3 nodes, folded into 4 boxes."""
    def program() -> None:
        w = torch.tensor([0.5, -0.5, 0.25, 1.0], requires_grad=True)
        x = torch.tensor([0.1, 0.2, 0.3, 0.4], requires_grad=True)
        h = torch.zeros(4)
        for _ in range(steps):
            h = torch.tanh(h * w + x)
        h.sum().backward()
    return recorded_on_fresh_thread(program)
