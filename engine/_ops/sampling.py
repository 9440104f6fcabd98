"""multinomial, normal and Tensor.normal_: random draws from the engine's generators (a `manual_seed` repeats
them; the values are not torch's), with torch 2.13's shapes, dtypes, checks and nodes (NormalBackward0 for
normal_ with history, NormalBackward1/2/3 for the normal overloads with tensor arguments; their grads are
zeros, as torch's formulas give)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _random
from .._args import invalid_combination
from .._dispatch import public
from .._dtype import scalar_type_name
from .._functions import _Generated
from .._tensor import Tensor, make_tensor
from ._common import _out, broadcast_shape, common_device, needs_grad, record

_NUMBER = (int, float, np.number)


# -- multinomial ------------------------------------------------------------------------------------------
@public("multinomial", torch=True, tensor=True)
def multinomial(a: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None) -> Tensor:
    """int64 indices drawn from each row of the weights `a` (1-D or 2-D); no node."""
    rng = _random.rng("multinomial", generator)
    x = a._data
    if x.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {scalar_type_name(x)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if x.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not replacement and num_samples > x.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    out = np.zeros((rows.shape[0], num_samples), dtype=np.int64)
    if rows.size:
        if not np.isfinite(rows).all() or (rows < 0).any():
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if (rows.sum(axis=1) <= 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        for i, row in enumerate(rows):
            if replacement:
                cdf = np.cumsum(row / row.sum())
                out[i] = np.minimum(np.searchsorted(cdf, rng.random(num_samples), side="right"), len(row) - 1)
                out[i] = _skip_zeros(out[i], row)
            else:  # torch's own way: the largest p / q for exponential q; zero weights come last
                keys = row / rng.exponential(size=len(row))
                out[i] = np.argsort(-keys, kind="stable")[:num_samples]
    return make_tensor(out.reshape(x.shape[:-1] + (num_samples,)), device=a._device)


def _skip_zeros(picked: np.ndarray, row: np.ndarray) -> np.ndarray:
    """A draw landing on a category of weight 0 (a rounding edge of the cdf) moves to the next one with weight."""
    bad = row[picked] == 0
    if bad.any():
        nonzero = np.flatnonzero(row)
        picked[bad] = nonzero[np.minimum(np.searchsorted(nonzero, picked[bad]), len(nonzero) - 1)]
    return picked


# -- normal -----------------------------------------------------------------------------------------------
class NormalBackward0(_Generated):
    __slots__ = ()

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            from .scatter import zeros_of

            out[0] = zeros_of(tuple(grad._data.shape), grad)


class NormalBackward1(_Generated):
    __slots__ = ("mean_sym_sizes",)
    _saved_values = ("mean_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            from .scatter import zeros_of

            out[0] = zeros_of(self.mean_sym_sizes, grad)


class NormalBackward2(_Generated):
    __slots__ = ("std_sym_sizes",)
    _saved_values = ("std_sym_sizes",)

    def formulas(self, grad, out):
        if self.should_compute_output(0):
            from .scatter import zeros_of

            out[0] = zeros_of(self.std_sym_sizes, grad)


class NormalBackward3(_Generated):
    __slots__ = ("mean_sym_sizes", "std_sym_sizes")
    _saved_values = ("mean_sym_sizes", "std_sym_sizes")

    def formulas(self, grad, out):
        from .scatter import zeros_of

        if self.should_compute_output(0):
            out[0] = zeros_of(self.mean_sym_sizes, grad)
        if self.should_compute_output(1):
            out[1] = zeros_of(self.std_sym_sizes, grad)


_NORMAL_SIGNATURES = (
    "Tensor mean, Tensor std, *, torch.Generator generator = None, Tensor out = None",
    "Tensor mean, float std = 1, *, torch.Generator generator = None, Tensor out = None",
    "float mean, Tensor std, *, torch.Generator generator = None, Tensor out = None",
    "float mean, float std, tuple of ints size, *, torch.Generator generator = None, Tensor out = None, "
    "torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
    "bool requires_grad = False",
)


def _std_number(std: float) -> None:
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _floating(x: np.ndarray) -> None:
    if x.dtype.kind != "f":
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{scalar_type_name(x)}'")


@public("normal", torch=True)
def normal(mean: Any = 0.0, std: Any = 1.0, size: Any = None, *, generator: Any = None, dtype: Any = None,
           device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """Samples of N(mean, std): tensors broadcast (NormalBackward1/2/3 over the ones that require grad), or two
    numbers and a size (a factory)."""
    rng = _random.rng("normal", generator)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        return _normal_tensors(mean, std, rng)
    if size is None or not isinstance(mean, _NUMBER) or not isinstance(std, _NUMBER):
        given = (mean, std) if size is None else (mean, std, size)
        raise TypeError(invalid_combination("normal", _NORMAL_SIGNATURES, given, kwargs))
    from .._factories import _finish, _np_dtype, _size

    shape, np_dtype = _size("normal", (size,), kwargs), _np_dtype(dtype)
    _std_number(float(std))
    if np_dtype.kind != "f":
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{scalar_type_name(np_dtype)}'")
    data = (rng.standard_normal(shape) * float(std) + float(mean)).astype(np_dtype)
    return _finish(data, requires_grad, device)


def _normal_tensors(mean: Any, std: Any, rng: np.random.Generator) -> Tensor:
    m_t, s_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if m_t and s_t:
        node = NormalBackward3() if needs_grad(mean, std) else None
        common_device(mean, std)
        shape = broadcast_shape(mean, std)
        _floating(mean._data)
        if (std._data < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
        dt = np.result_type(mean._data, std._data)
        data = rng.standard_normal(shape) * std._data + mean._data
        like, inputs = mean, (mean, std)
    elif m_t:
        node = NormalBackward1() if needs_grad(mean) else None
        _std_number(float(std))
        _floating(mean._data)
        dt = mean._data.dtype
        data = rng.standard_normal(mean._data.shape) * float(std) + mean._data
        like, inputs = mean, (mean,)
    else:
        node = NormalBackward2() if needs_grad(std) else None
        _floating(std._data)
        if (std._data < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
        dt = std._data.dtype
        data = rng.standard_normal(std._data.shape) * std._data + float(mean)
        like, inputs = std, (std,)
    out = _out(np.asarray(data, dtype=dt), like)
    if node is not None:
        if m_t:
            node.mean_sym_sizes = tuple(mean._data.shape)
        if s_t:
            node.std_sym_sizes = tuple(std._data.shape)
        record(node, inputs, out)
    return out


@public("normal_", tensor=True)
def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Tensor:
    """Fill with samples of N(mean, std) in place; with history → NormalBackward0 (a zero grad)."""
    from .._inplace import _old, _rebase, _records, _write

    rng = _random.rng("normal_", generator)
    records = _records(self, ())
    _std_number(float(std))
    _floating(self._data)
    data = (rng.standard_normal(self._data.shape) * float(std) + float(mean)).astype(self._data.dtype)
    if not records:
        _write(self, data)
        return self
    node = NormalBackward0()
    result = make_tensor(data, device=self._device)
    record(node, (_old(self),), result)
    return _rebase(self, result)


__all__ = ["multinomial", "normal", "normal_"]
