"""`torch.accelerator` as a CPU-only torch answers it: no accelerator."""
from __future__ import annotations


def is_available() -> bool:
    """False."""
    return False


def device_count() -> int:
    """0."""
    return 0


def current_accelerator(check_available: bool = False) -> None:
    """None: no accelerator."""
    return None


def current_device_index() -> int:
    """Refused: no accelerator."""
    raise RuntimeError("Cannot access accelerator device when none is available.")
