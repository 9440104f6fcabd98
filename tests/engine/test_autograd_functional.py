"""autograd.functional (jacobian, hessian, vjp, hvp) against torch 2.13: values, structure and errors."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from agdb import engine

torch = pytest.importorskip("torch")

X = [[0.3, -1.2, 0.7], [1.1, 0.2, -0.4]]
Y = [0.5, 1.5, -2.0]


def _f2(a, b):
    return (a.exp() * b).sum(0)


CASES = {
    "jac_single": lambda t, AF, x, y: AF.jacobian(lambda a: a.sin() * 2, y),
    "jac_two_inputs": lambda t, AF, x, y: AF.jacobian(_f2, (x, y)),
    "jac_tuple_of_one": lambda t, AF, x, y: AF.jacobian(lambda a: a * a, (y,)),
    "jac_two_outputs": lambda t, AF, x, y: AF.jacobian(lambda a: (a * 2, a.sum()), y),
    "jac_create_graph": lambda t, AF, x, y: AF.jacobian(lambda a: a.pow(3), y, create_graph=True),
    "jac_unused": lambda t, AF, x, y: AF.jacobian(lambda a, b: a * 2, (y, y)),
    "hess_single": lambda t, AF, x, y: AF.hessian(lambda a: a.pow(3).sum(), y),
    "hess_two_inputs": lambda t, AF, x, y: AF.hessian(lambda a, b: (a.exp() * b).sum(), (x, y)),
    "vjp": lambda t, AF, x, y: AF.vjp(_f2, (x, y), t.tensor([1.0, -2.0, 0.5], dtype=t.float64)),
    "vjp_scalar": lambda t, AF, x, y: AF.vjp(lambda a: (a * a).sum(), y),
    "vjp_create_graph": lambda t, AF, x, y: AF.vjp(lambda a: (a * a).sum(), y, create_graph=True),
    "hvp": lambda t, AF, x, y: AF.hvp(lambda a: a.pow(3).sum(), y, t.tensor([1.0, 2.0, 3.0], dtype=t.float64)),
    "hvp_two_inputs": lambda t, AF, x, y: AF.hvp(lambda a, b: (a.exp() * b).sum(), (x, y), (x, y)),
    "err_strict": lambda t, AF, x, y: AF.jacobian(lambda a, b: a * 2, (y, y), strict=True),
    "err_strict_outputs": lambda t, AF, x, y: AF.vjp(lambda a: a.detach(), y, y, strict=True),
    "err_vjp_needs_v": lambda t, AF, x, y: AF.vjp(lambda a: a * 2, y),
    "err_v_size": lambda t, AF, x, y: AF.vjp(lambda a: a * 2, y, t.tensor([1.0], dtype=t.float64)),
    "err_v_length": lambda t, AF, x, y: AF.hvp(lambda a, b: (a * b).sum(), (y, y), (y,)),
    "err_not_tensor": lambda t, AF, x, y: AF.jacobian(lambda a: a, (y, 3)),
    "err_hessian_scalar": lambda t, AF, x, y: AF.hessian(lambda a: a * 2, y),
    "err_hvp_scalar": lambda t, AF, x, y: AF.hvp(lambda a: a * 2, y, y),
    "err_strategy": lambda t, AF, x, y: AF.jacobian(lambda a: a, y, strategy="x"),
}


def _describe(r):
    if isinstance(r, tuple):
        return ("tuple", [_describe(e) for e in r])
    return (tuple(r.shape), r.requires_grad, r.grad_fn is not None, np.round(np.array(r.tolist()), 10).tolist())


@pytest.mark.parametrize("name", CASES)
def test_functional_matches_torch(name):
    results = []
    for t in (torch, engine):
        AF = importlib.import_module(t.__name__ + ".autograd.functional")  # noqa: N806 - torch's usual alias
        x = t.tensor(X, dtype=t.float64)
        y = t.tensor(Y, dtype=t.float64)
        try:
            results.append(_describe(CASES[name](t, AF, x, y)))
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            results.append((type(e).__name__, str(e)))
    assert results[1] == results[0]


def test_jacobian_and_hessian_of_a_hand_derived_function():
    """f(a, b) = a0 * b + a1 ** 2: J_a = [b, 2 a1], J_b = a0; H_aa = [[0, 0], [0, 2]], H_ab = H_ba = [1, 0]."""
    a = engine.tensor([1.5, -0.5], dtype=engine.float64)
    b = engine.tensor(2.0, dtype=engine.float64)
    ja, jb = engine.autograd.functional.jacobian(lambda a, b: a[0] * b + a[1] ** 2, (a, b))
    assert ja.tolist() == [2.0, -1.0] and jb.tolist() == 1.5
    (haa, hab), (hba, hbb) = engine.autograd.functional.hessian(lambda a, b: a[0] * b + a[1] ** 2, (a, b))
    assert haa.tolist() == [[0.0, 0.0], [0.0, 2.0]] and hab.tolist() == [1.0, 0.0]
    assert hba.tolist() == [1.0, 0.0] and hbb.tolist() == 0.0
    _, hv = engine.autograd.functional.hvp(lambda a: a[0] * a[1] + a[1] ** 2, a, engine.tensor([1.0, 1.0],
                                                                                                 dtype=engine.float64))
    assert hv.tolist() == [1.0, 3.0]  # H = [[0, 1], [1, 2]]


def test_vectorize_and_forward_mode_are_refused():
    y = engine.tensor(Y, dtype=engine.float64)
    AF = engine.autograd.functional  # noqa: N806
    with pytest.raises(NotImplementedError, match="vectorize"):
        AF.jacobian(lambda a: a * 2, y, vectorize=True)
    with pytest.raises(NotImplementedError, match="forward-mode"):
        AF.jacobian(lambda a: a * 2, y, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="forward-mode"):
        AF.hessian(lambda a: (a * a).sum(), y, outer_jacobian_strategy="forward-mode")
