"""engine.optim against torch.optim (2.13, CPU): the same parameters, grads and options give the same
parameters, optimizer state, `_version` counters, param_groups and state_dict after every step, and the
same errors (type and message)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from agdb import engine

torch = pytest.importorskip("torch")

SHAPES = [(3,), (2, 3), ()]
STEPS = 4


def _pair(dtype: str):
    """The same leaf parameters in both libraries (one of them gets no grad on odd steps)."""
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ours = [engine.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ours, theirs


def _grads(step: int, dtype: str) -> list[np.ndarray | None]:
    rng = np.random.default_rng(100 + step)
    grads = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    if step % 2:
        grads[2] = None  # a param without grad is skipped (no state, no version bump)
    return grads


def _close(a: np.ndarray, b: np.ndarray, dtype: str) -> None:
    tol = 1e-12 if dtype == "float64" else 1e-6
    assert a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _compare_state(ours, theirs, opt, topt, dtype):
    assert len(opt.state) == len(topt.state)
    for p, tp in zip(ours, theirs, strict=True):
        assert (p in opt.state) == (tp in topt.state)
        if tp not in topt.state:
            continue
        s, ts = opt.state[p], topt.state[tp]
        assert list(s) == list(ts)
        for key, tv in ts.items():
            v = s[key]
            assert str(v.dtype) == str(tv.dtype) and tuple(v.shape) == tuple(tv.shape), key
            assert v._version == tv._version, key
            _close(v.detach().numpy(), tv.detach().numpy(), dtype)


CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, weight_decay=0.05)),
    ("SGD", dict(lr=0.1, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.6, 0.5))),  # 1 - beta1 >= 0.5: lerp's other formula
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.2, amsgrad=True)),
    ("AdamW", dict(lr=0.01, maximize=True, betas=(0.5, 0.9))),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("name", "kwargs"), CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_steps_match_torch(name, kwargs, dtype):
    ours, theirs = _pair(dtype)
    opt = getattr(engine.optim, name)(ours, **kwargs)
    topt = getattr(torch.optim, name)(theirs, **kwargs)
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] == \
        [{k: v for k, v in g.items() if k != "params"} for g in topt.param_groups]
    for step in range(STEPS):
        for p, tp, g in zip(ours, theirs, _grads(step, dtype), strict=True):
            p.grad = None if g is None else engine.tensor(g)
            tp.grad = None if g is None else torch.tensor(g)
        assert opt.step() is None and topt.step() is None
        for p, tp in zip(ours, theirs, strict=True):
            _close(p.detach().numpy(), tp.detach().numpy(), dtype)
            assert p._version == tp._version
            assert p.grad is None or p.grad._version == tp.grad._version == 0
        _compare_state(ours, theirs, opt, topt, dtype)


def test_closure_loss_and_grad_mode():
    """step(closure) runs the closure with grad enabled (even under no_grad) and returns its loss."""
    def run(lib, p, opt):
        def closure():
            opt.zero_grad()
            loss = ((p * p).sum() * 0.5 + p.sum())
            loss.backward()
            return loss
        seen = []
        with lib.no_grad():
            for _ in range(3):
                seen.append(opt.step(closure).item())
            assert not lib.is_grad_enabled()
        return seen, p.detach().numpy().copy(), p._version

    data = np.array([1.0, -2.0, 3.0])
    p, tp = engine.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ours = run(engine, p, engine.optim.SGD([p], lr=0.1, momentum=0.5))
    theirs = run(torch, tp, torch.optim.SGD([tp], lr=0.1, momentum=0.5))
    assert ours[0] == pytest.approx(theirs[0], abs=1e-12)
    _close(ours[1], theirs[1], "float64")
    assert ours[2] == theirs[2]


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    def run(lib):
        p = lib.ones(2, requires_grad=True)
        (p * 2).sum().backward()
        g = p.grad
        lib.optim.SGD([p]).zero_grad(set_to_none=set_to_none)
        return (p.grad is None, g.tolist(), g._version, g.requires_grad)
    assert run(engine) == run(torch)


def _groups(opt):
    return [{k: (len(v) if k == "params" else v) for k, v in g.items()} for g in opt.param_groups]


def test_param_groups_add_param_group_and_repr():
    def run(lib):
        a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
        opt = lib.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
        opt.add_param_group({"params": (c,), "weight_decay": 0.2})
        return _groups(opt), repr(opt), dict(opt.defaults)
    assert run(engine) == run(torch)

    def run_adam(lib):
        a = lib.ones(2, requires_grad=True)
        opt = lib.optim.AdamW([a], betas=[0.8, 0.9])
        return _groups(opt), repr(opt)
    assert run_adam(engine) == run_adam(torch)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_state_dict_and_load_state_dict(name):
    kwargs = {"lr": 0.1, "momentum": 0.9} if name == "SGD" else {"lr": 0.1, "amsgrad": True}

    def run(lib):
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
        c = lib.tensor([4.0], dtype=lib.float64, requires_grad=True)
        opt = getattr(lib.optim, name)([{"params": [a, b]}, {"params": [c], "lr": 0.01}], **kwargs)
        for _ in range(2):
            a.grad, c.grad = lib.tensor([0.5, -1.0], dtype=lib.float64), lib.tensor([2.0], dtype=lib.float64)
            opt.step()
        sd = opt.state_dict()
        shape = {"keys": list(sd), "groups": sd["param_groups"],
                 "state": {i: {k: (v.tolist(), str(v.dtype)) for k, v in s.items()} for i, s in sd["state"].items()},
                 "shared": all(sd["state"][0][k] is opt.state[a][k] for k in opt.state[a])}
        # a new optimizer over fresh params (a float32 one: floating state takes its dtype, step does not)
        a2 = lib.tensor([1.0, 2.0], dtype=lib.float32, requires_grad=True)
        b2 = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
        c2 = lib.tensor([4.0], dtype=lib.float64, requires_grad=True)
        opt2 = getattr(lib.optim, name)([{"params": [a2, b2]}, {"params": [c2]}], lr=0.5)
        opt2.load_state_dict(sd)  # not a deepcopy: c2's state is c's own tensors (.to returns self)
        loaded = {"groups": _groups(opt2),
                  "state": [(list(s), [(str(v.dtype), v.tolist()) for v in s.values()]) for s in opt2.state.values()]}
        for p in (a2, c2):
            p.grad = lib.ones_like(p)
        opt2.step()
        return shape, loaded, a2.tolist(), c2.tolist(), {k: v._version for k, v in opt2.state[c2].items()}
    ours, theirs = run(engine), run(torch)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-12)
    assert ours[4] == theirs[4]


ERRORS = [
    "lib.optim.SGD([p], lr=-1)",
    "lib.optim.SGD([p], lr=-1.0)",
    "lib.optim.SGD([])",
    "lib.optim.SGD(p)",
    "lib.optim.SGD([p], momentum=-1)",
    "lib.optim.SGD([p], weight_decay=-0.5)",
    "lib.optim.SGD([p], nesterov=True)",
    "lib.optim.SGD([p], momentum=0.9, dampening=0.1, nesterov=True)",
    "lib.optim.SGD([p * 2])",
    "lib.optim.SGD([1])",
    "lib.optim.SGD([{'params': p}, {'params': [p]}])",
    "lib.optim.SGD([p]).add_param_group([p])",
    "lib.optim.SGD([p]).add_param_group({'params': {p}})",
    "lib.optim.SGD([p]).add_param_group({'params': [p]})",
    "lib.optim.SGD([('w', p)]).add_param_group({'params': [q]})",
    "lib.optim.SGD([('w', p), q])",
    "lib.optim.SGD([p]).load_state_dict({'state': {}, 'param_groups': []})",
    "lib.optim.SGD([p]).load_state_dict({'state': {}, 'param_groups': [{'params': [0, 1]}]})",
    "lib.optim.Adam([p], lr=-0.5)",
    "lib.optim.Adam([p], eps=-1)",
    "lib.optim.Adam([p], betas=(1.0, 0.5))",
    "lib.optim.Adam([p], betas=(0.9, 1.0))",
    "lib.optim.Adam([p], betas=(-0.1, 0.5))",
    "lib.optim.Adam([p], betas=(0, 0))",
    "lib.optim.Adam([p], weight_decay=-1)",
    "lib.optim.AdamW([p], lr=-2)",
    "lib.optim.AdamW([p], betas=(0.9, 1))",
]


@pytest.mark.parametrize("src", ERRORS)
def test_errors_match_torch(src):
    def run(lib):
        p = lib.ones(2, requires_grad=True)
        q = lib.ones(2, requires_grad=True)
        try:
            eval(src, {"lib": lib, "p": p, "q": q})  # noqa: S307 - our own test sources
        except Exception as e:  # noqa: BLE001 - the type is what we compare
            return type(e).__name__, str(e)
        return None
    ours = run(engine)
    assert ours is not None and ours == run(torch)


def test_typename_in_errors():
    def run(lib):
        with pytest.raises(TypeError) as e1:
            lib.optim.SGD(lib.ones(2, dtype=lib.float64))
        with pytest.raises(TypeError) as e2:
            lib.optim.SGD(["x"])
        return str(e1.value), str(e2.value)
    assert run(engine) == run(torch)


def test_duplicate_params_warn():
    def run(lib):
        p = lib.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lib.optim.SGD([p, p])
        return [str(x.message) for x in w]
    assert run(engine) == run(torch)


@pytest.mark.parametrize("kwargs", [{"foreach": True}, {"fused": True}, {"differentiable": True},
                                    {"lr": "tensor"}])
def test_unsupported_options_are_refused(kwargs):
    p = engine.ones(2, requires_grad=True)
    if kwargs.get("lr") == "tensor":
        kwargs = {"lr": engine.tensor(0.1)}
    with pytest.raises(NotImplementedError, match="agdb"):
        engine.optim.SGD([p], **kwargs)
    with pytest.raises(NotImplementedError, match="agdb"):
        engine.optim.Adam([p], **kwargs)
