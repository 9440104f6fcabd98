"""Every public path that prints a dtype's scalar type name (`Half`, `Long`), legacy type name (`torch.HalfTensor`)
or C++ element type (`c10::Half`), run by test_dtypes_parity.py on engine and torch, for each dtype the engine
holds.

Each is `fn(t, p)`; see parity.py.
"""
from __future__ import annotations

from typing import Callable

PROGRAMS: dict[str, Callable] = {}

DTYPES = ("float32", "float64", "float16", "int64", "int32", "bool")
FLOATS = ("float32", "float64", "float16")
# Cases where the engine differs from torch for a reason other than the name are left out of their case's dtypes:
# embedding takes int32 indices on torch; binary_cross_entropy_with_logits keeps a float16 target's dtype and
# refuses a bool one with its own message; torch's slow_conv*/bmm kernels refuse Bool (and Int, transposed)
# before they compare dtypes; scaled_dot_product_attention refuses a float attn_mask of another dtype than the
# query's (the engine takes it).


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _each(t, p, tag: str, case: Callable, dtypes: tuple = DTYPES) -> None:
    """Run `case(dtype)` for each dtype, recording its value or its error."""
    for name in dtypes:
        out = p.run(f"{tag} {name}", lambda name=name: case(getattr(t, name)))
        if out is not None:
            p.value(f"{tag} {name}", out)


def _ones(t, dt, n: int = 2):
    return t.ones(n, dtype=dt)


@program("dtype_names_tensor_type")
def _tensor_type(t, p):
    """Tensor.type(): the name, and a cast by the name of each legacy type."""
    _each(t, p, "type()", lambda dt: _ones(t, dt).type())
    names = ("torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor", "torch.LongTensor", "torch.IntTensor",
             "torch.BoolTensor")
    for name in names:
        out = p.run(f"type({name})", lambda name=name: t.ones(2).type(name))
        if out is not None:
            p.value(f"type({name})", (str(out.dtype), out))
    legacy = (t.FloatTensor, t.DoubleTensor, t.HalfTensor, t.LongTensor, t.IntTensor, t.BoolTensor)
    for kind in legacy:
        p.value(f"type(torch.{kind.__name__})", t.ones(2).type(kind))
        p.value(f"torch.{kind.__name__}(...)", (kind([1, 0]), tuple(kind(2, 3).shape)))
        p.value(f"isinstance {kind.__name__}", tuple(isinstance(t.ones(2, dtype=getattr(t, d)), kind) for d in DTYPES))


@program("dtype_names_module_and_optimizer")
def _module_and_optimizer(t, p):
    """nn.Module refusing a plain tensor as a parameter, and torch.optim refusing a tensor for its params."""
    def as_parameter(dt):
        lin = t.nn.Linear(1, 1)
        lin.weight = _ones(t, dt)

    def registered(dt):
        t.nn.Linear(1, 1).register_parameter("extra", _ones(t, dt))

    _each(t, p, "setattr", as_parameter)
    _each(t, p, "register_parameter", registered)
    _each(t, p, "optimizer", lambda dt: t.optim.SGD(_ones(t, dt), lr=0.1))


@program("dtype_names_in_place")
def _in_place(t, p):
    """Writes that refuse a value: setitem of a non-tensor, a result that cannot be cast, index_put_ of another
    dtype, and a saved tensor modified in place."""
    def setitem(dt):
        x = _ones(t, dt)
        x[0] = "a"

    def cast_into(dt):  # an in-place add whose result type cannot be cast to the tensor's
        return _ones(t, dt).add_(t.ones(2, dtype=t.float16) if dt in (t.int64, t.int32, t.bool) else
                                 t.ones(2, dtype=t.float64) * 1.5).sum()

    def index_put(dt):
        other = t.float16 if dt is not t.float16 else t.int64
        return _ones(t, dt, 3).index_put_((t.tensor([0, 2]),), t.zeros(2, dtype=other))

    def saved_modified(dt):
        w = t.ones(2, dtype=t.float64, requires_grad=True)
        x = _ones(t, dt)
        y = w * x  # saves x
        x.zero_()
        y.sum().backward()

    def setitem_expand(dt):  # a value of more dims than the slot it is written to
        x = _ones(t, dt, 3)
        x[0:2] = t.ones(2, 2, dtype=dt)

    _each(t, p, "setitem", setitem)
    _each(t, p, "setitem expand", setitem_expand)
    _each(t, p, "cast into", cast_into)
    _each(t, p, "index_put_", index_put)
    _each(t, p, "saved modified", saved_modified)


