"""Three ops on one line, for the column-precise culprit snapshot (tests/snapshots/test_snapshots.py)."""
from agdb import engine as torch


def model(y, w):
    z = (y.sin() * w).sum()
    return z


y = torch.tensor([0.5, 1.0], requires_grad=True)
w = torch.tensor([2.0, -1.0], requires_grad=True)
model(y, w).backward()
