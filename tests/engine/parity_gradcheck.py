"""gradcheck and gradgradcheck programs, run on engine and torch by test_gradcheck_parity.py.

Each program calls a check, records how far it moved the thread's seq_nr counter, then builds a small graph
after it: the relative seq_nrs of those later nodes are what a user debugging seq_nrs sees, so they must
agree with torch's. The input's version counter and `.grad` are recorded too (gradcheck perturbs `.data`
and differentiates with autograd.grad: neither moves). Failing checks run with raise_exception=False,
so that the counter's position at the failure is compared; messages are compared where they hold no
tensor printout (the engine's tensor repr rounds differently).
"""
from __future__ import annotations

from typing import Callable

PROGRAMS: dict[str, Callable] = {}

XS = [-1.5, -0.4, 0.3, 1.1, 2.0]
YS = [0.5, 1.0, -2.0, 0.25, 3.0]
ZS = [[0.2, -0.7], [1.3, 0.4]]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _legendre(t):
    class LegendrePolynomial3(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 0.5 * (5 * x ** 3 - 3 * x)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * x ** 2 - 1)
    return LegendrePolynomial3


def _wrong_square(t):
    """x * x whose backward forgets the factor 2: every Jacobian check fails."""
    class WrongSquare(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x
    return WrongSquare


def _check_then_build(name: str, check: Callable, *leaves: tuple) -> None:
    """A program: leaves, `check(t, *leaves)` (its result or error), the counter, then a graph built after it."""
    def fn(t, p):
        xs = [p.leaf(f"x{i}", data) for i, data in enumerate(leaves)]
        p.counter("before")
        p.value("result", p.run("check", lambda: check(t, *xs)))
        p.counter("after check")
        after = xs[0].sin() * 2
        loss = after.sum()
        p.watch(loss)
        p.run("backward", loss.backward)
        p.value("versions", tuple(x._version for x in xs))
        p.value("x0.grad", xs[0].grad)
        p.value("other grads", tuple(x.grad for x in xs[1:]))
        p.counter("end")
    PROGRAMS[name] = fn


def _gc(t):
    return t.autograd.gradcheck


def _ggc(t):
    return t.autograd.gradgradcheck


# == gradcheck, slow mode (the default) ===================================================================
_check_then_build("gradcheck_plain_op", lambda t, x: _gc(t)(t.exp, (x,)), XS)
_check_then_build("gradcheck_custom_function", lambda t, x: _gc(t)(_legendre(t).apply, (x,)), XS)
_check_then_build("gradcheck_two_inputs_and_a_number",
                  lambda t, x, y: _gc(t)(lambda a, b, k: a * b * k, (x, y, 3.0)), XS, YS)
_check_then_build("gradcheck_matrix_input", lambda t, z: _gc(t)(lambda a: (a @ a).tanh(), (z,)), ZS)
_check_then_build("gradcheck_output_not_requiring_grad",
                  lambda t, x: _gc(t)(lambda a: (a.detach() + 1, a * 3), (x,)), XS)
_check_then_build("gradcheck_two_differentiable_outputs",
                  lambda t, x, y: _gc(t)(lambda a, b: (a.sin() * b, (a * a).sum()), (x, y)), XS, YS)
_check_then_build("gradcheck_input_unused",
                  lambda t, x, y: _gc(t)(lambda a, b: a * 2, (x, y)), XS, YS)
_check_then_build("gradcheck_without_undefined_grad_check",
                  lambda t, x: _gc(t)(_legendre(t).apply, (x,), check_undefined_grad=False), XS)
_check_then_build("gradcheck_no_differentiable_output",
                  lambda t, x: _gc(t)(lambda a: a.detach() * 2, (x,)), XS)
_check_then_build("gradcheck_output_detached_but_varying",
                  lambda t, x: _gc(t)(lambda a: (a * 2).detach(), (x,)), XS)
_check_then_build("gradcheck_wrong_backward_no_raise",
                  lambda t, x: _gc(t)(_wrong_square(t).apply, (x,), raise_exception=False), XS)


@program("gradcheck_under_no_grad")
def _under_no_grad(t, p):
    """Under no_grad the function's outputs do not require grad: the numerical Jacobian must then be zero."""
    x = p.leaf("x", XS)
    p.counter("before")
    with t.no_grad():
        p.run("check", lambda: _gc(t)(t.exp, (x,)))
    p.counter("after check")
    p.watch(x.exp().sum())


# == gradcheck, fast mode ===================================================================================
_check_then_build("gradcheck_fast_plain_op", lambda t, x: _gc(t)(t.exp, (x,), fast_mode=True), XS)
_check_then_build("gradcheck_fast_custom_function",
                  lambda t, x: _gc(t)(_legendre(t).apply, (x,), fast_mode=True), XS)
_check_then_build("gradcheck_fast_two_inputs",
                  lambda t, x, y: _gc(t)(lambda a, b: a * b, (x, y), fast_mode=True), XS, YS)
_check_then_build("gradcheck_fast_two_differentiable_outputs",
                  lambda t, x, y: _gc(t)(lambda a, b: (a.sin() * b, (a * a).sum()), (x, y), fast_mode=True), XS, YS)
_check_then_build("gradcheck_fast_output_not_requiring_grad",
                  lambda t, x: _gc(t)(lambda a: (a * 2, a.detach() + 1), (x,), fast_mode=True), XS)
_check_then_build("gradcheck_fast_no_differentiable_output",
                  lambda t, x: _gc(t)(lambda a: (a * 2).detach(), (x,), fast_mode=True), XS)
# A failing fast check recomputes the failing pair's Jacobians in slow mode for its message.
_check_then_build("gradcheck_fast_wrong_backward_no_raise",
                  lambda t, x: _gc(t)(_wrong_square(t).apply, (x,), raise_exception=False, fast_mode=True), XS)


# == gradgradcheck ==========================================================================================
_check_then_build("gradgradcheck_given_grad_outputs",
                  lambda t, x, y: _ggc(t)(lambda a: a.exp() * a, (x,), (y,)), XS, YS)
# The random grad_outputs differ (torch.testing.make_tensor against the engine's generator); the nodes do not.
_check_then_build("gradgradcheck_random_grad_outputs", lambda t, x: _ggc(t)(lambda a: a.exp() * a, (x,)), XS)
_check_then_build("gradgradcheck_custom_function",
                  lambda t, x, y: _ggc(t)(_legendre(t).apply, (x,), (y,)), XS, YS)
_check_then_build("gradgradcheck_two_inputs_two_outputs",
                  lambda t, x, y: _ggc(t)(lambda a, b: (a * b, a.sin()), (x, y)), XS, YS)
_check_then_build("gradgradcheck_fast",
                  lambda t, x, y: _ggc(t)(lambda a: a.exp() * a, (x,), (y,), fast_mode=True), XS, YS)
_check_then_build("gradgradcheck_once_differentiable_no_raise",
                  lambda t, x, y: _ggc(t)(_once_differentiable_square(t).apply, (x,), (y,), raise_exception=False),
                  XS, YS)


def _once_differentiable_square(t):
    """x * x with a once_differentiable backward: its grad has no graph, so gradgradcheck fails."""
    class Square(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @t.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x
    return Square