@program("dtype_names_kernels")
def _kernels(t, p):
    """Kernels that name the dtype they refuse or the two dtypes that differ."""
    F = t.nn.functional
    floats = [[0.5, -1.0], [2.0, 0.25]]

    def x(dt):
        return t.tensor(floats).to(dt)

    _each(t, p, "vector_norm dtype", lambda dt: t.linalg.vector_norm(t.ones(2, dtype=t.float64), dtype=dt))
    _each(t, p, "vector_norm input", lambda dt: t.linalg.vector_norm(_ones(t, dt)))
    _each(t, p, "mean", lambda dt: _ones(t, dt).mean())
    _each(t, p, "masked_fill_", lambda dt: t.ones(2).masked_fill_(_ones(t, dt), 0.0))
    _each(t, p, "masked_fill", lambda dt: t.ones(2).masked_fill(_ones(t, dt), 0.0))
    _each(t, p, "masked_fill with history", lambda dt: t.ones(2, requires_grad=True).masked_fill(_ones(t, dt), 0.0))
    _each(t, p, "attention key", lambda dt: F.scaled_dot_product_attention(
        t.ones(1, 2, 4), t.ones(1, 2, 4, dtype=dt), t.ones(1, 2, 4)))
    _each(t, p, "attention mask", lambda dt: F.scaled_dot_product_attention(
        t.ones(1, 2, 4), t.ones(1, 2, 4), t.ones(1, 2, 4), attn_mask=t.ones(2, 2, dtype=dt)),
          ("float32", "int64", "int32", "bool"))
    _each(t, p, "where", lambda dt: t.where(_ones(t, dt), t.ones(2), t.zeros(2)))
    _each(t, p, "multinomial", lambda dt: t.multinomial(_ones(t, dt), 1).shape)
    _each(t, p, "normal", lambda dt: t.normal(0.0, 1.0, (2,), dtype=dt).shape)
    _each(t, p, "normal_", lambda dt: _ones(t, dt).normal_().shape)
    _each(t, p, "normal(mean)", lambda dt: t.normal(_ones(t, dt), 1.0).shape)
    _each(t, p, "rand", lambda dt: t.rand(2, dtype=dt).shape)
    _each(t, p, "randn", lambda dt: t.randn(2, dtype=dt).shape)
    _each(t, p, "rand_like", lambda dt: t.rand_like(_ones(t, dt)).shape)
    _each(t, p, "randn_like", lambda dt: t.randn_like(_ones(t, dt)).shape)
    _each(t, p, "gelu", lambda dt: F.gelu(x(dt)))
    _each(t, p, "layer_norm", lambda dt: F.layer_norm(x(dt), (2,)))
    _each(t, p, "embedding", lambda dt: F.embedding(t.tensor([1, 0]).to(dt), t.ones(2, 3)),
          ("float32", "float64", "float16", "int64", "bool"))
    _each(t, p, "nll_loss target", lambda dt: F.nll_loss(t.ones(2, 3), t.tensor([1, 0]).to(dt)))
    _each(t, p, "nll_loss weight", lambda dt: F.nll_loss(t.ones(2, 3), t.tensor([1, 0]), weight=t.ones(3, dtype=dt)))
    _each(t, p, "bce_with_logits target", lambda dt: F.binary_cross_entropy_with_logits(t.ones(2), _ones(t, dt)),
          ("float32", "float64", "int64", "int32"))
    _each(t, p, "binary_cross_entropy target", lambda dt: F.binary_cross_entropy(t.ones(2) / 2, _ones(t, dt)))
    _each(t, p, "conv1d", lambda dt: F.conv1d(t.ones(1, 1, 3, dtype=dt), t.ones(1, 1, 2)), DTYPES[:-1])
    _each(t, p, "conv_transpose1d", lambda dt: F.conv_transpose1d(t.ones(1, 1, 3, dtype=dt), t.ones(1, 1, 2)),
          DTYPES[:-2])
    _each(t, p, "conv1d bias", lambda dt: F.conv1d(t.ones(1, 1, 3), t.ones(1, 1, 2), t.ones(1, dtype=dt)))
    _each(t, p, "mm", lambda dt: t.mm(t.ones(2, 2), t.ones(2, 2, dtype=dt)))
    _each(t, p, "mm self", lambda dt: t.mm(t.ones(2, 2, dtype=dt), t.ones(2, 2, dtype=t.float64)))
    _each(t, p, "dot", lambda dt: t.dot(_ones(t, dt), t.ones(2)))
    _each(t, p, "mv", lambda dt: t.mv(t.ones(2, 2), _ones(t, dt)))
    _each(t, p, "bmm", lambda dt: t.bmm(t.ones(1, 2, 2, dtype=dt), t.ones(1, 2, 2)), DTYPES[:-1])
    _each(t, p, "addmm", lambda dt: t.addmm(t.ones(2, 2, dtype=dt), t.ones(2, 2), t.ones(2, 2)))
    _each(t, p, "expand", lambda dt: t.ones(2, 3, dtype=dt).expand(3))


@program("dtype_names_hook")
def _hook(t, p):
    """A tensor hook that returns a grad of another dtype names both legacy types."""
    for src in FLOATS:
        for dst in FLOATS:
            if src == dst:
                continue
            x = t.ones(2, dtype=getattr(t, src), requires_grad=True)
            x.register_hook(lambda g, dst=dst: g.to(getattr(t, dst)))
            p.run(f"hook {src} -> {dst}", lambda x=x: (x * 2).sum().backward())
