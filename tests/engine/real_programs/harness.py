"""Runs a vendored public program unchanged, once on agdb's engine and once on real torch, and describes every
backward call it makes, for test_real_programs.py to compare.

A program is a directory holding the files of a public program (each headed with its source and its edits);
its `main.py` runs as `__main__` in that directory, which is also first on `sys.path`, and the command line the test
gives (none, or options that pick one of the program's models). On the
engine, `import torch` gets the engine through the `--as-torch` shim (app/torch_shim.py), exactly as
`agdb record` runs a script.

What is compared, for each `Tensor.backward` (an optimizer's closure included): the graph below the root
(node names, next_functions, seq_nrs relative to the program's start), the root's value, the order in which
the nodes run (Node pre-hooks), and then the `.grad` of every leaf the graph reaches; also every random draw
(its kind and shape) and the exception that ended the program, if any.

Random numbers. The engine's random values are its own (numpy's PCG64, not torch's Mersenne Twister), so the
two runs would start from different weights. Both runs therefore draw from one harness stream instead: the
random entry points a program reaches (factories, `nn.init`, dropout, samplers, `random_split`) are replaced,
on both libraries, by functions that take their values from a numpy generator seeded the same for each run;
dropout inside a kernel (an RNN's between its layers, attention's math path), which no Python entry point
reaches, takes its Bernoulli values from the stream too (torch's `bernoulli_` kernel, the engine's generator for
"dropout").
The rest of the op (dtype, shape, the node it records, or none) stays the library's own. On the engine every
other draw is refused, so none can escape the stream unnoticed; on torch an unreplaced draw shows up as
differing values.

Must not import: the app's UI (textual, rich); only `app.torch_shim`.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import runpy
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from agdb import engine
from agdb.app import torch_shim
from tests.engine.parity import Probe

SEED = 20240613
"""The harness stream's seed: the same for both runs of a program."""


class _Stream:
    """The random values both runs share, and the log of what was drawn."""

    def __init__(self, probe: Probe) -> None:
        self.rng = np.random.default_rng(SEED)
        self.probe = probe

    def draw(self, kind: str, shape: tuple, fn: Callable[[np.random.Generator], Any]) -> np.ndarray:
        self.probe.events.append(("random", kind, tuple(int(s) for s in shape)))
        return np.asarray(fn(self.rng))


def _shape(size: tuple) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)) or (len(size) == 1 and hasattr(size[0], "__len__")):
        return tuple(size[0])
    return tuple(size)


