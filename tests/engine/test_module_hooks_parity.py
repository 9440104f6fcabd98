"""Module backward hooks (parity_module_hooks.py) on engine and on real PyTorch 2.13: BackwardHookFunction
nodes, seq_nrs, hook order, grad_input/grad_output, replacements and errors agree."""
from __future__ import annotations

from tests.engine.parity_module_hooks import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
