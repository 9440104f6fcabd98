"""A GAN's layers (tests/engine/parity_gan_layers.py) on both engine and real PyTorch 2.13: graphs, seq_nrs, execution
order, errors and values agree."""
from __future__ import annotations

from tests.engine.parity_gan_layers import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
