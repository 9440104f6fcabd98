"""The gradcheck programs (parity_gradcheck.py) on engine and on real PyTorch 2.13: results, how far each
check moves the seq_nr counter, and the seq_nrs of nodes made after it."""
from __future__ import annotations

from tests.engine.parity_gradcheck import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
