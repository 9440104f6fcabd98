"""The classes of fuzz seeds 64014 and 730200 to 740900 (tests/engine/parity_fuzz_classes_more.py) on both engine
and real PyTorch 2.13: graphs, seq_nrs, order, errors, values and layouts agree."""
from __future__ import annotations

from tests.engine.parity_fuzz_classes_more import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
