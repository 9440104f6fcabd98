"""nn.LSTM's programs (tests/engine/parity_rnn.py) on both engine and real PyTorch 2.13: graphs, seq_nrs, execution
order, errors and values agree; float32 values within float32 rounding."""
from __future__ import annotations

import numpy as np
import pytest

from tests.engine.parity_rnn import FLOAT32_GRADS, MKLDNN_PROGRAMS, PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
test_mkldnn_program_matches_torch = parity_tests(MKLDNN_PROGRAMS)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(n for n in {**PROGRAMS, **MKLDNN_PROGRAMS} if "float32" in n))
def test_float32_values_match_torch(name: str) -> None:
    """The float32 programs' outputs and grads, which the event comparison checks by dtype and shape, agree with
    torch's to float32 rounding."""
    import torch

    import agdb.engine as engine
    from tests.engine.parity import describe

    FLOAT32_GRADS.clear()
    program = {**PROGRAMS, **MKLDNN_PROGRAMS}[name]
    describe(engine, program)
    describe(torch, program)
    (ours, theirs), = FLOAT32_GRADS.values()
    for a, b in zip(ours, theirs, strict=True):
        assert np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
