"""`torch.utils.data`'s programs (tests/engine/parity_data.py) on the engine and on real PyTorch 2.13: batches,
collation, samplers, splits, errors, and the nodes and seq_nrs that indexing and collating make."""
from __future__ import annotations

from tests.engine.parity_data import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
