"""`torch.amp.GradScaler` as a CPU-only torch has it: a scaler for "cuda" is disabled (with torch's warning), so
`scale`, `unscale_`, `step` and `update` are the plain training step, and a script written for mixed precision
runs its float32 path. Scaling on "cpu" is refused; `agdb torch SCRIPT` runs such a script on real torch.
"""
from __future__ import annotations

import warnings
from typing import Any


class GradScaler:
    """Loss scaling for mixed precision; disabled wherever the engine runs (no CUDA)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        # As torch's, a disabled scaler keeps none of its settings: their getters raise AttributeError.
        self._device = device
        self._enabled = enabled
        if enabled and device == "cuda":
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            self._enabled = False
        elif enabled:
            raise NotImplementedError(f"agdb's engine has no loss scaling on {device!r} (GradScaler(enabled=True)); "
                                      "run the script on real torch with `agdb torch SCRIPT`")

    def is_enabled(self) -> bool:
        """False: the scaler is disabled."""
        return self._enabled

    def scale(self, outputs: Any) -> Any:
        """The outputs themselves."""
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        """Nothing to unscale."""

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """`optimizer.step(*args, **kwargs)`."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        """Nothing to update."""

    def get_scale(self) -> float:
        """1.0, as torch's disabled scaler says."""
        return 1.0

    def get_growth_factor(self) -> float:
        """Raises AttributeError on a disabled scaler, as torch's."""
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        """Raises AttributeError on a disabled scaler, as torch's."""
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        """Raises AttributeError on a disabled scaler, as torch's."""
        return self._growth_interval

    def state_dict(self) -> dict:
        """{}: a disabled scaler has no state."""
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Nothing to load into a disabled scaler."""


__all__ = ["GradScaler"]
