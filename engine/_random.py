"""Random numbers: Generator, the default generator, manual_seed, initial_seed and seed.

A Generator wraps numpy's PCG64 bit generator seeded with its seed, so the same seed gives the same values
in the engine, run after run, but not the values PyTorch's Mersenne Twister gives: `engine.manual_seed(0)`
then `engine.rand(3)` repeats itself, and differs from `torch.rand(3)` after `torch.manual_seed(0)`. Seeds
follow PyTorch's rules: any int in [-2**63, 2**64) (negative ones wrap modulo 2**64), anything `int()`
accepts; a new generator starts from PyTorch's default seed, 67280421310721.
"""
from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from ._device import canonical_device

DEFAULT_SEED = 67280421310721
"""The seed a new Generator (and the default one) starts from, as in PyTorch."""


class Generator:
    """A source of random numbers with its own seed and state (`engine.Generator().manual_seed(0)`)."""

    def __init__(self, device: Any = "cpu") -> None:
        self._device = canonical_device(device)
        self.manual_seed(DEFAULT_SEED)

    @property
    def device(self) -> Any:
        """The generator's device (a label, as every engine device is)."""
        from ._device import device
        return device(self._device)

    def manual_seed(self, seed: Any) -> Generator:
        """Seed the generator (values differ from PyTorch's for the same seed); returns the generator."""
        if not isinstance(seed, (int, np.integer)):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = int(seed)
        if not -2**63 <= seed < 2**64:
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed % 2**64
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self) -> int:
        """The seed the generator was last seeded with."""
        return self._seed

    def seed(self) -> int:
        """Seed the generator from the operating system's entropy; returns the new seed."""
        seed = secrets.randbits(64)
        self.manual_seed(seed)
        return seed


default_generator = Generator()
"""The generator random factories use when given no `generator=`."""


def manual_seed(seed: Any) -> Generator:
    """Seed the default generator, as torch.manual_seed; returns it. The same seed gives the same values in
    the engine, though not PyTorch's values (numpy's PCG64, not a Mersenne Twister)."""
    return default_generator.manual_seed(int(seed))


def initial_seed() -> int:
    """The default generator's seed."""
    return default_generator.initial_seed()


def seed() -> int:
    """Seed the default generator nondeterministically; returns the seed."""
    return default_generator.seed()


def rng(fn: str, generator: Any) -> np.random.Generator:
    """The numpy generator behind `generator=` (None: the default one)."""
    if generator is None:
        return default_generator._rng
    if not isinstance(generator, Generator):
        raise TypeError(f"{fn}() received an invalid combination of arguments - got generator="
                        f"{type(generator).__name__}, but expected torch.Generator")
    return generator._rng


__all__ = ["Generator", "default_generator", "manual_seed", "initial_seed", "seed", "rng"]
