"""gradcheck's fast mode: v^T (J u) by one central difference along u, against (v^T J) u by autograd.

u and v are torch's own random unit vectors (see _uniform_floats); their sums and norms are taken in numpy,
so a failure's printed numbers can differ from torch's in the last digits. Imports numpy and the engine only.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._random import DEFAULT_SEED
from .._tensor import Tensor
from .gradcheck import (
    GradcheckError,
    _allclose,
    _analytical_jacobian,
    _as_tuple,
    _diff_inputs,
    _is_float_tensor,
    _mismatch,
    _numerical_jacobian,
    _numerical_jvp,
    _requires_grad,
    _scalar_text,
)

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()


def _uniform_floats(stream: np.random.RandomState, n: int) -> np.ndarray:
    """What torch.rand(n) (float32) draws from a CPU generator: 24 bits of each 32-bit Mersenne Twister output.

    A fresh torch.Generator is std::mt19937 seeded with the low 32 bits of PyTorch's default seed, which is
    what RandomState(seed) is; so gradcheck's random vectors are torch's own."""
    raw = stream.randint(0, 2**32, size=n, dtype=np.uint64)
    return ((raw & np.uint64(2**24 - 1)).astype(np.float64) * 2.0**-24).astype(np.float32)


def _unit_vector(stream: np.random.RandomState, x: Tensor) -> np.ndarray:
    vec = _uniform_floats(stream, x.numel()).astype(x._data.dtype)
    return vec / np.linalg.norm(vec)


def _make_vectors(diff_inputs: list, outputs: tuple) -> tuple[list, list]:
    """(all_v, all_u): a unit vector per differentiable output and per input, from a fresh generator."""
    stream = np.random.RandomState(DEFAULT_SEED & 0xFFFFFFFF)
    all_u = [_unit_vector(stream, x) for x in diff_inputs]
    return [_unit_vector(stream, o) for o in outputs], all_u


def _numerical_vJu(func: Callable, inputs: tuple, indices: list, func_out: tuple, all_u: list,
                   all_v: list, eps: float) -> list[list]:
    reduced = []
    for index, u in zip(indices, all_u, strict=False):
        all_Ju = _numerical_jvp(func, inputs, index, u, eps)
        if len(all_Ju) != len(func_out):
            raise AssertionError(f"Expected all_Ju and func_out to have the same length, but got {len(all_Ju)} "
                                 f"and {len(func_out)}")
        floating = [Ju for Ju, o in zip(all_Ju, func_out, strict=True) if _is_float_tensor(o)]
        # paired by position with the differentiable outputs' v, as torch does
        reduced.append([float((v * Ju).sum()) for v, Ju in zip(all_v, floating, strict=False)])
    return reduced


def _analytical_vJu(inputs: tuple, outputs: tuple, nondet_tol: float, check_grad_dtypes: bool, all_v: list,
                    all_u: list) -> list[list]:
    reduced = []
    for output, v in zip(outputs, all_v, strict=False):
        all_vJ = _analytical_jacobian(inputs, output, nondet_tol, check_grad_dtypes, v=v)
        reduced.append([float(np.dot(vJ.T.squeeze(0), u)) for vJ, u in zip(all_vJ, all_u, strict=False)])
    return reduced


def _slow_mode_error(func: Callable, inputs: tuple, outputs: tuple, input_idx: int, output_idx: int,
                     rtol: float, atol: float, eps: float) -> str:
    """The slow-mode Jacobians of one input/output pair, for a fast-mode failure's message."""
    numerical = _numerical_jacobian(func, inputs, outputs, eps)[input_idx][output_idx]
    analytical = _analytical_jacobian(inputs, outputs[output_idx], float("inf"), False)[input_idx]
    max_diff = np.abs(numerical - analytical).max()
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are computed \n"
           "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more background \n"
           "about fast mode. Below, we recompute numerical and analytical jacobians in slow mode:\n\n"
           f"Numerical:\n {_scalar_text(numerical)}\n"
           f"Analytical:\n{_scalar_text(analytical)}\n\n"
           f"The max per-element difference (slow mode) is: {_scalar_text(max_diff)}.\n")
    if _allclose(analytical, numerical, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


def fast_gradcheck(func: Callable, func_out: Any, inputs: tuple, outputs: tuple, eps: float, rtol: float,
                   atol: float, check_grad_dtypes: bool, nondet_tol: float) -> bool:
    """Compare v^T (J u) by finite differences with (v^T J) u by autograd, per input and output."""
    func_out = _as_tuple(func_out)
    indices = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    all_v, all_u = _make_vectors(_diff_inputs(inputs), outputs)
    numerical = _numerical_vJu(func, inputs, indices, func_out, all_u, all_v, eps)
    if not outputs:
        for index, u in zip(indices, all_u, strict=False):
            for jvp in _numerical_jvp(func, inputs, index, u, eps):
                if jvp.size and np.abs(jvp).max() > nondet_tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
    analytical = _analytical_vJu(inputs, outputs, nondet_tol, check_grad_dtypes, all_v, all_u)
    for i, per_input in enumerate(numerical):
        for j, n in enumerate(per_input):
            a = analytical[j][i]
            scaled_atol = atol * float(all_u[i].sum()) * float(all_v[j].sum())
            if not _allclose(a, n, rtol, scaled_atol):
                raise GradcheckError(_mismatch(a, n, j, i) + _slow_mode_error(func, inputs, outputs, i, j, rtol,
                                                                             atol, eps))
    return True
