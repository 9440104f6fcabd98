"""`t[key] = v`, index_put_ and masked_fill_ on engine and on real PyTorch 2.13: values, `_version`, nodes,
seq_nrs, errors and grads agree (tests/engine/parity_setitem.py); grads match central differences."""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine
from tests.engine.parity_setitem import PROGRAMS
from tests.engine.parity_suite import parity_tests

test_program_matches_torch = parity_tests(PROGRAMS)


A = np.array([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]])
W = np.array([0.3, -0.8, 1.4])
MASK = A > 0.4  # three elements; fixed, so the function is smooth in a and w

FORMS = {
    "mask = v.sum()": lambda x, v: x.__setitem__(engine.tensor(MASK), v.sum()),
    "mask = v": lambda x, v: x.__setitem__(engine.tensor(MASK), v),
    "index = v": lambda x, v: x.__setitem__(engine.tensor([1, 0]), v),
    "two index tensors": lambda x, v: x.__setitem__((engine.tensor([0, 1]), engine.tensor([2, 0])), v[:2]),
    "index_put_ accumulate": lambda x, v: x.index_put_((engine.tensor([0, 0, 1]), engine.tensor([1, 1, 2])), v,
                                                       accumulate=True),
    "masked_fill_ v.sum()": lambda x, v: x.masked_fill_(engine.tensor(MASK), v.sum()),
    "masked_fill_ 0": lambda x, v: x.masked_fill_(engine.tensor(MASK), 0.0),
    "[...] = v": lambda x, v: x.__setitem__(Ellipsis, v),
}


def _f(form, a, w):
    x = a * a  # history, not a leaf
    form(x, w * 3.0)
    return (x * x.exp()).sum()


@pytest.mark.parametrize("name", sorted(FORMS))
def test_grads_match_central_differences(name):
    """float64 grads of a and w through the write equal central differences."""
    form = FORMS[name]
    a = engine.tensor(A, requires_grad=True)
    w = engine.tensor(W, requires_grad=True)
    ga, gw = engine.autograd.grad(_f(form, a, w), [a, w], allow_unused=True)
    eps = 1e-6
    for base, grad, which in ((A, ga, 0), (W, gw, 1)):
        numeric = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            hi, lo = base.copy(), base.copy()
            hi[i] += eps
            lo[i] -= eps
            args_hi = (hi, W) if which == 0 else (A, hi)
            args_lo = (lo, W) if which == 0 else (A, lo)
            f_hi = _f(form, *(engine.tensor(x) for x in args_hi)).item()
            f_lo = _f(form, *(engine.tensor(x) for x in args_lo)).item()
            numeric[i] = (f_hi - f_lo) / (2 * eps)
        got = np.zeros_like(base) if grad is None else grad.detach().numpy()
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-7)


def test_plain_view_writes_reach_the_base():
    """Without history a write through a view reaches the base and bumps the shared counter once."""
    x = engine.tensor(A)
    row = x[1]
    x[0, 1:] = 9.0
    row[row > 0] = -1.0
    assert x._version == row._version == 2
    np.testing.assert_array_equal(x.numpy(), [[0.5, 9.0, 9.0], [-1.0, -1.0, -0.7]])
