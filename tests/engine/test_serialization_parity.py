"""The programs of tests/engine/parity_serialization.py (torch.save, torch.load) on the engine and on real PyTorch
2.13: what a round trip gives back (types, values, grad state), that it makes no node, and its refusals."""
from __future__ import annotations

import io

import pytest

from agdb import engine
from tests.engine.parity_serialization import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)


@pytest.mark.torch
def test_a_file_torch_wrote_is_refused_naming_the_bridge() -> None:
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    torch.save({"x": torch.ones(2)}, buffer)
    buffer.seek(0)
    with pytest.raises(RuntimeError, match=r"real torch.*`agdb torch SCRIPT`"):
        engine.load(buffer)
