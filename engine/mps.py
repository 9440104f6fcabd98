"""`torch.mps` as torch on Linux answers it."""
from __future__ import annotations


def manual_seed(seed: int) -> None:
    """Accepted and ignored (no MPS generator to seed)."""