def _random_functions(t: Any, s: _Stream) -> dict[str, Callable]:
    """The replacements, written once over `t` (engine or torch) so that both runs draw alike."""

    def make(values: np.ndarray, dtype: Any, requires_grad: bool = False) -> Any:
        out = t.tensor(values, dtype=dtype if dtype is not None else t.get_default_dtype())
        return out.requires_grad_() if requires_grad else out

    def fill(x: Any, values: np.ndarray) -> Any:
        with t.no_grad():
            x.copy_(t.tensor(values, dtype=x.dtype))
        return x

    def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kwargs):
        shape = _shape(size or (kwargs["size"],))
        return make(s.draw("randn", shape, lambda g: g.standard_normal(shape)), dtype, requires_grad)

    def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **kwargs):
        shape = _shape(size or (kwargs["size"],))
        return make(s.draw("rand", shape, lambda g: g.random(shape)), dtype, requires_grad)

    def randn_like(x, dtype=None, **_):
        shape = tuple(x.shape)
        return make(s.draw("randn", shape, lambda g: g.standard_normal(shape)), dtype or x.dtype)

    def rand_like(x, dtype=None, **_):
        shape = tuple(x.shape)
        return make(s.draw("rand", shape, lambda g: g.random(shape)), dtype or x.dtype)

    def randint(*args, generator=None, dtype=None, device=None, **kwargs):
        args = list(args)
        if "size" in kwargs:
            args.append(kwargs.pop("size"))
        if "high" in kwargs:
            args.insert(0 if "low" not in kwargs else 1, kwargs.pop("high"))
        if "low" in kwargs:
            args.insert(0, kwargs.pop("low"))
        low, high, size = (0, *args) if len(args) == 2 else args
        shape = tuple(size)
        values = s.draw("randint", shape, lambda g: g.integers(int(low), int(high), shape))
        return t.tensor(values, dtype=dtype if dtype is not None else t.int64)

    def randperm(n, generator=None, dtype=None, **_):
        values = s.draw("randperm", (int(n),), lambda g: g.permutation(int(n)))
        return t.tensor(values, dtype=dtype if dtype is not None else t.int64)

    def seed(generator=None) -> int:
        return int(s.draw("seed", (), lambda g: g.integers(0, 2**62)))

    def multinomial(input, num_samples, replacement=False, generator=None, **_):
        probs = np.asarray(input.detach().double().tolist(), dtype=float)
        rows = probs.reshape(-1, probs.shape[-1])

        def pick(g):
            return np.stack([g.choice(rows.shape[1], num_samples, replace=replacement, p=r / r.sum())
                             for r in rows])
        values = s.draw("multinomial", (rows.shape[0], int(num_samples)), pick)
        return t.tensor(values.reshape(probs.shape[:-1] + (int(num_samples),)), dtype=t.int64)

    def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, **_):
        if size is not None:
            shape = tuple(size)
            return make(s.draw("normal", shape, lambda g: g.normal(float(mean), float(std), shape)), dtype)
        m = np.asarray(mean.detach().tolist() if hasattr(mean, "detach") else mean, dtype=float)
        d = np.asarray(std.detach().tolist() if hasattr(std, "detach") else std, dtype=float)
        shape = np.broadcast_shapes(m.shape, d.shape)
        like = mean if hasattr(mean, "dtype") else std
        return make(m + d * s.draw("randn", shape, lambda g: g.standard_normal(shape)), like.dtype)

    def uniform_(x, a=0.0, b=1.0, generator=None):
        shape = tuple(x.shape)
        return fill(x, s.draw("uniform_", shape, lambda g: g.uniform(a, b, shape)))

    def normal_(x, mean=0.0, std=1.0, generator=None):
        shape = tuple(x.shape)
        return fill(x, s.draw("normal_", shape, lambda g: g.normal(mean, std, shape)))

    def random_(x, *args, generator=None):
        return fill(x, np.full(tuple(x.shape), seed()))

    def dropout(input, p=0.5, training=True, inplace=False):
        if p < 0.0 or p > 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        if not training or p == 0:
            return input
        shape = tuple(input.shape)
        keep = s.draw("dropout", shape, lambda g: g.random(shape)) >= p
        noise = t.tensor(keep / (1.0 - p), dtype=input.dtype)
        return input.mul_(noise) if inplace else input * noise

    def feature_dropout(input, p, train):
        if p == 0 or not train or input.numel() == 0:
            return input
        if p == 1:
            return input * t.zeros((), dtype=input.dtype)
        shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
        keep = s.draw("feature_dropout", shape, lambda g: g.random(shape)) >= p
        return input * t.tensor(keep / (1.0 - p), dtype=input.dtype)

    return {"randn": randn, "rand": rand, "randn_like": randn_like, "rand_like": rand_like, "randint": randint,
            "randperm": randperm, "seed": seed, "multinomial": multinomial, "normal": normal,
            "uniform_": uniform_, "normal_": normal_, "random_": random_, "dropout": dropout,
            "feature_dropout": feature_dropout}


