"""Programs written after PyTorch's autograd tutorials, run on engine and torch by test_tutorials_parity.py.

Each is `fn(t, p)` (see parity.py) and is our own rendering of what a tutorial does, not its text:
- the beginner autograd tutorials (a one-layer logistic net, `requires_grad_`, `detach`, `no_grad`,
  vector-Jacobian products with `retain_graph`, accumulation and `.grad.zero_()`, frozen parameters);
- "Extending torch.autograd" / "Defining new autograd Functions" (a Legendre P3 Function fitted with manual
  SGD, non-tensor arguments, `mark_non_differentiable`, `needs_input_grad`, `once_differentiable`,
  `setup_context`);
- "Double Backward with Custom Functions" (saving inputs, outputs and intermediate results, then
  `autograd.grad(..., create_graph=True)` and a second grad);
- "Autograd mechanics" (saved tensors via `grad_fn._saved_*`, `requires_grad` propagation, grad modes,
  the in-place correctness check, backward from several threads);
- "Learning PyTorch with Examples" (a cubic fitted to sin(x) by hand, with autograd, with nn.Sequential and
  MSELoss(reduction='sum'), with an optimizer, with a custom Module and a dynamic net).

Random starting values come from a seeded numpy generator and are written in with `t.tensor`, so both
modules begin from the same numbers. Everything is float64 so that values agree to parity's tolerance.

Gaps found while writing them (the engine differed from torch 2.13), all filled since, each now with a program
of its own below: `inference_mode` ("mechanics_inference_mode"), `optim.RMSprop` ("examples_optim_rmsprop") and `gradcheck`
("custom_legendre_gradcheck", which also compares how far gradcheck and gradgradcheck move the seq_nr
counter; parity_gradcheck.py has more). The mechanics page's saved tensors are now all there: non-tensor saved
attributes (`_saved_exponent`, `_saved_dim`, ...), `_saved_result` as a new object ("mechanics_saved_tensors"),
and `_raw_saved_*.register_hooks`, `saved_tensors_hooks`, `save_on_cpu` and `disable_saved_tensors_hooks`, whose
programs are in tests/engine/parity_saved.py.
"""
from __future__ import annotations

import math
import threading
from typing import Callable

import numpy as np

PROGRAMS: dict[str, Callable] = {}

RNG = np.random.default_rng(2013)
W53 = RNG.normal(size=(5, 3)).tolist()
B3 = RNG.normal(size=3).tolist()
A2 = [2.0, 3.0]
B2 = [6.0, 4.0]
M55 = RNG.normal(size=(5, 5)).tolist()
N55 = RNG.normal(size=(5, 5)).tolist()
LIN_W = RNG.normal(size=(1, 3)).tolist()
LIN_B = RNG.normal(size=1).tolist()
COEF4 = RNG.normal(size=4).tolist()
COEF5 = RNG.normal(size=5).tolist()
NET_W1 = RNG.normal(size=(4, 3)).tolist()
NET_B1 = RNG.normal(size=4).tolist()
NET_W2 = RNG.normal(size=(2, 4)).tolist()
NET_B2 = RNG.normal(size=2).tolist()
NET_W3 = RNG.normal(size=(2, 4)).tolist()
NET_B3 = RNG.normal(size=2).tolist()
XS = [-1.5, -0.4, 0.3, 1.1, 2.0]
POINTS = 32  # samples of sin(x) on [-pi, pi]; the tutorials use 2000


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _f64(t):
    return t.float64


def _sine_data(t):
    x = t.linspace(-math.pi, math.pi, POINTS, dtype=_f64(t))
    return x, t.sin(x)


def _load(t, module, *values):
    """Copy written-out values into a module's parameters, in parameters() order."""
    with t.no_grad():
        for param, value in zip(module.parameters(), values, strict=True):
            param.copy_(t.tensor(value, dtype=_f64(t)))


