"""In-place ops the engine does not record yet refuse with a clear error instead of diverging from PyTorch.

The cases PyTorch and the engine share (updates under no_grad, rebased history, saved tensors modified since,
views sharing versions, casting and shape errors) are parity programs in parity_programs.py, compared with
torch 2.13 event for event.
"""
from __future__ import annotations

import pytest

import engine as torch


def test_history_on_a_view_is_refused_not_half_recorded():
    """PyTorch records a CopySlices on the base; the engine would rebase the view alone, so it refuses."""
    w = torch.ones(2, 2, requires_grad=True)
    base = w * 1
    with pytest.raises(NotImplementedError, match="views"):
        base[0].mul_(2)
    assert base.grad_fn.name() == "MulBackward0" and base._version == 0  # nothing half done


def test_iadd_with_something_else_falls_back_to_python():
    """`t += obj` for an unsupported operand returns NotImplemented, so Python raises its TypeError."""
    x = torch.ones(2)
    with pytest.raises(TypeError):
        x += "a string"
