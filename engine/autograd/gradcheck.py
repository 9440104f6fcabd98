"""`engine.autograd.gradcheck` and `gradgradcheck`: PyTorch 2.13's checks, messages and recorded ops.

The slow mode compares whole Jacobians (numerical by central differences, one input element at a time;
analytical row by row through `autograd.grad`); the fast one (`fast_mode=True`, in _gradcheck_fast.py)
compares v^T J u for random unit vectors u and v. Every autograd-recording op PyTorch's gradcheck runs is run here too,
in the same order, so a gradcheck moves the thread's seq_nr counter exactly as far as torch's does (see
NOTE [gradcheck's recorded ops]). Forward AD and batched grads do not exist in the engine: asking for them
raises NotImplementedError. Imports numpy and the engine only.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import numpy as np

from .._node import Node
from .._tensor import Tensor, make_tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]

# NOTE [gradcheck's recorded ops]
# Measured on torch 2.13 with autograd._get_sequence_nr() around each step, these are the nodes a gradcheck
# makes besides those of `func` itself (and GraphRoots of multi-output autograd.grad calls):
# - each central difference clones every output of both evaluations (CloneBackward0 when the output requires
#   grad) and takes (b - a) / (2 * eps) in tensor ops before detaching it: SubBackward0 and DivBackward0;
# - each analytical Jacobian clones the output twice (once per pass of the reentrancy check);
# - the undefined-grad check calls UndefinedGrad()(o) per output: the UndefinedGrad function object is itself
#   a numbered node, and its call records a clone before making an UndefinedGradBackward node: three numbers.
# The input is perturbed through its data (torch's `input.data`), which records nothing and leaves its
# version counter alone.


class GradcheckError(RuntimeError):
    """Error raised by gradcheck and gradgradcheck."""


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""


# -- torch._C._functions.UndefinedGrad ---------------------------------------------------------------------
class UndefinedGradBackward(Node):
    """Sends an undefined grad to every input, whatever grad it receives."""

    __slots__ = ()
    _name = "torch::autograd::UndefinedGradBackward"

    def apply(self, grads: list) -> list:
        return [None] * len(self.next_edges)


class UndefinedGrad(Node):
    """A forward function object that is a numbered node itself; calling it copies a tensor whose grads
    come back undefined (see NOTE [gradcheck's recorded ops])."""

    __slots__ = ()
    _name = "torch::autograd::UndefinedGrad"

    def __call__(self, x: Tensor) -> Tensor:
        from .._ops._common import record

        out = make_tensor(x.clone()._data, device=x._device)  # the clone's data, without its history
        if x.requires_grad:  # like any C++ function's outputs: grad mode is not consulted
            record(UndefinedGradBackward(), (x,), out)
        return out


# -- inputs and outputs -----------------------------------------------------------------------------------
def _as_tuple(x: Any) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _differentiable_outputs(x: Any) -> tuple:
    return tuple(o for o in _as_tuple(x) if o.requires_grad)


def _requires_grad(x: Any) -> bool:
    return isinstance(x, Tensor) and x.requires_grad


def _diff_inputs(inputs: tuple) -> list:
    return [t for t in inputs if _requires_grad(t)]


def _is_float_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) and x.is_floating_point()


def _refuse(**flags: bool) -> None:
    for name, value in flags.items():
        if value:
            raise NotImplementedError(f"engine.autograd.gradcheck does not support {name}=True: the engine has "
                                      "no forward-mode AD and no batched (vmap) gradients")


def _check_inputs(tupled_inputs: tuple) -> None:
    from .._dtype import float64

    any_input_requiring_grad = False
    for idx, inp in enumerate(tupled_inputs):
        if _requires_grad(inp):
            if inp.dtype != float64:
                warnings.warn(
                    f"Input #{idx} requires gradient and is not a double precision floating point or complex. "
                    "This check will likely fail if all the inputs are not of double precision floating point or "
                    "complex. ", stacklevel=3)
            if not all(st > 0 or sz <= 1 for st, sz in zip(inp.stride(), inp.size(), strict=True)):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs that are "
                    "non-overlapping to be able to compute the numerical gradients correctly. You should call "
                    ".contiguous on the input before passing it to gradcheck.")
            any_input_requiring_grad = True
    if not any_input_requiring_grad:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")


def _scalar_text(x: Any) -> str:
    """How an f-string shows a 0-dim tensor in torch (its item) and any other tensor (its repr)."""
    return str(float(x)) if np.ndim(x) == 0 else repr(make_tensor(np.asarray(x)))


