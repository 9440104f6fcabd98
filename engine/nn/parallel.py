"""`torch.nn.parallel`, present so that a script importing DistributedDataParallel for an optional
multi-process mode runs its single-process path; wrapping a module is refused (see engine/distributed.py)."""
from __future__ import annotations

from typing import Any


class DistributedDataParallel:
    """Refused on construction: the engine has no process groups."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("agdb's engine has no torch.distributed process groups (DistributedDataParallel); "
                                  "run the script on real torch with `agdb torch SCRIPT`")


__all__ = ["DistributedDataParallel"]
