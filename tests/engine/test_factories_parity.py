"""Factories against torch 2.13: dtype, shape, requires_grad and (for the deterministic ones) values, and the
same errors; random factories are reproducible from a seed (their values are the engine's, not PyTorch's)."""
from __future__ import annotations

import numpy as np
import pytest

from agdb import engine

torch = pytest.importorskip("torch")

DETERMINISTIC = [
    "lib.arange(5)", "lib.arange(5.)", "lib.arange(1, 4)", "lib.arange(0, 1, 0.25)", "lib.arange(0, 10, 3)",
    "lib.arange(10, 0, -3)", "lib.arange(1, 2.5, 0.5, dtype=lib.float64)", "lib.arange(start=1, end=3)",
    "lib.arange(end=3)", "lib.arange(-1.0, 1.0, 0.1)", "lib.arange(0, 2, 0.3, dtype=lib.float64)",
    "lib.arange(lib.tensor(3))", "lib.arange(True)", "lib.arange(1, 1)", "lib.arange(5., requires_grad=True)",
    "lib.arange(3, dtype=lib.float64, requires_grad=True)",
    "lib.linspace(0, 1, 5)", "lib.linspace(0, 1, steps=5, dtype=lib.float64)", "lib.linspace(0, 10, 1)",
    "lib.linspace(0, 10, 0)", "lib.linspace(0, 10, 4, dtype=lib.int64)", "lib.linspace(0, 1, 7)",
    "lib.linspace(-3.5, 2.25, 33)", "lib.linspace(-3.5, 2.25, 33, dtype=lib.float64)",
"lib.linspace(2, 2, 3)", "lib.linspace(0, 1, 5, requires_grad=True)",
    "lib.eye(3)", "lib.eye(2, 3)", "lib.eye(2, m=3)", "lib.eye(n=2)", "lib.eye(0)", "lib.eye(2, dtype=lib.int64)",
    "lib.eye(2, dtype=lib.bool)", "lib.eye(2, requires_grad=True)",
    "lib.full((2,), 3)", "lib.full((2,), 3.)", "lib.full((2,), True)", "lib.full([2, 2], 3., dtype=lib.float64)",
    "lib.full(size=(2,), fill_value=1.5)", "lib.full((), 3.)", "lib.full((2,), 1.5, dtype=lib.int64)",
    "lib.full((2,), lib.tensor(2.0))", "lib.full((2,), 2., requires_grad=True)",
    "lib.zeros(size=(2, 3))", "lib.zeros(2, 3)", "lib.zeros((2, 3))", "lib.zeros([])", "lib.ones(size=[2])",
    "lib.ones(2, dtype=lib.int64)", "lib.zeros(2, requires_grad=True)",
    "lib.empty(2, 3).shape", "lib.empty((2, 3)).dtype", "lib.empty(size=(2, 3)).shape",
    "lib.empty(2, dtype=lib.float64, requires_grad=True).requires_grad",
    "lib.zeros_like(x)", "lib.zeros_like(x, dtype=lib.float32)", "lib.zeros_like(x, requires_grad=True)",
    "lib.ones_like(x)", "lib.ones_like(i)", "lib.full_like(x, 7)", "lib.full_like(x, 7.5, dtype=lib.int64)",
    "lib.full_like(i, 2.7)", "lib.full_like(x, True)", "lib.full_like(x, fill_value=2)",
    "lib.full_like(x, 2, requires_grad=True)", "lib.empty_like(x).shape", "lib.empty_like(x).dtype",
    "lib.rand_like(x).dtype", "lib.rand_like(x).shape", "lib.randn_like(x, dtype=lib.float32).dtype",
    "lib.rand(size=(2,)).shape", "lib.rand(2, 3).dtype", "lib.randn(2, 3, dtype=lib.float64).dtype",
    "lib.randn(()).shape", "lib.rand(0).shape", "lib.rand(2, requires_grad=True).requires_grad",
    "lib.randint(10, (3,)).dtype", "lib.randint(3, 10, size=(3,)).shape", "lib.randint(5, (2, 2)).shape",
    "lib.randint(low=3, high=10, size=(3,)).dtype", "lib.randint(high=10, size=(3,)).shape",
    "lib.randint(10, (3,), dtype=lib.float32).dtype", "lib.randint(5, [2]).shape",
    "lib.randint(10, (3,), dtype=lib.float32, requires_grad=True).requires_grad",
    "lib.Generator().manual_seed(3).initial_seed()", "lib.Generator().initial_seed()",
    "lib.Generator().manual_seed(-5).initial_seed()", "lib.Generator().manual_seed(2**64 - 1).initial_seed()",
    "lib.manual_seed(1.5).initial_seed()", "str(lib.Generator().device)",
    "lib.rand(2, 3, generator=lib.Generator().manual_seed(1)).shape",
    "lib.randn(2, generator=lib.Generator(), dtype=lib.float64).dtype",
]


def _describe(r):
    if isinstance(r, (engine.Tensor, torch.Tensor)):
        return str(r.dtype), tuple(r.shape), r.requires_grad, r._version, r.is_leaf
    if isinstance(r, (engine.dtype, torch.dtype)):
        return str(r)
    return tuple(r) if isinstance(r, tuple) else r


def _values(r):
    return r.detach().numpy() if isinstance(r, (engine.Tensor, torch.Tensor)) else None


