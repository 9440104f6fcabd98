"""The ops of tests/engine/parity_ops.py on the engine and on real PyTorch 2.13: nodes, seq_nrs, order, grads,
values (the random ops' shapes and dtypes only) and errors."""
from __future__ import annotations

from tests.engine.parity_ops import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
