"""gradcheck / gradgradcheck against torch 2.13 on the same float64 programs: results, errors, messages."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from agdb import engine

torch = pytest.importorskip("torch")

X = [[0.3, -1.2, 0.7], [1.1, 0.2, -0.4]]
Y = [0.5, 1.5, -2.0]


def _gc_error(t):
    return importlib.import_module(t.__name__ + ".autograd.gradcheck").GradcheckError


def _square(t, wrong: bool, once: bool):
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * a if wrong else g * 2 * a

    class Square(t.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

    Square.backward = staticmethod(t.autograd.function.once_differentiable(backward) if once else backward)
    return Square


def _run(t, fn):
    """fn's result, or (error type name, message), with the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            out = (type(e).__name__, str(e))
    return out, [str(w.message) for w in caught]


CASES = {
    "exp_mul": lambda t, x, y: t.autograd.gradcheck(lambda a, b: (a.exp() * b).sum(0), (x, y)),
    "two_outputs": lambda t, x, y: t.autograd.gradcheck(lambda a, b: (a.sin() * b, (a * a).sum()), (x, y)),
    "non_tensor_arg": lambda t, x, y: t.autograd.gradcheck(lambda a, k: a * k, (y, 3.0)),
    "gradgrad": lambda t, x, y: t.autograd.gradgradcheck(lambda a, b: a.exp() * b, (x, y)),
    "gradgrad_given": lambda t, x, y: t.autograd.gradgradcheck(
        lambda b: b.pow(3), (y,), (t.tensor([1.0, -1.0, 0.5], dtype=t.float64, requires_grad=True),)),
    "function": lambda t, x, y: t.autograd.gradcheck(_square(t, False, False).apply, (y,)),
    "function_once_differentiable": lambda t, x, y: t.autograd.gradcheck(_square(t, False, True).apply, (y,)),
    "wrong_function": lambda t, x, y: t.autograd.gradcheck(_square(t, True, True).apply, (y,)),
    "wrong_function_no_raise": lambda t, x, y: t.autograd.gradcheck(_square(t, True, False).apply, (y,),
                                                                     raise_exception=False),
    "none_requires_grad": lambda t, x, y: t.autograd.gradcheck(lambda a: a * 2, (y.detach(),)),
    "float32_input": lambda t, x, y: t.autograd.gradcheck(
        lambda a: a * 2, (t.tensor([1.0, 2.0], requires_grad=True),), atol=1e-2, rtol=1e-2),
    "no_differentiable_output": lambda t, x, y: t.autograd.gradcheck(lambda a: a.detach() * 2, (y,)),
    "wrong_gradgrad": lambda t, x, y: t.autograd.gradgradcheck(_square(t, False, True).apply, (y,), (y,)),
    "flags": lambda t, x, y: t.autograd.gradcheck(lambda a: a, (y,), check_backward_ad=False),
}


@pytest.mark.parametrize("name", CASES)
def test_gradcheck_matches_torch(name):
    results = []
    for t in (torch, engine):
        x = t.tensor(X, dtype=t.float64, requires_grad=True)
        y = t.tensor(Y, dtype=t.float64, requires_grad=True)
        out, warned = _run(t, lambda t=t, x=x, y=y: CASES[name](t, x, y))
        if isinstance(out, tuple):  # compare the first line (the engine's repr of the Jacobians may round apart)
            out = (out[0], out[1].splitlines()[0] if out[1] else "")
        results.append((out, [w.replace("torch.", "") for w in warned]))
    assert results[1] == results[0]


def test_wrong_backward_fails_with_the_same_first_line_and_jacobians():
    msgs = []
    for t in (torch, engine):
        y = t.tensor(Y, dtype=t.float64, requires_grad=True)
        with pytest.raises(_gc_error(t)) as info:
            t.autograd.gradcheck(_square(t, True, True).apply, (y,))
        assert isinstance(info.value, RuntimeError)
        msgs.append(str(info.value))
    assert msgs[1].splitlines()[0] == msgs[0].splitlines()[0] == (
        "Jacobian mismatch for output 0 with respect to input 0,")
    assert "\nanalytical:tensor([[ 0.5" in msgs[1] and "\nnumerical:tensor([[ 1" in msgs[1]


