"""The same programs on engine and on real PyTorch 2.13: graphs, seq_nrs, order, errors and grads agree."""
from __future__ import annotations

from tests.engine.parity_programs import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
