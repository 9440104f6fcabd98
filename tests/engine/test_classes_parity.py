"""The fuzzer-found classes on engine and on real PyTorch 2.13: graphs, seq_nrs, order, errors, values."""
from __future__ import annotations

from tests.engine.parity_classes import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
