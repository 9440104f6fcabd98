"""inference_mode, is_inference_mode_enabled and Tensor.is_inference against torch 2.13 on the same programs."""
from __future__ import annotations

import pytest

from agdb import engine

torch = pytest.importorskip("torch")


def _err(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the type and message are what is compared
        return type(e).__name__, str(e)
    return None


def _inside(t):
    x = t.ones(3)
    w = t.ones(3, requires_grad=True)
    with t.inference_mode():
        s0 = t.autograd._get_sequence_nr()
        y = w * 2
        z = t.zeros(2)
        out = [t.is_inference_mode_enabled(), t.is_grad_enabled(), y.requires_grad, y.grad_fn is None,
               y.is_inference(), z.is_inference(), x[0:2].is_inference(), x.view(3).is_inference(),
               x.detach().is_inference(), x.sum().is_inference(), w.exp().is_inference(),
               _err(lambda: z._version)]
        x.add_(1)
        out += [x._version, x.is_inference(), t.autograd._get_sequence_nr() - s0]
    out += [t.is_inference_mode_enabled(), t.is_grad_enabled(), z.is_inference(),
            z.view(2).is_inference(), (z + 1).is_inference(), z.detach().is_inference(), z.data.is_inference(),
            z.clone().is_inference(), _err(lambda: z._version)]
    return out


def test_inside_and_after():
    assert _inside(engine) == _inside(torch)


def _errors(t):
    with t.inference_mode():
        z = t.zeros(2)
    w = t.ones(2, requires_grad=True)
    out = []
    for f in (lambda: z.zero_(), lambda: z.add_(1), lambda: z.__setitem__(slice(0, 1), 5.0), lambda: z.copy_(t.ones(2)),
              lambda: z[0:1].mul_(2), lambda: z.requires_grad_(), lambda: z.requires_grad_(False)):
        out.append(_err(f))
        out.append(z.tolist())  # torch writes, then refuses to count the write
    s0 = t.autograd._get_sequence_nr()
    out.append(_err(lambda: z * w))
    out.append(t.autograd._get_sequence_nr() - s0)
    out.append(_err(lambda: t.exp(w).mul(z)))
    out.append(type((z + w).grad_fn).__name__)
    out.append(_err(lambda: t.ones(2).add_(z)))
    out.append(t.autograd._get_sequence_nr() - s0)
    return out


def test_errors_outside():
    assert _errors(engine) == _errors(torch)


def _nesting(t):
    out = []
    with t.no_grad():
        with t.inference_mode():
            out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
            with t.inference_mode(False):
                out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
        with t.inference_mode(False):
            out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
        out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
    w = t.ones(2, requires_grad=True)
    with t.inference_mode():
        with t.no_grad():
            out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
        with t.enable_grad():
            q = w * 2
            out.append((t.is_grad_enabled(), q.requires_grad, q.grad_fn is None, q.is_inference()))
        with t.set_grad_enabled(True):
            out.append(t.is_grad_enabled())
        out.append(t.is_grad_enabled())
        z = t.ones(2)
        with t.inference_mode(False):
            s0 = t.autograd._get_sequence_nr()
            q = w * 2
            out.append((t.is_grad_enabled(), t.is_inference_mode_enabled(), type(q.grad_fn).__name__,
                        q.is_inference(), t.autograd._get_sequence_nr() - s0))
            out.append(_err(lambda: z * w))
            with t.no_grad():
                out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
        out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
    out.append((t.is_grad_enabled(), t.is_inference_mode_enabled()))
    return out


def test_nesting_with_grad_modes():
    assert _nesting(engine) == _nesting(torch)


def _decorators(t):
    w = t.ones(2, requires_grad=True)

    @t.inference_mode()
    def f(a):
        return a * 2, t.is_inference_mode_enabled()

    @t.inference_mode
    def g(a):
        return a * 2

    @t.inference_mode(False)
    def h(a):
        return a * 2, t.is_inference_mode_enabled()

    y, on = f(w)
    out = [y.is_inference(), y.requires_grad, on, g(w).is_inference(), t.is_inference_mode_enabled()]
    with t.inference_mode():
        q, on = h(w)
        out += [type(q.grad_fn).__name__, q.is_inference(), on, t.is_inference_mode_enabled()]
    return out


def test_decorators():
    assert _decorators(engine) == _decorators(torch)


def _training_after_eval(t):
    t.manual_seed(0)
    lin = t.nn.Linear(3, 2)
    x = t.ones(4, 3)
    with t.inference_mode():
        pred = lin(x)
    s0 = t.autograd._get_sequence_nr()
    loss = lin(x.clone()).sum()
    loss.backward()
    return [pred.is_inference(), pred.requires_grad, pred.grad_fn is None, loss.is_inference(),
            t.autograd._get_sequence_nr() - s0, _err(lambda: t.nn.functional.linear(pred, t.ones(2, 2, requires_grad=True))),  # noqa: E501
            pred.clone().is_inference()]


def test_model_eval_then_train():
    assert _training_after_eval(engine) == _training_after_eval(torch)


_SCALAR_VIEWS = {
    "int index": lambda t, x: x[0], "two ints": lambda t, x: x.view(3, 1)[1, 0], "select": lambda t, x: x.select(0, -1),
    "unbind": lambda t, x: x.unbind(0)[2], "0-dim tensor index": lambda t, x: x[t.tensor(1)],
    "ellipsis": lambda t, x: x[0, ...], "view": lambda t, x: x[:1].view(()), "squeeze": lambda t, x: x[1:2].squeeze(),
    "flatten then int": lambda t, x: x.flatten()[2], "slice then int": lambda t, x: x[1:][0],
    "alias": lambda t, x: x[1][...],
}


def _scalar_views(t):
    out = []
    for name, f in _SCALAR_VIEWS.items():
        x = t.tensor([1.0, 2.0, 3.0])
        v = f(t, x)
        v.add_(10)  # a view shares memory and the version counter
        out.append((name, x.tolist(), x._version, v._version))
        with t.inference_mode():
            z = t.tensor([1.0, 2.0, 3.0])
            inside_of_normal = f(t, x).is_inference()
        out.append((name, f(t, z).is_inference(), inside_of_normal, _err(lambda f=f, z=z: f(t, z)._version),
                    _err(lambda f=f, z=z: f(t, z).add_(1)), z.tolist()))
    return out


def test_scalar_views():
    """A 0-dim view (x[0], select, unbind...) shares memory and version with its base, and is an inference
    tensor iff its base is one, wherever it is made."""
    assert _scalar_views(engine) == _scalar_views(torch)
