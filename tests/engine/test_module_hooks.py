"""Module backward hooks: warnings compared with torch 2.13, the global hooks' kind rule, and removal."""
from __future__ import annotations

import warnings

import pytest

import agdb.engine.nn.hooks as engine_hooks
from agdb import engine

torch = pytest.importorskip("torch")


def _warnings_of(fn) -> list[tuple[str, str]]:
    """(category name, message) of each warning `fn` raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [(w.category.__name__, str(w.message)) for w in caught]


def _mul(t):
    class Mul(t.nn.Module):
        def forward(self, a, b=None):
            return a * 2 if b is None else a * b
    return Mul()


def _two_nodes(t):
    class Two(t.nn.Module):
        def forward(self, a):
            return a * 2, a + 1
    return Two()


def _as_list(t):
    class AsList(t.nn.Module):
        def forward(self, a):
            return [a * 2]
    return AsList()


CASES = {
    # a full hook on a module none of whose inputs requires grad fires at the outputs, with a warning
    "no_input_requires_grad": lambda t, x, c: _full(t.nn.Linear(3, 1, dtype=t.float64))(c).sum().backward(),
    # the deprecated hook warns when it will miss grads
    "deprecated_single_node": lambda t, x, c: _deprecated(_mul(t))(x),
    "deprecated_multiple_nodes": lambda t, x, c: _deprecated(t.nn.Linear(3, 1, dtype=t.float64))(x.view(1, 3)),
    "deprecated_different_nodes": lambda t, x, c: _deprecated(_two_nodes(t))(x),
    "deprecated_not_tensor_input": lambda t, x, c: _deprecated(_mul(t))(x, 3.0),
    "deprecated_list_output": lambda t, x, c: _deprecated(_as_list(t))(x),
    # full hooks on a module that returns a list: never called, and torch says so
    "full_list_output": lambda t, x, c: _full(_as_list(t))(x)[0].sum().backward(),
}


def _full(module):
    module.register_full_backward_hook(lambda m, gi, go: None)
    return module


def _deprecated(module):
    module.register_backward_hook(lambda m, gi, go: None)
    return module


@pytest.mark.parametrize("name", sorted(CASES))
def test_warnings_match_torch(name):
    """Each case raises the same warnings (category and text) on engine and torch."""
    seen = []
    for t in (torch, engine):
        x = t.tensor([0.5, -1.0, 2.0], dtype=t.float64, requires_grad=True)
        c = t.tensor([0.5, -1.0, 2.0], dtype=t.float64)
        seen.append(_warnings_of(lambda t=t, x=x, c=c: CASES[name](t, x, c)))
    assert seen[1] == seen[0]
    assert seen[0] or name == "deprecated_single_node"  # the single-node case is the one that does not warn


def test_full_hook_warning_points_at_the_backward_call():
    """The no-input-grad warning names the user's line that called backward, as torch's does."""
    lin = _full(engine.nn.Linear(3, 1))
    y = lin(engine.ones(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y.sum().backward()
    assert [w.filename for w in caught] == [__file__]


@pytest.fixture
def global_kind():
    """Restore the engine's global backward-hook kind, which registering sets for good (as torch's does)."""
    saved = engine_hooks._global_is_full_backward_hook
    engine_hooks._global_is_full_backward_hook = None
    yield
    engine_hooks._global_is_full_backward_hook = saved


def test_global_deprecated_hook_runs_on_every_module_and_excludes_full_ones(global_kind):
    """register_module_backward_hook hooks each module's output node; the full kind is then refused globally."""
    mm = engine.nn.modules.module
    seen = []
    handle = mm.register_module_backward_hook(lambda m, gi, go: seen.append((type(m).__name__, len(gi))))
    tanh = engine.nn.Tanh()  # kept alive: the hook holds its module weakly, as torch's does
    x = engine.tensor([0.5, -1.0], requires_grad=True)
    try:
        with pytest.warns(FutureWarning, match="contains multiple autograd Nodes"):  # x is a leaf
            tanh(x).sum().backward()
        with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks as"):
            mm.register_module_full_backward_hook(lambda m, gi, go: None)
    finally:
        handle.remove()
    assert seen == [("Tanh", 1)]
    tanh(x).sum().backward()
    assert seen == [("Tanh", 1)]  # removed


def test_module_without_hooks_records_no_extra_node():
    """With no hooks anywhere, calling a module records only its forward's nodes (no BackwardHookFunction)."""
    x = engine.tensor([0.5, -1.0], requires_grad=True)
    before = engine.autograd._get_sequence_nr()
    y = engine.nn.Tanh()(x)
    assert engine.autograd._get_sequence_nr() - before == 1 and y.grad_fn.name() == "TanhBackward0"
