"""Result strides as torch lays them out (engine/_layout.py): hand-derived cases, and seeded random ops compared
with torch 2.13 on every dim of size > 1 (the size-1 dims' strides differ in rare cases; they change neither
`is_contiguous()` nor which views are possible)."""
from __future__ import annotations

import random
import warnings

import pytest

from agdb import engine


def test_mixed_layouts_follow_the_first_operand():
    """x.mT + y: TensorIterator orders dims by the first operand that tells them apart, so the result is laid out
    like x.mT (dim 1 innermost: strides (1, 3)); y + x.mT is C-contiguous like y."""
    x, y = engine.ones(2, 3), engine.ones(3, 2)
    assert (x.mT + y).stride() == (1, 3) and not (x.mT + y).is_contiguous()
    assert (y + x.mT).stride() == (2, 1) and (y + x.mT).is_contiguous()
    assert (x.mT * 2.0).stride() == (1, 3)  # a number is broadcast: it does not vote
    assert engine.where(x.mT > 0, x.mT, y).stride() == (1, 3)  # the condition votes first


def test_clone_preserves_and_contiguous_and_reductions_do_not():
    x = engine.ones(2, 4, 3).transpose(1, 2)  # strides (12, 1, 3)
    assert x.clone().stride() == (12, 1, 3)
    assert x.contiguous().stride() == (12, 4, 1)
    assert x.sum(0).stride() == (4, 1) and x.max(0).values.is_contiguous()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        (x * 2.0).view(24)  # laid out like x, so no view, as in torch
    assert (x.contiguous() * 2.0).view(24).shape == (24,)


def _operand(lib, shape, kind, perm):
    if kind == "perm":
        return lib.ones(*[shape[i] for i in perm]).permute(*[perm.index(i) for i in range(len(perm))])
    if kind == "step":
        return lib.ones(*shape[:-1], shape[-1] * 2)[..., ::2]
    return lib.ones(*shape)


OPS = {
    "add": lambda lib, a, b: a + b, "mul": lambda lib, a, b: b * a, "radd": lambda lib, a, b: 2.0 + a,
    "exp": lambda lib, a, b: a.exp(), "neg": lambda lib, a, b: -a, "sum0": lambda lib, a, b: a.sum(0),
    "sumlast": lambda lib, a, b: a.sum(-1, keepdim=True), "mean": lambda lib, a, b: a.mean(0),
    "clone": lambda lib, a, b: a.clone(), "contiguous": lambda lib, a, b: a.contiguous(),
    "max": lambda lib, a, b: a.max(0).values, "where": lambda lib, a, b: lib.where(a > 0, a, b),
}


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(4))
def test_strides_match_torch(seed):
    torch = pytest.importorskip("torch")
    rng = random.Random(seed)
    for _ in range(400):
        nd = rng.randint(1, 4)
        shape = [rng.choice([1, 2, 3, 4]) for _ in range(nd)]
        bshape = [s if rng.random() < 0.7 else 1 for s in shape][rng.randint(0, nd - 1) if rng.random() < 0.3 else 0:]
        specs = [(s, rng.choice(["c", "perm", "step"]), rng.sample(range(len(s)), len(s))) for s in (shape, bshape)]
        name = rng.choice(sorted(OPS))
        got = []
        for lib in (engine, torch):
            a, b = (_operand(lib, *spec) for spec in specs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = OPS[name](lib, a, b)
            big = [i for i, n in enumerate(y.shape) if n > 1]
            got.append((tuple(y.shape), tuple(y.stride(i) for i in big), y.is_contiguous()))
        assert got[0] == got[1], (name, specs, got)
