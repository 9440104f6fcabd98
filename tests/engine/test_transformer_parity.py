"""The decoder, Transformer, SDPA math path, RNN dropout and narrow/new_* programs
(tests/engine/parity_transformer.py) on both engine and real PyTorch 2.13: graphs, seq_nrs, execution order, errors
and values agree."""
from __future__ import annotations

from tests.engine.parity_suite import parity_tests
from tests.engine.parity_transformer import MKLDNN_PROGRAMS, PROGRAMS

test_program_matches_torch = parity_tests(PROGRAMS)
test_mkldnn_program_matches_torch = parity_tests(MKLDNN_PROGRAMS)
