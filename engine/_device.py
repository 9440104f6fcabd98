"""Device labels: `cpu`, `cuda:0`, ... No accelerator is needed; a device is a queue and a thread."""
from __future__ import annotations

from . import _state
from ._args import DEVICE_TYPES


class device:
    """A device label that compares equal to its string form, like torch.device."""

    __slots__ = ("type", "index")

    def __init__(self, spec: str | device, index: int | None = None) -> None:
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device() expected a string like 'cpu' or 'cuda:0', got {type(spec).__name__}")
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda", "meta"):
            if kind in DEVICE_TYPES.split(", "):
                raise RuntimeError(f"engine supports the devices cpu, cuda:N and meta; got {spec}")
            raise RuntimeError(f"Expected one of {DEVICE_TYPES} device type at start of device string: {spec}")
        if idx:
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{spec}'")
            index = int(idx)
        self.type, self.index = kind, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))


def canonical_device(spec: object) -> str:
    """The engine's string form of a device argument (`'cuda'` becomes `'cuda:0'`)."""
    if spec is None:
        return "cpu"
    d = device(spec)  # type: ignore[arg-type]
    if d.type == "cuda":
        _state.cuda_seen = True
    return "cuda:0" if d.type == "cuda" and d.index is None else str(d)  # `cuda` means the current device, 0
