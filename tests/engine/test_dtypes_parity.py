"""The float16 / bfloat16 programs (tests/engine/parity_dtypes.py) on both engine and real PyTorch 2.13: graphs,
seq_nrs, execution order, errors, dtypes and values agree; the scalar and legacy type names every public path
prints (tests/engine/parity_dtype_names.py), for each dtype; and the engine's refusal of bfloat16 tensors."""
from __future__ import annotations

import pytest

from agdb import engine
from tests.engine.parity_dtype_names import PROGRAMS as NAME_PROGRAMS
from tests.engine.parity_dtypes import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)
test_dtype_names_match_torch = parity_tests(NAME_PROGRAMS)


@pytest.mark.parametrize("make", [lambda: engine.tensor([1.0], dtype=engine.bfloat16),
                                  lambda: engine.zeros(2, dtype=engine.bfloat16),
                                  lambda: engine.ones(2).to(engine.bfloat16)])
def test_bfloat16_tensors_are_refused_naming_the_bridge(make) -> None:
    """numpy has no bfloat16: making such a tensor raises, naming what is missing and `agdb torch SCRIPT`."""
    with pytest.raises(NotImplementedError, match=r"no bfloat16 tensors.*agdb torch SCRIPT"):
        make()