# == the beginner autograd tutorials =====================================================================
@program("autograd_one_layer_logistic")
def _one_layer(t, p):
    """A single layer z = x @ w + b scored with binary_cross_entropy_with_logits; grads of w and b."""
    x = t.ones(5, dtype=_f64(t))
    y = t.zeros(3, dtype=_f64(t))
    w = p.leaf("w", W53)
    b = p.leaf("b", B3)
    z = t.matmul(x, w) + b
    loss = t.nn.functional.binary_cross_entropy_with_logits(z, y)
    p.watch(loss)
    p.value("z", z)
    p.value("loss", loss)
    p.value("z node", z.grad_fn.name())
    p.value("loss node", loss.grad_fn.name())
    p.run("backward", loss.backward)
    p.value("w.grad", w.grad)
    p.value("b.grad", b.grad)
    # A second backward through the freed graph is refused.
    p.run("backward again", loss.backward)
    # Tracking switched off: under no_grad, and by detach().
    z2 = t.matmul(x, w) + b
    p.value("tracked", z2.requires_grad)
    with t.no_grad():
        z3 = t.matmul(x, w) + b
    p.value("under no_grad", z3.requires_grad)
    z4 = (t.matmul(x, w) + b).detach()
    p.value("detached", (z4.requires_grad, z4.is_leaf, z4.grad_fn))
    p.counter("end")


@program("autograd_requires_grad_underscore")
def _requires_grad_(t, p):
    """Creating w without grad, then switching it on in place with requires_grad_()."""
    w = t.tensor(W53, dtype=_f64(t))
    p.value("before", w.requires_grad)
    w.requires_grad_()
    p.labels[id(w)] = "w"
    p.value("after", (w.requires_grad, w.is_leaf))
    out = (t.ones(5, dtype=_f64(t)) @ w).sigmoid().sum()
    p.watch(out)
    out.backward()
    p.value("w.grad", w.grad)
    nonleaf = w * 2
    p.run("requires_grad_(False) on a non-leaf", lambda: nonleaf.requires_grad_(False))
    p.value("still", nonleaf.requires_grad)


@program("autograd_vjp_accumulates")
def _vjp(t, p):
    """out = (inp + 1)^2 transposed; backward with ones three times: grads add up until zeroed."""
    inp = t.eye(4, 5, dtype=_f64(t), requires_grad=True)
    p.labels[id(inp)] = "inp"
    out = (inp + 1).pow(2).t()
    p.watch(out)
    out.backward(t.ones_like(out), retain_graph=True)
    p.value("first", inp.grad)
    out.backward(t.ones_like(out), retain_graph=True)
    p.value("second (accumulated)", inp.grad)
    inp.grad.zero_()
    out.backward(t.ones_like(out), retain_graph=True)
    p.value("after zero_", inp.grad)
    p.run("non-scalar without gradient", out.backward)
    p.counter("end")


@program("gentle_intro_external_grad")
def _gentle(t, p):
    """Q = 3a^3 - b^2 with a vector `gradient`: a.grad is 9a^2 and b.grad is -2b."""
    a = p.leaf("a", A2)
    b = p.leaf("b", B2)
    q = 3 * a ** 3 - b ** 2
    p.watch(q)
    q.backward(gradient=t.tensor([1.0, 1.0], dtype=_f64(t)))
    p.value("a.grad", a.grad)
    p.value("b.grad", b.grad)
    p.value("checks", (bool((9 * a ** 2 == a.grad).all()), bool((-2 * b == b.grad).all())))


@program("gentle_intro_dag_exclusion")
def _exclusion(t, p):
    """An op requires grad when any input does; a frozen model keeps grads only for a replaced head."""
    x = t.tensor(M55, dtype=_f64(t))
    y = t.tensor(N55, dtype=_f64(t))
    z = p.leaf("z", M55)
    p.value("x+y", (x + y).requires_grad)
    p.value("x+z", (x + z).requires_grad)
    nn = t.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    _load(t, model, NET_W1, NET_B1, NET_W2, NET_B2)
    for param in model.parameters():
        param.requires_grad = False
    model[2] = nn.Linear(4, 2).double()  # a new head: its parameters require grad
    _load(t, model[2], NET_W3, NET_B3)
    optimizer = t.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    out = model(t.tensor(XS[:3], dtype=_f64(t)).unsqueeze(0)).pow(2).sum()
    p.watch(out)
    out.backward()
    p.value("grads", tuple(param.grad for param in model.parameters()))
    optimizer.step()
    p.value("params", tuple(model.parameters()))


