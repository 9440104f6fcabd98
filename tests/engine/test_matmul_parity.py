"""matmul swept over shape pairs, grad combinations and layouts, on engine and on real PyTorch 2.13."""
from __future__ import annotations

from tests.engine.parity_matmul import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