def _run(lib, src):
    x = lib.ones(2, 3, dtype=lib.float64)
    i = lib.tensor([1, 2, 3])
    return eval(src, {"lib": lib, "x": x, "i": i})  # noqa: S307 - our own test sources


@pytest.mark.parametrize("src", DETERMINISTIC)
def test_factory_matches_torch(src):
    ours, theirs = _run(engine, src), _run(torch, src)
    assert _describe(ours) == _describe(theirs)
    a, b = _values(ours), _values(theirs)
    if a is not None and "rand" not in src:
        assert a.dtype == b.dtype
        tol = 1e-6 if a.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_small_ranges_are_exact():
    """(Longer float ranges match to rounding: ATen fills SIMD lanes from a rounded base.)"""
    for src in ("lib.arange(0, 1, 0.25)", "lib.linspace(0, 1, 5)", "lib.arange(10, 0, -3)",
                "lib.linspace(0, 10, 4, dtype=lib.int64)", "lib.linspace(0, 1, 7)", "lib.eye(2, 3)"):
        assert _run(engine, src).tolist() == _run(torch, src).tolist(), src


ERRORS = [
    "lib.arange(0, 1, 0)", "lib.arange(0, 10, -1)", "lib.arange(5, requires_grad=True)", "lib.arange(x)",
    "lib.arange(float('inf'))", "lib.arange(0, 5, 0.5, dtype=lib.int64)",
    "lib.linspace(0, 10, -1)", "lib.linspace(0., 1., 3, dtype=lib.bool)",
    "lib.eye(-1)", "lib.eye(2, -1)", "lib.eye(2.0)", "lib.eye((2, 3))",
    "lib.full(2, 3.)", "lib.full((2,), 3, requires_grad=True)", "lib.full((-1,), 2.0)",
    "lib.empty(-1)", "lib.ones(-1)", "lib.zeros()", "lib.zeros(2, size=(3,))",
    "lib.rand(2, dtype=lib.int64)", "lib.randn(2, dtype=lib.int64)", "lib.rand(2, dtype=lib.bool)",
    "lib.rand(-1)", "lib.rand(2.5)", "lib.rand_like(i)", "lib.randn_like(i)",
    "lib.randint(10, 3)", "lib.randint(10, 3, (2,))", "lib.randint(0, (2,))", "lib.randint(3.5, (2,))",
    "lib.randint(10, (3,), requires_grad=True)", "lib.randint(2, 5, (2,), dtype=lib.bool)",
    "lib.manual_seed(2**64)", "lib.manual_seed(-2**63 - 1)", "lib.manual_seed('a')",
    "lib.Generator().manual_seed(2**64)", "lib.Generator().manual_seed(1.5)",
]
PREFIX_ONLY = [  # PyTorch lists every overload of the signature; the engine gives the first line
    "lib.linspace(0, 10)", "lib.linspace(0, 1, 2.5)", "lib.eye(2, 3.0)", "lib.randint(10)",
    "lib.randint(0, 3.5, (2,))", "lib.rand(2, generator=1)",
]


def _error(lib, src):
    try:
        _run(lib, src)
    except Exception as e:  # noqa: BLE001 - the type is what we compare
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("src", ERRORS)
def test_errors_match_torch(src):
    ours = _error(engine, src)
    assert ours is not None and ours == _error(torch, src)


@pytest.mark.parametrize("src", PREFIX_ONLY)
def test_errors_match_torch_in_type_and_first_words(src):
    ours, theirs = _error(engine, src), _error(torch, src)
    assert ours is not None and theirs is not None and ours[0] == theirs[0]
    assert ours[1].split(" ")[0] == theirs[1].split(" ")[0]


def test_manual_seed_returns_the_default_generator():
    assert engine.manual_seed(3) is engine.default_generator
    assert engine.default_generator.initial_seed() == 3
    assert engine.Generator().manual_seed(4).manual_seed(5).initial_seed() == 5


RANDOM = ["lib.rand(3, 2)", "lib.randn(4, dtype=lib.float64)", "lib.randint(-5, 5, (6,))", "lib.rand_like(x)",
          "lib.randn_like(x)", "lib.randint(7, (2, 2), dtype=lib.float32)"]


@pytest.mark.parametrize("src", RANDOM)
def test_the_same_seed_gives_the_same_values(src):
    engine.manual_seed(123)
    first = [_run(engine, src).tolist() for _ in range(2)]
    engine.manual_seed(123)
    again = [_run(engine, src).tolist() for _ in range(2)]
    assert first == again and first[0] != first[1]
    engine.manual_seed(124)
    assert _run(engine, src).tolist() != first[0]


def test_a_generator_is_independent_of_the_default_one():
    g = engine.Generator().manual_seed(9)
    a = engine.rand(5, generator=g).tolist()
    engine.rand(3)  # the default generator's draws do not move g
    b = engine.rand(5, generator=g).tolist()
    g.manual_seed(9)
    assert engine.rand(5, generator=g).tolist() == a
    assert engine.rand(5, generator=g).tolist() == b
    assert engine.randn(4, generator=engine.Generator().manual_seed(1)).tolist() == \
        engine.randn(4, generator=engine.Generator().manual_seed(1)).tolist()


def test_random_values_are_in_range():
    engine.manual_seed(0)
    u = engine.rand(10000).numpy()
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    r = engine.randint(-3, 4, (10000,)).numpy()
    assert set(r.tolist()) == set(range(-3, 4))
    n = engine.randn(10000, dtype=engine.float64).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
