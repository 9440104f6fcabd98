"""In-place ops: hand-derived checks beside the parity programs.

The cases PyTorch and the engine share (updates under no_grad, rebased history, saved tensors modified since,
views sharing versions, casting and shape errors) are parity programs in parity_programs.py, compared with
torch 2.13 event for event.
"""
from __future__ import annotations

import pytest

from agdb import engine as torch


def test_history_on_a_view_goes_through_copy_slices():
    """`base[0].mul_(w)`: the base's grad_fn becomes CopySlices over the mul, and the grads are those derived by
    hand: d/dw sum(base) = base[0] before the write, d/dbase0 = w on row 0 and 1 elsewhere."""
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = torch.tensor([5.0, 7.0], requires_grad=True)
    base = x * 1
    row = base[0]
    row.mul_(w)
    assert base.grad_fn.name() == "torch::autograd::CopySlices"
    assert type(row.grad_fn).__name__ == "AsStridedBackward0"
    assert row.grad_fn.next_functions == ((base.grad_fn, 0),)
    assert base._version == row._version == 1
    base.sum().backward()
    assert x.grad.tolist() == [[5.0, 7.0], [1.0, 1.0]]
    assert w.grad.tolist() == [1.0, 2.0]


def test_iadd_with_something_else_falls_back_to_python():
    """`t += obj` for an unsupported operand returns NotImplemented, so Python raises its TypeError."""
    x = torch.ones(2)
    with pytest.raises(TypeError):
        x += "a string"
