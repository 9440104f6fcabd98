"""`torch.distributed`, present so that a script importing it for an optional multi-process mode runs its
single-process path; starting a process group is refused (`agdb torch SCRIPT` runs the script on real torch)."""
from __future__ import annotations

from typing import Any

_REFUSED = ("agdb's engine has no torch.distributed process groups ({}); run the script on real torch with "
            "`agdb torch SCRIPT`")


def is_initialized() -> bool:
    """False: no process group is ever started."""
    return False


def init_process_group(*args: Any, **kwargs: Any) -> None:
    """Refused: the engine runs one process."""
    raise NotImplementedError(_REFUSED.format("init_process_group"))


def destroy_process_group(*args: Any, **kwargs: Any) -> None:
    """Refused: there is no process group to destroy."""
    raise NotImplementedError(_REFUSED.format("destroy_process_group"))


__all__ = ["is_initialized", "init_process_group", "destroy_process_group"]
