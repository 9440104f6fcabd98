"""The programs of tests/engine/parity_hyperbolic_grid.py (sinh, cosh, meshgrid) on the engine and on real PyTorch
2.13: nodes, seq_nrs, order, grads, values and errors."""
from __future__ import annotations

from tests.engine.parity_hyperbolic_grid import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
