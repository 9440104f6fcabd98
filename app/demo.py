"""`make demo` until the TUI lands: runs a small graph on the engine and prints what it did.

Shows the seq_nr of every backward node and the order the engine ran them, as seen by an observer.
"""
from __future__ import annotations

import engine as torch


class _PrintingObserver:
    """Prints each node as the engine starts it."""

    def __init__(self) -> None:
        self.step = 0

    def node_started(self, graph_task, node, inputs) -> None:
        self.step += 1
        seq = node._sequence_nr()
        seq_text = "2**64-1" if seq == 2**64 - 1 else str(seq)
        print(f"  {self.step:2d}. {node.name():<34} seq_nr={seq_text:<8} topo={node._topological_nr()}")


def main() -> None:
    """Build a diamond with a shared leaf and run backward under an observer."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    y = x.exp()
    z = (y.sin() * w + y.cos()).sum()
    print("forward built; next seq_nr on this thread:", torch.autograd._get_sequence_nr())
    print("backward execution order:")
    with torch.add_observer(_PrintingObserver()):
        z.backward()
    print("x.grad =", x.grad)
    print("w.grad =", w.grad)


if __name__ == "__main__":
    main()