def _sites(t: Any, s: _Stream, fns: dict[str, Callable]) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement) for each random entry point of `t`. Only attributes `t` has are
    replaced: a program that needs one the engine lacks fails on the engine, as it would for a user."""
    top = ["randn", "rand", "randn_like", "rand_like", "randint", "randperm", "multinomial", "normal"]
    sites = [(t, name, fns[name]) for name in top]
    sites += [(t.Tensor, name, fns[name]) for name in ("uniform_", "normal_", "random_", "multinomial")]
    sites.append((t.nn.functional, "dropout", fns["dropout"]))
    if t is engine:
        from agdb.engine.nn import _dropout, init
        sites.append((_dropout._VF, "feature_dropout", fns["feature_dropout"]))
        from agdb.engine.utils.data import dataloader, dataset, sampler
        sites += [(init, "uniform_", lambda x, a=0.0, b=1.0, generator=None: fns["uniform_"](x, a, b)),
                  (init, "normal_", lambda x, mean=0.0, std=1.0, generator=None: fns["normal_"](x, mean, std)),
                  (sampler, "randperm", fns["randperm"]), (sampler, "randint", fns["randint"]),
                  (sampler, "draw_seed", fns["seed"]), (dataloader, "draw_seed", fns["seed"]),
                  (dataset, "randperm", fns["randperm"]),
                  (engine._random, "rng", _kernel_rng(s)), (engine._factories, "rng", _refuse)]
    else:
        import torch.utils.data.dataset as dataset_module
        sites.append((dataset_module, "randperm", fns["randperm"]))
        sites.append((t._VF, "feature_dropout", fns["feature_dropout"]))  # dropout1d/2d/3d's kernel
    return [(owner, name, fn) for owner, name, fn in sites if hasattr(owner, name)]


class _BernoulliDraws:
    """The engine's generator as its at::dropout kernel uses it (`rng.random(shape) >= p`), drawing from the stream
    what torch's kernel draws with `bernoulli_` (see _TorchBernoulli)."""

    def __init__(self, s: _Stream) -> None:
        self.s = s

    def random(self, shape: tuple) -> np.ndarray:
        return self.s.draw("bernoulli_", tuple(shape), lambda g: g.random(tuple(shape)))


def _kernel_rng(s: _Stream) -> Callable:
    """engine._random.rng for the run: dropout inside a kernel (an RNN's between layers, attention's math path),
    which no Python entry point reaches, draws from the stream; every other draw is refused."""
    draws = _BernoulliDraws(s)

    def rng(fn: str, generator: Any = None) -> Any:
        return draws if fn == "dropout" and generator is None else _refuse(fn, generator)
    return rng


@contextlib.contextmanager
def _torch_bernoulli(s: _Stream) -> Any:
    """torch's CPU kernel of `bernoulli_(p)` (what at::dropout calls inside a C++ kernel: an RNN's layers,
    attention's math path) replaced for the run by one that takes its values from the stream as the engine's
    kernel does (keep where the draw is >= the drop probability). A kernel registered on the dispatcher, not a
    dispatch mode: under a Python mode torch treats every tensor as a subclass and records other nodes (a
    reshape's ViewBackward0 for ReshapeAliasBackward0)."""
    import torch

    def bernoulli_(x, p=0.5, *, generator=None):
        shape = tuple(x.shape)
        keep = s.draw("bernoulli_", shape, lambda g: g.random(shape)) >= 1.0 - p
        return x.copy_(torch.tensor(keep, dtype=x.dtype))

    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
        library.impl("bernoulli_.float", bernoulli_, "CPU")
    try:
        yield
    finally:
        library._destroy()


def _refuse(fn: str, generator: Any = None) -> Any:
    raise AssertionError(f"the engine drew random numbers in {fn}() outside the harness stream: "
                         f"replace that entry point in tests/engine/real_programs/harness.py")


