"""Gradient clipping and lr_scheduler programs (tests/engine/parity_schedule.py) on the engine and on real
PyTorch 2.13: grads, norms, versions, learning rates step by step, errors, and no node from clipping."""
from __future__ import annotations

from tests.engine.parity_schedule import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
