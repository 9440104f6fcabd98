"""`torch.utils`: the parts a training script reaches (`torch.utils.data`)."""
from __future__ import annotations

from . import data

__all__ = ["data"]
