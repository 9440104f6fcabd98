"""The reconstruction's conversion of small grads all at once (NOTE [small grads at once] in
tracer/sources/torch/reconstruct.py), against torch's own conversion of each tensor."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agdb.tracer.sources.torch.reconstruct import small_arrays  # noqa: E402
from agdb.tracer.sources.torch.state import NODE, POST, PRE  # noqa: E402


def _log(grads: list) -> list:
    """A log whose pre- and post-hooks saw `grads` (a post-hook's grad_outputs[0] is read too)."""
    half = len(grads) // 2
    return [(PRE, 1, tuple(grads[:half]), 0, 0, 0), (NODE, 2), (POST, 1, tuple(grads[half:-1]), (grads[-1], None))]


def test_each_small_grad_is_its_own_values_dtype_and_shape() -> None:
    """Each is written to the trace as it is (the builder's summary item of a small CPU grad): C-contiguous, and sharing
    no memory with the grad (the program may later change the grad in place: the builder's summary_of copies for
    that)."""
    torch.manual_seed(0)
    grads = [torch.randn(4), torch.randn(2, 3, dtype=torch.float64), torch.randn(4), torch.arange(3),
             torch.ones(2, dtype=torch.bool), torch.randn(4, 4).t(), torch.randn(1, 1).expand(2, 3), torch.randn(16)]
    got = small_arrays(_log(grads))
    assert len(got) == len(grads)
    for t in grads:
        want = t.detach().numpy()
        a = got[id(t)]
        assert a.dtype == want.dtype and a.shape == want.shape and np.array_equal(a, want)
        assert a.flags.c_contiguous and not np.shares_memory(a, want)


def test_big_scalar_history_other_dtypes_and_none_are_left_to_each_conversion() -> None:
    with_history = torch.randn(4, requires_grad=True) * 2
    kept = torch.randn(4)
    left = [torch.randn(17), torch.tensor(3.0), with_history, torch.randn(4, dtype=torch.bfloat16),
            torch.randn(2, dtype=torch.complex64)]
    before = torch.autograd._get_sequence_nr()
    got = small_arrays(_log([None, *left, kept, True]))
    assert torch.autograd._get_sequence_nr() == before  # no node made, so no increment the bridge would see
    assert set(got) == {id(kept)}


def test_a_log_without_grads_gives_nothing() -> None:
    assert small_arrays([(NODE, 1), (PRE, 1, (), 0, 0, 0), (POST, 1, (True, False), ())]) == {}