# == custom Functions ====================================================================================
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


@program("custom_legendre_fit")
def _legendre_fit(t, p):
    """y ~ a + b * P3(c + d x), fitted by hand-written SGD under no_grad."""
    P3 = _legendre(t)
    x, y = _sine_data(t)
    a = p.leaf("a", 0.0)
    b = p.leaf("b", -1.0)
    c = p.leaf("c", 0.0)
    d = p.leaf("d", 0.3)
    lr = 5e-4
    for step in range(25):
        y_pred = a + b * P3.apply(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if step == 0:
            p.watch(loss)
        if step % 8 == 0:
            p.value(f"loss {step}", loss)
        loss.backward()
        with t.no_grad():
            for param in (a, b, c, d):
                param -= lr * param.grad
                param.grad = None
    p.value("fitted", (a, b, c, d))
    p.counter("end")


@program("custom_nontensor_args")
def _mul_constant(t, p):
    """A Function taking a Python number: backward returns None for it."""
    class MulConstant(t.autograd.Function):
        @staticmethod
        def forward(ctx, tensor, constant):
            ctx.constant = constant
            return tensor * constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

    x = p.leaf("x", XS)
    y = MulConstant.apply(x, 2.5)
    p.watch(y)
    p.value("y", y)
    y.sum().backward()
    p.value("x.grad", x.grad)
    # Returning a gradient for the number is an error.
    class BadMulConstant(MulConstant):
        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, grad_output
    z = BadMulConstant.apply(x, 2.5)
    p.run("grad for a non-tensor", lambda: z.sum().backward())


@program("custom_mark_non_differentiable")
def _non_diff(t, p):
    """A Function returning scaled values and the argmax index; the index is marked non-differentiable."""
    class ScaleAndArgmax(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(x)
            return x * 3, idx

        @staticmethod
        def backward(ctx, grad_out, grad_idx):
            p.value("grad for idx", grad_idx)
            return grad_out * 3

    x = p.leaf("x", XS)
    out, idx = ScaleAndArgmax.apply(x)
    p.watch(out)
    p.value("idx", (idx, idx.requires_grad, idx.grad_fn))
    p.value("out", out)
    out.sum().backward()
    p.value("x.grad", x.grad)


def _linear_function(t, p):
    class LinearFunction(t.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            p.value("needs_input_grad", ctx.needs_input_grad)
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias
    return LinearFunction


@program("custom_linear_needs_input_grad")
def _linear(t, p):
    """The tutorial's LinearFunction: only the inputs that need a grad get one."""
    LinearFunction = _linear_function(t, p)
    inp = p.leaf("inp", NET_W2, requires_grad=False)
    weight = p.leaf("weight", NET_W3)
    bias = p.leaf("bias", NET_B3)
    out = LinearFunction.apply(inp, weight, bias)
    p.watch(out)
    p.value("out", out)
    out.pow(2).sum().backward()
    p.value("grads", (inp.grad, weight.grad, bias.grad))
    # Without a bias: the third input is None.
    inp2 = p.leaf("inp2", NET_W2)
    out2 = LinearFunction.apply(inp2, weight)
    p.watch(out2)
    out2.sum().backward()
    p.value("grads without bias", (inp2.grad, weight.grad))


@program("custom_setup_context")
def _setup_context(t, p):
    """The same LinearFunction in the forward/setup_context split."""
    class LinearFunction(t.autograd.Function):
        @staticmethod
        def forward(input, weight, bias):
            return input.mm(weight.t()) + bias

        @staticmethod
        def setup_context(ctx, inputs, output):
            input, weight, bias = inputs
            ctx.save_for_backward(input, weight)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight = ctx.saved_tensors
            return grad_output.mm(weight), grad_output.t().mm(input), grad_output.sum(0)

    inp = p.leaf("inp", NET_W2)
    weight = p.leaf("weight", NET_W3)
    bias = p.leaf("bias", NET_B3)
    out = LinearFunction.apply(inp, weight, bias)
    p.watch(out)
    out.tanh().sum().backward()
    p.value("grads", (inp.grad, weight.grad, bias.grad))


@program("custom_once_differentiable")
def _once(t, p):
    """A backward decorated with once_differentiable: first order works, create_graph then fails."""
    class Cube(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @t.autograd.function.once_differentiable
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * 3 * x ** 2

    x = p.leaf("x", XS)
    y = Cube.apply(x)
    p.watch(y)
    (g,) = t.autograd.grad(y.sum(), x)
    p.value("first", g)
    # The output grad reaching Cube's backward depends on x (through y * y), so create_graph must record it.
    y = Cube.apply(x)
    g2 = p.run("create_graph", lambda: t.autograd.grad((y * y).sum(), x, create_graph=True))
    if g2 is not None:
        p.value("g2", g2)
        p.watch(g2[0], hooks=False, tag="formula graph")
        p.run("differentiate twice", lambda: t.autograd.grad(g2[0].sum(), x))
    # With a constant output grad, nothing is recorded: g3 simply does not require grad.
    y = Cube.apply(x)
    (g3,) = t.autograd.grad(y.sum(), x, create_graph=True)
    p.value("g3", g3)
    p.counter("end")


# == double backward with custom Functions ===============================================================
def _double(t, p, fn, data):
    x = p.leaf("x", data)
    y = fn(x)
    p.watch(y)
    p.value("y", y)
    (g,) = t.autograd.grad(y.sum(), x, create_graph=True)
    p.value("g", g)
    p.watch(g, hooks=False, tag="formula graph")
    (gg,) = t.autograd.grad(g.sum(), x)
    p.value("gg", gg)
    p.counter("end")


@program("double_backward_saved_input")
def _square(t, p):
    """Square saves its input; backward is written in differentiable ops, so a second grad works."""
    class Square(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors
            return grad_out * 2 * x
    _double(t, p, Square.apply, XS)


@program("double_backward_saved_output")
def _exp(t, p):
    """Exp saves its output; the second grad flows back through the saved result."""
    class Exp(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = t.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_out):
            (result,) = ctx.saved_tensors
            return result * grad_out
    _double(t, p, Exp.apply, XS)


@program("double_backward_saved_intermediate")
def _sinh(t, p):
    """Sinh returns exp(x) and exp(-x) as extra outputs so that backward can save and differentiate them."""
    class Sinh(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = t.exp(x)
            expnegx = t.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, _grad_expx, _grad_expnegx):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            # The extra outputs got used nowhere else; with create_graph their grads arrive here too.
            if _grad_expx is not None:
                grad_input += _grad_expx * expx
            if _grad_expnegx is not None:
                grad_input -= _grad_expnegx * expnegx
            return grad_input

    _double(t, p, lambda x: Sinh.apply(x)[0], [-0.5, 0.2, 0.9])


@program("double_backward_untracked")
def _untracked(t, p):
    """A backward computed outside autograd (from the saved input's detached numbers): the second order
    grad is silently missing, so grad() with allow_unused returns None, and without it an error."""
    class SquareUntracked(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors
            return grad_out * 2 * x.detach()

    x = p.leaf("x", XS)
    y = SquareUntracked.apply(x)
    (g,) = t.autograd.grad(y.sum(), x, create_graph=True)
    p.value("g", g)
    p.watch(g, hooks=False, tag="formula graph")
    p.run("second", lambda: t.autograd.grad(g.sum(), x))


# == autograd mechanics ==================================================================================
@program("mechanics_saved_tensors")
def _saved(t, p):
    """grad_fn._saved_self is the input itself; _saved_result a new tensor object equal to the output;
    _saved_exponent the number (tests/engine/parity_saved.py goes further, hooks included)."""
    x = p.leaf("x", XS)
    y = x.pow(2)
    p.value("saved self is x", y.grad_fn._saved_self is x)
    p.value("saved self equal", y.grad_fn._saved_self.equal(x))
    p.value("saved exponent", y.grad_fn._saved_exponent)
    e = x.exp()
    p.value("saved result is e", e.grad_fn._saved_result is e)
    p.value("saved result equal", e.grad_fn._saved_result.equal(e))
    m = x * x.sin()
    p.value("mul saved", (m.grad_fn._saved_self.equal(x), m.grad_fn._saved_other.equal(x.sin())))
    p.watch(y, e, m)
    (y.sum() + e.sum() + m.sum()).backward()
    p.value("x.grad", x.grad)
    p.run("saved after backward", lambda: y.grad_fn._saved_self)


@program("mechanics_requires_grad_propagation")
def _propagation(t, p):
    """Outputs require grad when any input does; a frozen parameter gets no grad."""
    x = t.tensor(M55, dtype=_f64(t))
    y = t.tensor(N55, dtype=_f64(t))
    z = p.leaf("z", M55)
    a = x + y
    b = a + z
    p.value("flags", (a.requires_grad, b.requires_grad, a.is_leaf, b.is_leaf))
    lin = t.nn.Linear(3, 1).double()
    _load(t, lin, LIN_W, LIN_B)
    lin.weight.requires_grad_(False)
    out = lin(t.tensor([XS[:3]], dtype=_f64(t))).sum()
    p.watch(out)
    out.backward()
    p.value("grads", (lin.weight.grad, lin.bias.grad))


@program("mechanics_grad_modes")
def _grad_modes(t, p):
    """no_grad, enable_grad inside it, set_grad_enabled as a call and a context, and no_grad as decorator."""
    x = p.leaf("x", XS)
    with t.no_grad():
        y = x * 2
        p.value("no_grad", (t.is_grad_enabled(), y.requires_grad))
        with t.enable_grad():
            z = x * 2
        p.value("enable_grad inside", z.requires_grad)
    with t.set_grad_enabled(False):
        w = x * 2
    p.value("set_grad_enabled(False)", (w.requires_grad, t.is_grad_enabled()))
    t.set_grad_enabled(False)
    v = x * 2
    t.set_grad_enabled(True)
    p.value("set_grad_enabled call", (v.requires_grad, t.is_grad_enabled()))

    @t.no_grad()
    def doubler(u):
        return u * 2
    p.value("decorated", doubler(x).requires_grad)
    out = (x * 2).sum()
    p.watch(out)
    out.backward()
    p.value("x.grad", x.grad)
    p.counter("end")


@program("mechanics_inplace_check")
def _inplace_check(t, p):
    """Version counters and the error when a saved tensor was changed in place before backward."""
    a = p.leaf("a", XS)
    b = a.exp()
    p.value("version before", b._version)
    b.add_(1)
    p.value("version after", b._version)
    p.watch(b)
    p.run("backward", lambda: b.sum().backward())
    c = a.sigmoid()
    d = c * 2
    c.mul_(3)  # MulBackward0 saved only the scalar: c being saved by SigmoidBackward0 still breaks it
    p.watch(d)
    p.run("backward through sigmoid", lambda: d.sum().backward())
    e = a * 2
    e.mul_(3)  # nothing saved e: fine
    p.watch(e)
    p.run("backward ok", lambda: e.sum().backward())
    p.value("a.grad", a.grad)


@program("mechanics_threads")
def _threads(t, p):
    """Each thread builds its own graph and runs backward; then threads share one leaf and its grad adds up."""
    results: dict[int, object] = {}

    def train_fn(i):
        x = t.ones(5, 5, dtype=_f64(t), requires_grad=True)
        y = (x + 3) * (x + 4) * 0.5 * (i + 1)
        y.sum().backward()
        results[i] = x.grad

    threads = [threading.Thread(target=train_fn, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    p.value("per thread", tuple(results[i] for i in range(3)))

    shared = p.leaf("shared", M55)

    def shared_fn():
        y = (shared + 3) * (shared + 4) * 0.5
        y.sum().backward()

    threads = [threading.Thread(target=shared_fn) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    p.value("shared grad", shared.grad)
    p.counter("main thread counter")


# == Learning PyTorch with Examples ======================================================================
def _cubic_start(t, p, requires_grad):
    return [p.leaf(n, v, requires_grad=requires_grad) for n, v in zip("abcd", COEF4, strict=True)]


@program("examples_tensors_manual_grads")
def _manual(t, p):
    """A cubic fitted to sin(x) with gradients written by hand: no autograd at all."""
    x, y = _sine_data(t)
    a, b, c, d = _cubic_start(t, p, requires_grad=False)
    lr = 5e-5
    for step in range(30):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        if step % 10 == 0:
            p.value(f"loss {step}", t.tensor(loss, dtype=_f64(t)))  # a float: compared as a tensor, with tolerance
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a = a - lr * grad_a
        b = b - lr * grad_b
        c = c - lr * grad_c
        d = d - lr * grad_d
    p.value("fitted", (a, b, c, d))


@program("examples_autograd")
def _examples_autograd(t, p):
    """The same fit with autograd: backward, then in-place updates under no_grad and grads reset to None."""
    x, y = _sine_data(t)
    a, b, c, d = _cubic_start(t, p, requires_grad=True)
    lr = 5e-5
    for step in range(30):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        if step == 0:
            p.watch(loss)
        if step % 10 == 0:
            p.value(f"loss {step}", t.tensor(loss.item(), dtype=_f64(t)))
        loss.backward()
        with t.no_grad():
            a -= lr * a.grad
            b -= lr * b.grad
            c -= lr * c.grad
            d -= lr * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    p.value("fitted", (a, b, c, d))
    p.counter("end")


def _poly_model(t):
    nn = t.nn
    model = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)).double()
    _load(t, model, LIN_W, LIN_B)
    return model


def _powers(t, x):
    return x.unsqueeze(-1).pow(t.tensor([1, 2, 3]))


@program("examples_nn_sequential")
def _examples_nn(t, p):
    """x^1..3 features, Linear(3, 1) + Flatten(0, 1), MSELoss(reduction='sum'), manual SGD on parameters."""
    x, y = _sine_data(t)
    xx = _powers(t, x)
    model = _poly_model(t)
    loss_fn = t.nn.MSELoss(reduction="sum")
    lr = 5e-5
    for step in range(30):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if step == 0:
            p.watch(loss)
        if step % 10 == 0:
            p.value(f"loss {step}", loss)
        model.zero_grad()
        loss.backward()
        with t.no_grad():
            for param in model.parameters():
                param -= lr * param.grad
    linear = model[0]
    p.value("fitted", (linear.bias, linear.weight))
    p.counter("end")


def _fit_with(t, p, make_optimizer, state_key: str) -> None:
    """The nn fit driven by an optimizer: losses, fitted parameters and one piece of the optimizer's state."""
    x, y = _sine_data(t)
    xx = _powers(t, x)
    model = _poly_model(t)
    loss_fn = t.nn.MSELoss(reduction="sum")
    optimizer = make_optimizer(model.parameters())
    for step in range(30):
        loss = loss_fn(model(xx), y)
        if step % 10 == 0:
            p.value(f"loss {step}", loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    p.value("fitted", tuple(model.parameters()))
    p.value(state_key, tuple(optimizer.state[q][state_key] for q in model.parameters()))


@program("examples_optim_adam")
def _examples_optim(t, p):
    """The nn fit driven by Adam."""
    _fit_with(t, p, lambda params: t.optim.Adam(params, lr=1e-2), "exp_avg_sq")


@program("examples_optim_sgd")
def _examples_sgd(t, p):
    """The nn fit with SGD and momentum."""
    x, y = _sine_data(t)
    xx = _powers(t, x)
    model = _poly_model(t)
    loss_fn = t.nn.MSELoss(reduction="sum")
    optimizer = t.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    for step in range(30):
        loss = loss_fn(model(xx), y)
        if step % 10 == 0:
            p.value(f"loss {step}", loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    p.value("fitted", tuple(model.parameters()))


def _polynomial3(t):
    nn = t.nn

    class Polynomial3(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d = (nn.Parameter(t.tensor(v, dtype=_f64(t))) for v in COEF4)

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

        def string(self):
            a, b, c, d = (q.item() for q in (self.a, self.b, self.c, self.d))
            return f"y = {a:.6f} + {b:.6f} x + {c:.6f} x^2 + {d:.6f} x^3"
    return Polynomial3


@program("examples_custom_module")
def _custom_module(t, p):
    """A Module holding four scalar Parameters, trained with SGD and MSELoss(reduction='sum')."""
    x, y = _sine_data(t)
    model = _polynomial3(t)()
    p.value("names", tuple(name for name, _ in model.named_parameters()))
    criterion = t.nn.MSELoss(reduction="sum")
    optimizer = t.optim.SGD(model.parameters(), lr=5e-5)
    for step in range(30):
        loss = criterion(model(x), y)
        if step == 0:
            p.watch(loss)
        if step % 10 == 0:
            p.value(f"loss {step}", loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    p.value("result", model.string())
    p.counter("end")


@program("examples_dynamic_net")
def _dynamic(t, p):
    """Weights reused a varying number of times per forward (a fixed schedule stands in for random.randint)."""
    nn = t.nn

    class DynamicNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d, self.e = (nn.Parameter(t.tensor(v * 0.1, dtype=_f64(t)))
                                                      for v in COEF5)

        def forward(self, x, extra):
            y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
            for exp in range(4, extra):
                y = y + self.e * x ** exp
            return y

    x, y = _sine_data(t)
    model = DynamicNet()
    criterion = nn.MSELoss(reduction="sum")
    optimizer = t.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)
    schedule = [4, 5, 6, 5, 4, 6, 6, 5, 4, 5, 6, 4]
    for step, extra in enumerate(schedule):
        loss = criterion(model(x, extra), y)
        if step < 3:
            p.watch(loss, hooks=(step == 2), tag=f"graph {step}")
        p.value(f"loss {step}", loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    p.value("fitted", tuple(model.parameters()))
    p.counter("end")


@program("mechanics_backward_hooks")
def _backward_hooks(t, p):
    """The mechanics page's hook kinds: a tensor hook that rewrites the grad, a post-accumulate-grad hook on a
    leaf, and Node pre- and post-hooks; the order they fire in and the grads they see."""
    x = p.leaf("x", XS)
    seen = []
    y = x.sin()
    z = y * 2

    def tensor_hook(g):
        seen.append(("tensor hook on y", g))
        return g * 10

    y.register_hook(tensor_hook)
    x.register_post_accumulate_grad_hook(lambda leaf: seen.append(("post accumulate", leaf.grad)))
    y.grad_fn.register_prehook(lambda go: seen.append(("node prehook", go)))
    y.grad_fn.register_hook(lambda gi, go: seen.append(("node hook", gi, go)))
    p.watch(z)
    z.sum().backward()
    for event in seen:
        p.value(event[0], event[1:])
    p.value("x.grad", x.grad)


@program("mechanics_inference_mode")
def _inference_mode(t, p):
    """inference_mode: nothing recorded, inference tensors, and the errors when they meet autograd later."""
    x = p.leaf("x", XS)
    with t.inference_mode():
        y = x * 2
        p.value("inside", (t.is_inference_mode_enabled(), y.requires_grad, y.grad_fn is None, y.is_inference()))
    p.counter("after inference_mode")
    p.run("in-place outside", lambda: y.add_(1))
    p.run("saved for backward", lambda: x * y)
    z = (x * 3).sum()
    p.watch(z)
    z.backward()
    p.value("x.grad", x.grad)


@program("examples_optim_rmsprop")
def _examples_rmsprop(t, p):
    """The nn fit driven by RMSprop, as the tutorial has it."""
    _fit_with(t, p, lambda params: t.optim.RMSprop(params, lr=1e-3), "square_avg")


@program("custom_legendre_gradcheck")
def _legendre_gradcheck(t, p):
    """Step four of the custom-Function recipe: gradcheck and gradgradcheck of LegendrePolynomial3."""
    P3 = _legendre(t)
    x = p.leaf("x", XS)
    p.value("gradcheck", t.autograd.gradcheck(P3.apply, (x,)))
    p.counter("after gradcheck")  # 37 numbers on torch 2.13
    p.value("gradgradcheck", t.autograd.gradgradcheck(P3.apply, (x,), (p.leaf("g", XS[::-1]),)))
    p.counter("after gradgradcheck")
    y = P3.apply(x)
    p.watch(y)
    p.run("backward", lambda: y.sum().backward())
    p.value("x.grad", x.grad)
