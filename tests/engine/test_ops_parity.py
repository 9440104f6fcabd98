"""The ops of tests/engine/parity_ops.py on the engine and on real PyTorch 2.13: nodes, seq_nrs, order, grads,
values (the random ops' shapes and dtypes only) and errors."""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine
from tests.engine.parity_ops import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)


@pytest.mark.torch
def test_topk_tie_order_matches_torch():
    """topk's indices among equal values and NaNs, for both of torch's selection paths (nth_element + sort,
    partial_sort when k * 64 <= n), both directions and sorted=False, on seeded tie-heavy rows."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for n in [*range(1, 34), 70, 131]:
        for trial in range(4):
            row = rng.integers(0, 3 if trial % 2 else 9, n).astype(float)
            if trial == 3 and n > 2:
                row[[1, n // 2]] = np.nan
            ours_x, theirs_x = engine.tensor(row), torch.tensor(row)
            for k in sorted(k for k in {0, 1, 2, n // 2, n - 1, n} if 0 <= k <= n):
                for largest, srt in ((True, True), (False, True), (True, False), (False, False)):
                    ours = ours_x.topk(k, largest=largest, sorted=srt).indices.tolist()
                    theirs = theirs_x.topk(k, largest=largest, sorted=srt).indices.tolist()
                    assert ours == theirs, (row.tolist(), k, largest, srt)
