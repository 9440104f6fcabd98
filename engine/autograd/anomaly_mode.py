"""Anomaly detection: forward stacks on nodes and NaN checks on backward outputs (engine-semantics §11.3–§11.4)."""
from __future__ import annotations

import warnings

from .._node import anomaly


def is_anomaly_enabled() -> bool:
    """Whether anomaly mode is on (process-wide, as in PyTorch)."""
    return anomaly.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly mode checks backward outputs for NaN."""
    return anomaly.check_nan


class detect_anomaly:
    """Context manager and decorator that turns anomaly mode on inside its block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = anomaly.enabled
        self.check_nan = check_nan
        self.prev_check_nan = anomaly.check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        anomaly.enabled, anomaly.check_nan = True, self.check_nan

    def __exit__(self, *exc: object) -> None:
        anomaly.enabled, anomaly.check_nan = self.prev, self.prev_check_nan

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Set anomaly mode on or off; takes effect at once and, as a context, restores the old mode."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev, self.prev_check_nan = anomaly.enabled, anomaly.check_nan
        anomaly.enabled, anomaly.check_nan = bool(mode), bool(check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        anomaly.enabled, anomaly.check_nan = self.prev, self.prev_check_nan
