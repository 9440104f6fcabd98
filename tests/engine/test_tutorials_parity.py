"""The tutorials' programs (parity_tutorials.py) on engine and on real PyTorch 2.13: graphs, seq_nrs, order,
errors and values agree."""
from __future__ import annotations

from tests.engine.parity_suite import parity_tests
from tests.engine.parity_tutorials import PROGRAMS

test_program_matches_torch = parity_tests(PROGRAMS)
