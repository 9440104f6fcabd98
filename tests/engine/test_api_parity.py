"""The small APIs of tests/engine/parity_api.py on the engine and on real PyTorch 2.13: values, errors, nodes and
seq_nrs (a `.data` write makes no node)."""
from __future__ import annotations

from tests.engine.parity_api import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
