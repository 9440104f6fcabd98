"""Hypothesis strategies and settings shared by the test suite.

Importing this module registers the "ci" and "dev" settings profiles and loads one of them ("ci" unless
the HYPOTHESIS_PROFILE environment variable names another). The array strategies draw float64 numpy
arrays that are small (0 to 3 dims, each of size 1..4) and finite, so gradient checks by finite
differences stay fast and well conditioned. `programs()` draws random engine programs as plain data
(`Program`), for the tracer's replay properties.
"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# -- settings profiles ----------------------------------------------------------------------------------
_COMMON = dict(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow],
               print_blob=True)
settings.register_profile("ci", **_COMMON)
settings.register_profile("dev", **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# -- bounds ---------------------------------------------------------------------------------------------
LIMIT = 3.0
"""Elements are drawn from [-LIMIT, LIMIT]."""

MAX_DIMS = 3
MAX_SIDE = 4


# -- shapes ---------------------------------------------------------------------------------------------
def shapes(min_dims: int = 0, max_dims: int = MAX_DIMS, min_side: int = 1, max_side: int = MAX_SIDE):
    """Small shapes: `min_dims`..`max_dims` dims, each of size `min_side`..`max_side`."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shape_pairs(num_shapes: int = 2, min_dims: int = 0, max_dims: int = MAX_DIMS):
    """Tuples of `num_shapes` shapes that broadcast together under numpy's rules (sizes 1..MAX_SIDE)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims,
                                             min_side=1, max_side=MAX_SIDE).map(lambda b: b.input_shapes)


def broadcast_to_shape(shape: tuple[int, ...]):
    """Shapes that broadcast *to* `shape` exactly: a suffix of `shape` with some sizes replaced by 1."""
    @st.composite
    def _draw(draw):
        n = draw(st.integers(0, len(shape)))
        tail = shape[len(shape) - n:]
        return tuple(1 if draw(st.booleans()) else s for s in tail)

    return _draw()


# -- elements -------------------------------------------------------------------------------------------
def floats(lo: float = -LIMIT, hi: float = LIMIT):
    """Finite float64 scalars in [lo, hi] (no NaN, no inf, no subnormals)."""
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=64)


def away_from_zero(lo: float = 0.2, hi: float = LIMIT):
    """Finite floats with lo <= |x| <= hi, either sign (for denominators and kinks at 0)."""
    return st.tuples(floats(lo, hi), st.booleans()).map(lambda t: t[0] if t[1] else -t[0])


def positive(lo: float = 0.2, hi: float = LIMIT):
    """Finite floats in [lo, hi] with lo > 0 (for log, sqrt and the base of a tensor power)."""
    return floats(lo, hi)


# -- arrays ---------------------------------------------------------------------------------------------
def arrays(shape, elements=None, unique: bool = False):
    """float64 arrays of `shape` (a tuple or a strategy of tuples) with finite, bounded elements."""
    return hnp.arrays(np.float64, shape, elements=elements if elements is not None else floats(),
                      unique=unique)


def arrays_of(shape_strategy=None, elements=None):
    """Finite bounded float64 arrays of any small shape."""
    return arrays(shape_strategy if shape_strategy is not None else shapes(), elements)


def broadcastable_array_pairs(num_shapes: int = 2, elements=None, min_dims: int = 0,
                              max_dims: int = MAX_DIMS):
    """Tuples of `num_shapes` float64 arrays whose shapes broadcast together."""
    @st.composite
    def _draw(draw):
        shps = draw(broadcastable_shape_pairs(num_shapes, min_dims, max_dims))
        if elements is None or not isinstance(elements, (list, tuple)):
            elems = [elements] * num_shapes
        else:
            elems = list(elements)
        return tuple(draw(arrays(s, e)) for s, e in zip(shps, elems))

    return _draw()


def dims_of(ndim: int):
    """A valid (possibly negative) dim index for a tensor of `ndim` dims (0-dim tensors accept -1, 0)."""
    n = max(ndim, 1)
    return st.integers(-n, n - 1)


# -- random engine programs (tests/tracer) --------------------------------------------------------------
UNARY_OPS = ("exp", "sin", "cos", "tanh", "sigmoid", "scale", "fn", "od", "reent")
"""Unary steps of a random program: pointwise ops, `x * 0.5`, and custom Functions (plain, with a
@once_differentiable backward, and one whose backward runs a reentrant backward of its own)."""
BINARY_OPS = ("add", "mul", "sub")
STACK = "stack"
"""`torch.stack([v, ...]).sum(0)` over 3 to 5 values: one node with many children, so several
AccumulateGrads become ready together and leave in the heap's tie order (engine-semantics §6.2)."""
ENDINGS = ("backward", "backward_inputs", "grad", "grad_create_graph", "two_roots")