# -- numerical derivatives ----------------------------------------------------------------------------------
def _runner(func: Callable, inputs: tuple) -> Callable[[], tuple]:
    """func on the (perturbed in place) inputs, each output cloned so later perturbations leave it alone."""
    return lambda: tuple(a.clone() for a in _as_tuple(func(*inputs)))


def _check_same_dtype_and_shape(a: Tensor, b: Tensor, eps: float, idx: tuple | None = None) -> None:
    on_index = f"on index {idx} " if idx is not None else ""
    if a.shape != b.shape:
        raise AssertionError(f"Expected `func` to return outputs with the same shape when inputs are perturbed "
                             f"{on_index}by {eps}, but got: shapes {a.shape} and {b.shape}.")
    if a.dtype != b.dtype:
        raise AssertionError(f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
                             f"{on_index}by {eps}, but got: dtypes {a.dtype} and {b.dtype}.")


def _central_difference(run: Callable, arr: np.ndarray, where: Any, delta: Any, eps: float,
                        check: Callable) -> tuple[np.ndarray, ...]:
    """Per output of `run`: (f(x + delta) - f(x - delta)) / 2 eps, flat, with arr[where] perturbed by delta."""
    orig = np.array(arr[where], copy=True)
    arr[where] = orig - delta
    outa = run()
    arr[where] = orig + delta
    outb = run()
    arr[where] = orig
    columns = []
    for a, b in zip(outa, outb, strict=False):
        check(a, b)
        # tensor ops, not numpy: they record Sub and Div nodes when the outputs require grad, as torch's do
        columns.append(((b - a) / (2 * eps)).detach().reshape(-1)._data)
    return tuple(columns)


def _numerical_jacobian(func: Callable, inputs: tuple, outputs: tuple, eps: float) -> list[tuple]:
    """Per input requiring grad, per floating output of `outputs`: a (input numel, output numel) Jacobian.

    Columns come from all of func's outputs and fill the floating ones of `outputs` by position, as in torch
    (the two lists differ when some output does not require grad)."""
    jacobians = []
    for inp in _diff_inputs(inputs):
        run, arr = _runner(func, inputs), inp._data  # perturbed in place, like torch's input.data
        columns = [_central_difference(run, arr, idx, eps, eps, functools.partial(
            _check_same_dtype_and_shape, eps=eps, idx=idx)) for idx in np.ndindex(arr.shape)]
        jacs = tuple(np.zeros((inp.numel(), o.numel()), dtype=o._data.dtype) for o in outputs if _is_float_tensor(o))
        for i, jac in enumerate(jacs):
            for k, column in enumerate(columns):
                jac[k] = column[i]
        jacobians.append(jacs)
    return jacobians


def _numerical_jvp(func: Callable, inputs: tuple, index: int, u: np.ndarray, eps: float) -> tuple:
    """J u for input `index`, by one central difference along u (fast mode)."""
    arr = inputs[index]._data
    check = functools.partial(_check_same_dtype_and_shape, eps=eps)
    return _central_difference(_runner(func, inputs), arr, Ellipsis, eps * u.reshape(arr.shape), eps, check)


# -- analytical derivatives ---------------------------------------------------------------------------------
def _vjps(output: Tensor, diff_inputs: list, grad_outputs: list) -> list[list]:
    """vjps[i][j]: the grad of input i for the j-th grad_output (a clone), or None."""
    from . import grad

    rows: list[list] = [[] for _ in diff_inputs]
    for grad_output in grad_outputs:
        grads = grad(output, diff_inputs, grad_output, retain_graph=True, allow_unused=True)
        for i, d_x in enumerate(grads):
            rows[i].append(d_x.clone() if isinstance(d_x, Tensor) else None)
    return rows


def _basis(sample: Tensor) -> list[Tensor]:
    """One-hot grad_outputs shaped like `sample`, one per element (the rows of the Jacobian)."""
    basis = []
    for j in range(sample.numel()):
        flat = np.zeros(sample.numel(), dtype=sample._data.dtype)
        flat[j] = 1.0
        basis.append(make_tensor(flat.reshape(sample._data.shape), device=sample._device))
    return basis


