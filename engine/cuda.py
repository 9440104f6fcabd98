"""`torch.cuda` as a CPU-only torch answers it: no device, seeds accepted, device queries refused.

The engine's "cuda:N" devices are labels for checking device semantics; a script that asks whether CUDA is
available gets a CPU-only torch's answer, so it takes its CPU path as it would on such a machine.
"""
from __future__ import annotations

from typing import Any

from . import _cuda_amp as amp  # noqa: F401 - torch.cuda.amp

_NOT_COMPILED = "Torch not compiled with CUDA enabled"


def is_available() -> bool:
    """False: no CUDA device."""
    return False


def device_count() -> int:
    """0."""
    return 0


def is_initialized() -> bool:
    """False."""
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as a CPU-only torch does (no CUDA generator to seed)."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored, as a CPU-only torch does."""


def empty_cache() -> None:
    """Nothing to free."""


def memory_allocated(device: Any = None) -> int:
    """0 bytes."""
    return 0


def current_device() -> int:
    """Refused: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def get_device_name(device: Any = None) -> str:
    """Refused: no CUDA."""
    raise AssertionError(_NOT_COMPILED)


def synchronize(device: Any = None) -> None:
    """Refused: no CUDA."""
    raise AssertionError(_NOT_COMPILED)