class Program:
    """A random engine program as plain data (so hypothesis can shrink and print it).

    Values are numbered: the leaves first (`leaves` holds each one's requires_grad), then one value per
    op. `ops` holds (op, args) with args the indices of earlier values; reusing an index makes a shared
    subexpression. `roots` are the values whose `.sum()` is differentiated (two for the two-root
    backward), `inputs` the values passed as `inputs=` (backward) or to autograd.grad, `hooks` values that
    get a tensor hook `g * 2`, `fail_at` a value whose grad_fn pre-hook raises during a first backward
    (then the program runs a clean one), `repeat` runs the ending twice (first with retain_graph=True).
    """

    __slots__ = ("leaves", "ops", "ending", "roots", "inputs", "hooks", "fail_at", "repeat")

    def __init__(self, leaves, ops, ending, roots, inputs=(), hooks=(), fail_at=None, repeat=False) -> None:
        self.leaves, self.ops, self.ending, self.roots = leaves, ops, ending, roots
        self.inputs, self.hooks, self.fail_at, self.repeat = inputs, hooks, fail_at, repeat

    def __repr__(self) -> str:
        return ("Program(leaves=%r, ops=%r, ending=%r, roots=%r, inputs=%r, hooks=%r, fail_at=%r, repeat=%r)"
                % (self.leaves, self.ops, self.ending, self.roots, self.inputs, self.hooks, self.fail_at,
                   self.repeat))


@st.composite
def programs(draw, max_leaves: int = 5, max_ops: int = 8, endings=ENDINGS):
    """Random Programs whose every root and input requires grad (so each program is valid on the engine)."""
    n_leaves = draw(st.integers(1, max_leaves))
    leaves = (True,) + tuple(draw(st.booleans()) for _ in range(n_leaves - 1))  # leaf 0 always requires grad
    requires = list(leaves)
    below = [{i} for i in range(n_leaves)]  # each value and the values it was computed from
    ops = []
    for _ in range(draw(st.integers(1, max_ops))):
        n = len(requires)
        index = st.integers(0, n - 1)
        kind = draw(st.sampled_from(("unary", "binary", "binary", STACK)))
        if kind == "unary":
            op, args = draw(st.sampled_from(UNARY_OPS)), (draw(index),)
        elif kind == "binary":
            op, args = draw(st.sampled_from(BINARY_OPS)), (draw(index), draw(index))
        else:
            op, args = STACK, tuple(draw(st.lists(index, min_size=3, max_size=5)))
        ops.append((op, args))
        requires.append(any(requires[a] for a in args))
        below.append(set().union(*(below[a] for a in args)) | {n})
    requiring = [i for i, r in enumerate(requires) if r]
    ending = draw(st.sampled_from(endings))
    pick = st.sampled_from(requiring)
    roots = (draw(pick), draw(pick)) if ending == "two_roots" else (draw(pick),)
    inputs = ()
    if ending in ("backward_inputs", "grad", "grad_create_graph"):
        inputs = tuple(draw(st.lists(pick, min_size=1, max_size=3, unique=True)))
    hooks = tuple(draw(st.lists(pick, max_size=2, unique=True)))
    nonleaf = [i for i in requiring if i >= n_leaves and i in below[roots[0]]]  # on the first root's graph
    fail_at = draw(st.none() | st.sampled_from(nonleaf)) if nonleaf else None
    repeat = draw(st.booleans())
    return Program(leaves, tuple(ops), ending, roots, inputs, hooks, fail_at, repeat)