def _stack(rows: list[list], diff_inputs: list, output_numel: int) -> tuple[list, bool, bool]:
    jacobians, sizes_ok, types_ok = [], True, True
    for inp, tensors in zip(diff_inputs, rows, strict=True):
        jac = np.zeros((inp.numel(), output_numel), dtype=inp._data.dtype)
        for j, t in enumerate(tensors):
            if t is not None and t.size() != inp.size():
                sizes_ok = False
            elif t is not None and t.dtype != inp.dtype:
                types_ok = False
            if t is not None:
                if jac[:, j].size != t.numel():
                    raise AssertionError(f"Expected out_jacobian column to have {t.numel()} elements, but got "
                                         f"{jac[:, j].size}")
                jac[:, j] = t._data.reshape(-1)
        jacobians.append(jac)
    return jacobians, sizes_ok, types_ok


def _analytical_jacobian(inputs: tuple, output: Tensor, nondet_tol: float, check_grad_dtypes: bool,
                         v: np.ndarray | None = None) -> list[np.ndarray]:
    """Per input requiring grad: d output / d input (numel_in, numel_out), or v^T J as (numel_in, 1) when v is
    given; computed twice to check that backward is reentrant."""
    diff_inputs = _diff_inputs(inputs)

    def vjps() -> list[list]:
        sample = output.clone()  # torch clones the output for each pass, and differentiates the output itself
        if v is None:
            return _vjps(output, diff_inputs, _basis(sample))
        return _vjps(output, diff_inputs, [make_tensor(v.reshape(sample._data.shape), device=sample._device)])

    vjps1, vjps2 = vjps(), vjps()
    numel = output.numel() if v is None else 1
    jac1, sizes_ok, types_ok = _stack(vjps1, diff_inputs, numel)
    jac2, _, _ = _stack(vjps2, diff_inputs, numel)
    reentrant = all(a.size == 0 or np.abs(a - b).max() <= nondet_tol for a, b in zip(jac1, jac2, strict=True))
    # torch 2.13 unpacks (sizes_ok, types_ok) as (types_ok, sizes_ok): the two messages are crossed there too
    if not sizes_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not types_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times "
            "gives different values, although analytical gradient matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG)
    return jac1


def _allclose(a: Any, n: Any, rtol: float, atol: float) -> bool:
    a, n = np.asarray(a), np.asarray(n)
    dtype = np.result_type(a, n)
    return bool(np.allclose(a.astype(dtype), n.astype(dtype), rtol=rtol, atol=atol))


def _mismatch(a: Any, n: Any, output_idx: int, input_idx: int) -> str:
    return (f"Jacobian mismatch for output {output_idx:d} with respect to input {input_idx:d},\n"
            f"numerical:{_scalar_text(n)}\nanalytical:{_scalar_text(a)}\n")


# -- the slow mode ------------------------------------------------------------------------------------------
def _slow_gradcheck(func: Callable, func_out: Any, inputs: tuple, outputs: tuple, eps: float, rtol: float,
                    atol: float, check_grad_dtypes: bool, nondet_tol: float) -> bool:
    func_out = _as_tuple(func_out)
    if not outputs:
        for per_input in _numerical_jacobian(func, inputs, func_out, eps):
            for jac in per_input:
                if np.count_nonzero(jac) > 0:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    numerical = list(zip(*_numerical_jacobian(func, inputs, func_out, eps), strict=True))
    numerical = [nj for o, nj in zip(func_out, numerical, strict=False) if o.requires_grad]
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes)
        for j, (a, n) in enumerate(zip(analytical, numerical[i], strict=False)):
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_mismatch(a, n, i, j))
    return True


# -- checks of backward itself ------------------------------------------------------------------------------
def _test_backward_mul_by_grad_output(outputs: tuple, inputs: tuple) -> bool:
    from .. import _factories
    from . import grad

    diff_inputs = _diff_inputs(inputs)
    if not diff_inputs:
        raise GradcheckError("no Tensors requiring grad found in input")
    grads = grad(outputs, diff_inputs, [_factories.zeros_like(o) for o in outputs], allow_unused=True)
    for gi, di in zip(grads, diff_inputs, strict=True):
        if gi is None:
            continue
        if not bool(np.all(gi._data == 0)):
            raise GradcheckError("backward not multiplied by grad_output")
        if gi.dtype != di.dtype:
            raise GradcheckError("grad is incorrect type")
        if gi.size() != di.size():
            raise GradcheckError("grad is incorrect size")
    return True


