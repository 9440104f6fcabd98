"""engine.optim.RMSprop and engine.optim.Adagrad against torch.optim (2.13, CPU), with the checks of
test_optim_parity.py: parameters, state and `_version` after every step, param_groups, state_dict and
errors (type and message)."""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine
from tests.engine import test_optim_parity as base

torch = pytest.importorskip("torch")

RMSPROP = [
    dict(),
    dict(lr=0.05, alpha=0.9, eps=1e-6),
    dict(lr=0.05, weight_decay=0.1),
    dict(lr=0.05, maximize=True),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, centered=True),
    dict(lr=0.05, centered=True, alpha=0.3),  # 1 - alpha >= 0.5: lerp's other formula
    dict(lr=0.02, momentum=0.5, centered=True, weight_decay=0.05, maximize=True),
    dict(lr=0.02, momentum=0, alpha=0),
]
ADAGRAD = [
    dict(),
    dict(lr=0.1, lr_decay=0.1),
    dict(lr=0.1, weight_decay=0.1),
    dict(lr=0.1, initial_accumulator_value=0.5),
    dict(lr=0.1, eps=1e-3, maximize=True),
    dict(lr=0.05, lr_decay=0.5, weight_decay=0.2, initial_accumulator_value=0.1, maximize=True),
]
ADADELTA = [
    dict(),
    dict(lr=0.5, rho=0.5, eps=1e-4),
    dict(lr=0.5, weight_decay=0.1),
    dict(lr=0.5, maximize=True),
    dict(lr=0.1, rho=0.0, weight_decay=0.05, maximize=True),
]
CONFIGS = [("RMSprop", kw) for kw in RMSPROP] + [("Adagrad", kw) for kw in ADAGRAD] + \
    [("Adadelta", kw) for kw in ADADELTA]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "kwargs"), CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_steps_match_torch(name, kwargs, dtype):
    base.test_steps_match_torch(name, kwargs, dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adagrad_state_is_made_in_the_constructor(dtype):
    ours, theirs = base._pair(dtype)
    opt = engine.optim.Adagrad(ours, initial_accumulator_value=0.25)
    topt = torch.optim.Adagrad(theirs, initial_accumulator_value=0.25)
    base._compare_state(ours, theirs, opt, topt, dtype)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta"])
def test_param_groups_and_repr(name):
    def run(lib):
        a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
        opt = getattr(lib.optim, name)([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, weight_decay=0.01)
        opt.add_param_group({"params": (c,), "eps": 1e-3})
        return base._groups(opt), repr(opt), dict(opt.defaults), len(opt.state)
    assert run(engine) == run(torch)


@pytest.mark.parametrize(("name", "kwargs"), [("RMSprop", {"momentum": 0.9, "centered": True}),
                                              ("Adagrad", {"lr_decay": 0.1, "initial_accumulator_value": 0.2}),
                                              ("Adadelta", {"rho": 0.8})])
def test_state_dict_load_state_dict_and_added_group(name, kwargs):
    def run(lib):
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
        c = lib.tensor([4.0], dtype=lib.float64, requires_grad=True)
        opt = getattr(lib.optim, name)([{"params": [a, b]}], lr=0.1, **kwargs)
        opt.add_param_group({"params": [c], "lr": 0.01})  # Adagrad: c's state is made on its first step
        added = len(opt.state)
        for _ in range(2):
            a.grad, c.grad = lib.tensor([0.5, -1.0], dtype=lib.float64), lib.tensor([2.0], dtype=lib.float64)
            opt.step()
        sd = opt.state_dict()
        shape = {"keys": list(sd), "groups": sd["param_groups"], "added": added,
                 "state": {i: {k: (v.tolist(), str(v.dtype), v._version) for k, v in s.items()}
                           for i, s in sd["state"].items()},
                 "shared": all(sd["state"][0][k] is opt.state[a][k] for k in opt.state[a])}
        a2 = lib.tensor([1.0, 2.0], dtype=lib.float32, requires_grad=True)
        b2 = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
        c2 = lib.tensor([4.0], dtype=lib.float64, requires_grad=True)
        opt2 = getattr(lib.optim, name)([{"params": [a2, b2]}, {"params": [c2]}], lr=0.5)
        opt2.load_state_dict(sd)
        loaded = {"groups": base._groups(opt2),
                  "state": [(list(s), [(str(v.dtype), v.tolist()) for v in s.values()]) for s in opt2.state.values()]}
        for p in (a2, c2):
            p.grad = lib.ones_like(p)
        opt2.step()
        return shape, loaded, a2.tolist(), c2.tolist(), {k: v._version for k, v in opt2.state[c2].items()}
    ours, theirs = run(engine), run(torch)
    assert ours[0] == theirs[0]
    assert ours[1]["groups"] == theirs[1]["groups"]
    for (keys, vals), (tkeys, tvals) in zip(ours[1]["state"], theirs[1]["state"], strict=True):
        assert keys == tkeys
        for (dt, v), (tdt, tv) in zip(vals, tvals, strict=True):
            assert dt == tdt
            np.testing.assert_allclose(v, tv, rtol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-12)
    assert ours[4] == theirs[4]


ERRORS = [
    "lib.optim.RMSprop([p], lr=-1)",
    "lib.optim.RMSprop([p], eps=-1e-3)",
    "lib.optim.RMSprop([p], momentum=-0.5)",
    "lib.optim.RMSprop([p], weight_decay=-1)",
    "lib.optim.RMSprop([p], alpha=-0.1)",
    "lib.optim.RMSprop([])",
    "lib.optim.RMSprop(p)",
    "lib.optim.RMSprop([p * 2])",
    "lib.optim.RMSprop([p]).add_param_group({'params': [p]})",
    "lib.optim.RMSprop([p], 0.1, 0.9, 1e-8, 0, 0, False, False, None, False, False, 1)",
    "lib.optim.Adagrad([p], lr=-0.1)",
    "lib.optim.Adagrad([p], lr_decay=-1)",
    "lib.optim.Adagrad([p], weight_decay=-0.5)",
    "lib.optim.Adagrad([p], initial_accumulator_value=-1.0)",
    "lib.optim.Adagrad([p], eps=-1)",
    "lib.optim.Adagrad([])",
    "lib.optim.Adagrad([1])",
    "lib.optim.Adagrad([p], 0.1, 0, 0, 0, 1e-10, None, False)",
    "lib.optim.Adagrad([p]).load_state_dict({'state': {}, 'param_groups': []})",
]


@pytest.mark.parametrize("src", ERRORS)
def test_errors_match_torch(src):
    base.test_errors_match_torch(src)


@pytest.mark.parametrize(("name", "option"), [("RMSprop", "foreach"), ("RMSprop", "capturable"),
                                              ("RMSprop", "differentiable"), ("Adagrad", "foreach"),
                                              ("Adagrad", "fused"), ("Adagrad", "differentiable")])
def test_unsupported_options_are_refused(name, option):
    p = engine.ones(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"agdb.*{option}=True"):
        getattr(engine.optim, name)([p], **{option: True})
    with pytest.raises(NotImplementedError, match="agdb.*lr"):
        getattr(engine.optim, name)([p], lr=engine.tensor(0.1))
    opt = getattr(engine.optim, name)([p])
    opt.param_groups[0][option] = True
    p.grad = engine.ones(2)
    with pytest.raises(NotImplementedError, match=f"agdb.*{option}=True"):
        opt.step()