def test_numerical_jacobian_is_central_differences_of_a_hand_derived_function():
    """f(a) = [a0 * a1, a1 ** 2]: J = [[a1, a0], [0, 2 a1]]; a Function with that backward passes, one with a
    transposed Jacobian fails, and the input's version counter does not move."""
    transposed = [False]

    class F(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return engine.stack([a[0] * a[1], a[1] * a[1]])

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            j = engine.tensor([[a[1].item(), a[0].item()], [0.0, 2 * a[1].item()]], dtype=engine.float64)
            return g @ (j.T if transposed[0] else j)

    a = engine.tensor([0.7, -1.3], dtype=engine.float64, requires_grad=True)
    assert engine.autograd.gradcheck(F.apply, (a,))
    assert a._version == 0 and a.tolist() == [0.7, -1.3]
    transposed[0] = True
    with pytest.raises(_gc_error(engine), match="output 0 with respect to input 0"):
        engine.autograd.gradcheck(F.apply, (a,))


def test_unsupported_options_are_refused():
    """Forward AD and batched grads raise NotImplementedError naming the option."""
    y = engine.tensor(Y, dtype=engine.float64, requires_grad=True)
    for kw in ("check_forward_ad", "check_batched_grad"):
        with pytest.raises(NotImplementedError, match=kw):
            engine.autograd.gradcheck(lambda a: a * 2, (y,), **{kw: True})
    with pytest.raises(NotImplementedError, match="check_fwd_over_rev"):
        engine.autograd.gradgradcheck(lambda a: a * 2, (y,), check_fwd_over_rev=True)


class _NodeNames:
    """An engine observer that lists the names of the numbered nodes, in seq_nr order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def seq_nr_bumped(self, node, seq_nr) -> None:
        self.names.append(node.name())


def _square_function():
    class Square(engine.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 2 * a
    return Square


def test_gradcheck_records_the_nodes_torchs_source_does():
    """Slow gradcheck of a Function on one element makes, in order, the nodes torch 2.13's gradcheck.py makes:
    func's output; two evaluations (output and its clone each) and the (b - a) / 2eps of the central
    difference; two clones of the output for the analytical passes; then func again and UndefinedGrad()(o),
    which is a node itself, records a clone and makes UndefinedGradBackward."""
    square = _square_function()
    x = engine.tensor([0.7], dtype=engine.float64, requires_grad=True)
    seen = _NodeNames()
    handle = engine.add_observer(seen)
    try:
        assert engine.autograd.gradcheck(square.apply, (x,))
    finally:
        handle.remove()
    assert seen.names == [
        "SquareBackward",
        "SquareBackward", "CloneBackward0", "SquareBackward", "CloneBackward0", "SubBackward0", "DivBackward0",
        "CloneBackward0", "CloneBackward0",
        "SquareBackward", "torch::autograd::UndefinedGrad", "CloneBackward0", "torch::autograd::UndefinedGradBackward",
    ]


def test_undefined_grad_matches_torchs_function():
    """UndefinedGrad()(x): three numbers, an UndefinedGradBackward output, and an undefined grad for x."""
    from agdb.engine.autograd.gradcheck import UndefinedGrad

    results = []
    for t, make in ((torch, torch._C._functions.UndefinedGrad), (engine, UndefinedGrad)):
        x = t.tensor([1.0, 2.0], dtype=t.float64, requires_grad=True)
        before = t.autograd._get_sequence_nr()
        y = make()(x)
        moved = t.autograd._get_sequence_nr() - before
        grads = t.autograd.grad((y * 3).sum(), x, allow_unused=True)
        results.append((moved, y.grad_fn.name(), y.grad_fn._sequence_nr() - before, y.tolist(), grads))
    assert results[1] == results[0]


def test_fast_mode_draws_torchs_random_vectors():
    """Fast mode's vectors are what torch.rand draws from a fresh torch.Generator, value for value."""
    from agdb.engine._random import DEFAULT_SEED
    from agdb.engine.autograd._gradcheck_fast import _uniform_floats

    stream = np.random.RandomState(DEFAULT_SEED & 0xFFFFFFFF)
    generator = torch.Generator()
    for n in (5, 1, 300):
        assert np.array_equal(_uniform_floats(stream, n), torch.rand(n, generator=generator).numpy())


def test_fast_mode_failure_message_matches_torch_on_one_element():
    """On one element u = v = 1 exactly, so the fast-mode numbers and the slow-mode max difference agree
    with torch's to the digit (the printed Jacobians differ only in the tensor repr's rounding)."""
    msgs = []
    for t in (torch, engine):
        s = t.tensor([0.7], dtype=t.float64, requires_grad=True)
        with pytest.raises(_gc_error(t)) as info:
            t.autograd.gradcheck(_square(t, True, True).apply, (s,), fast_mode=True)
        msgs.append(str(info.value))
    head = [m.split("Numerical:\n")[0] for m in msgs]
    tail = [m.rsplit("\n\n", 1)[1] for m in msgs]
    assert head[1] == head[0] and "numerical:1.40000000004" in head[0]
    assert tail[1] == tail[0] == "The max per-element difference (slow mode) is: 0.700000000040258.\n"


def test_fast_mode_passes_and_fails_with_slow_mode():
    """A correct backward passes both modes; a wrong one fails both; the input is left as it was."""
    y = engine.tensor(Y, dtype=engine.float64, requires_grad=True)
    for fast in (False, True):
        assert engine.autograd.gradcheck(lambda a: a.exp() * a, (y,), fast_mode=fast)
        assert not engine.autograd.gradcheck(_square(engine, True, True).apply, (y,), fast_mode=fast,
                                             raise_exception=False)
    assert y.tolist() == Y and y._version == 0