def _test_undefined_backward_mode(func: Callable, outputs: tuple, inputs: tuple) -> bool:
    from .. import _factories
    from . import grad

    diff_inputs = _diff_inputs(inputs)
    if not diff_inputs:
        raise GradcheckError("no Tensors requiring grad found in input")

    def warn_bc_breaking() -> None:
        warnings.warn(
            "Backwards compatibility: New undefined gradient support checking feature is enabled by default, but "
            "it may break existing callers of this function. If this is true for you, you can call this function "
            'with "check_undefined_grad=False" to disable the feature', stacklevel=4)

    def check(output_to_check: list) -> bool:
        grads_output = [_factories.zeros_like(o) for o in output_to_check]
        try:
            grads_input = grad(output_to_check, diff_inputs, grads_output, allow_unused=True)
        except RuntimeError as e:
            warn_bc_breaking()
            raise GradcheckError(
                'Expected backward function to handle undefined output grads. Please look at "Notes about '
                'undefined output gradients" in "tools/autograd/derivatives.yaml"') from e
        for gi in grads_input:
            if gi is not None and not bool(np.all(gi._data == 0)):
                warn_bc_breaking()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads are undefined or zero. "
                    'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"')
        return True

    outputs_to_check = [[UndefinedGrad()(o) for o in _differentiable_outputs(func(*inputs))
                         if isinstance(o, Tensor)]]
    if len(outputs_to_check[0]) > 1:
        for undef_idx in range(len(outputs)):
            out = _differentiable_outputs(func(*inputs))
            outputs_to_check.append([UndefinedGrad()(o) if k == undef_idx else o for k, o in enumerate(out)])
    return all(check(o) for o in outputs_to_check)


# -- the public functions -----------------------------------------------------------------------------------
def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Check `func`'s analytical Jacobians against finite differences; True, or GradcheckError (False when
    raise_exception=False). Forward AD and batched grads raise NotImplementedError.

    fast_mode draws its random vectors as torch does (the same values), but sums and norms them in numpy:
    a fast-mode failure's printed numbers can differ from torch's in the last digits."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    _refuse(check_forward_ad=check_forward_ad, check_batched_grad=check_batched_grad,
            check_batched_forward_grad=check_batched_forward_grad)
    try:
        return _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                                 check_grad_dtypes, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck_helper(func: Callable, inputs: Any, eps: float, atol: float, rtol: float, nondet_tol: float,
                      check_undefined_grad: bool, check_grad_dtypes: bool, fast_mode: bool) -> bool:
    tupled_inputs = _as_tuple(inputs)
    _check_inputs(tupled_inputs)
    func_out = func(*tupled_inputs)
    outputs = _differentiable_outputs(func_out)
    if fast_mode:
        from ._gradcheck_fast import fast_gradcheck as check
    else:
        check = _slow_gradcheck
    check(func, func_out, tupled_inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    _test_backward_mul_by_grad_output(outputs, tupled_inputs)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, outputs, tupled_inputs)
    return True


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Any = None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True,
                  nondet_tol: float = 0.0, check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False, masked: bool = False) -> bool:
    """gradcheck on the function (inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs, create_graph=True).

    Without grad_outputs, random ones in [-1, 1) are drawn from the default Generator (torch uses
    torch.testing.make_tensor, so the draws differ). check_fwd_over_rev and check_batched_grad raise
    NotImplementedError; gen_non_contig_grad_outputs is ignored (engine tensors are contiguous).
    """
    from .. import _factories
    from .._state import set_grad_enabled
    from . import grad

    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    _refuse(check_fwd_over_rev=check_fwd_over_rev, check_batched_grad=check_batched_grad)
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*tupled_inputs))
        with set_grad_enabled(False):
            tupled_grad_outputs = tuple(
                (_factories.rand(o.shape, dtype=o.dtype if o.is_floating_point() else None) * 2 - 1).requires_grad_()
                for o in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_idx = {i for i, x in enumerate(tupled_inputs) if _requires_grad(x)}
    diff_grad_output_idx = {i for i, x in enumerate(tupled_grad_outputs) if x.requires_grad}

    def new_func(*args: Any) -> tuple:
        input_args = tuple(x.requires_grad_() if i in diff_input_idx else x
                           for i, x in enumerate(args[:-num_outputs]))
        outs = _differentiable_outputs(func(*input_args))
        gouts = tuple(x.requires_grad_() if i in diff_grad_output_idx else x
                      for i, x in enumerate(args[-num_outputs:]))
        diff_input_args = tuple(x for i, x in enumerate(input_args) if i in diff_input_idx)
        grad_inputs = grad(outs, diff_input_args, gouts, create_graph=True, allow_unused=True)
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad, fast_mode=fast_mode,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev, masked=masked)