def _watch_backward(t: Any, p: Probe) -> Callable:
    """A Tensor.backward that describes the graph, runs the original and records the leaves' grads."""
    original = t.Tensor.backward
    calls = [0]

    def backward(self, *args, **kwargs):
        calls[0] += 1
        tag = f"backward {calls[0]}"
        p.watch(self, hooks="new", tag=tag)
        p.value(f"{tag} root", self)
        try:
            return original(self, *args, **kwargs)
        finally:
            p.value(f"{tag} grads", tuple(_leaf_grads(self)))

    return backward


def _leaf_grads(root: Any) -> list:
    """The .grad of each leaf below `root`, in the probe's depth-first order."""
    grads, seen, stack = [], set(), [root.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        if hasattr(n, "variable"):
            grads.append(n.variable.grad)
        stack.extend(c for c, _ in reversed(n.next_functions))
    return grads


def describe(program_dir: Path, library: str, argv: tuple[str, ...] = ()) -> tuple[list, str]:
    """Run `program_dir/main.py` with command-line arguments `argv` on `library` ("engine" or "torch"); return
    its events and what it printed."""
    saved = torch_shim.install() if library == "engine" else None
    t = engine if library == "engine" else __import__("torch")
    p = Probe(t)
    stream = _Stream(p)
    patched = _sites(t, stream, _random_functions(t, stream)) + [(t.Tensor, "backward", _watch_backward(t, p))]
    originals = [(owner, name, owner.__dict__.get(name, _ABSENT)) for owner, name, _ in patched]
    before = set(sys.modules)
    saved_argv, saved_path, saved_cwd = sys.argv, list(sys.path), os.getcwd()
    out = io.StringIO()
    sys.argv, sys.path[:0] = [str(program_dir / "main.py"), *argv], [str(program_dir)]
    try:
        for owner, name, fn in patched:
            setattr(owner, name, fn)
        os.chdir(program_dir)  # as its author runs it: some programs read their own files by relative path
        random.seed(SEED)  # Python's and numpy's global generators, which some programs use unseeded
        np.random.seed(SEED % 2**32)
        mode = _torch_bernoulli(stream) if library == "torch" else contextlib.nullcontext()
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), mode, _global_switches(t):
            warnings.simplefilter("ignore")
            runpy.run_path(str(program_dir / "main.py"), run_name="__main__")
    except (Exception, SystemExit) as e:  # noqa: BLE001 - how a program ends is compared
        p.events.append(("raised", type(e).__name__, str(e)))
    finally:
        for owner, name, value in reversed(originals):
            if value is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.chdir(saved_cwd)
        for name in set(sys.modules) - before:  # the program's own modules hold the library they imported
            module = sys.modules[name]
            if str(getattr(module, "__file__", "") or "").startswith(str(program_dir)):
                del sys.modules[name]
        if saved is not None:
            torch_shim.uninstall(saved)
    return p.events, out.getvalue()


_ABSENT = object()

_SWITCHES = (("backends.cudnn", "enabled"), ("backends.cudnn", "benchmark"), ("backends.cudnn", "deterministic"),
             ("backends.cudnn", "allow_tf32"), ("backends.cuda.matmul", "allow_tf32"))
"""The library's process-wide switches a program may set (nanoGPT sets allow_tf32, dcgan cudnn.benchmark): put back
after each run, so that no later test of the process reads a program's settings."""


@contextlib.contextmanager
def _global_switches(t: Any) -> Any:
    def owner(path: str) -> Any:
        obj = t
        for part in path.split("."):
            obj = getattr(obj, part, None)
        return obj

    saved = [(owner(path), name, getattr(owner(path), name, _ABSENT)) for path, name in _SWITCHES]
    dtype, grad = t.get_default_dtype(), t.is_grad_enabled()
    try:
        yield
    finally:
        for obj, name, value in saved:
            if obj is not None and value is not _ABSENT:
                setattr(obj, name, value)
        if t.get_default_dtype() != dtype:  # only then: the call itself is not free of effects on torch
            t.set_default_dtype(dtype)
        if t.is_grad_enabled() != grad:
            t.set_grad_enabled(grad)
