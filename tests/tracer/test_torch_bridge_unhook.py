"""A recording that ends while another thread's backward walk is hooking nodes: the rest of that walk registers
through torch's own `_register_hook` (the bridge's lean one is gone), which hands back RemovableHandles, and the
call's unhook must take those off too (a Ctrl-C while agdb waited for the script's worker raised AttributeError
in the worker: 'RemovableHandle' object has no attribute 'pop')."""
from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")

from agdb.tracer.sources.torch.hooks import Hooks  # noqa: E402
from agdb.tracer.sources.torch.state import Log  # noqa: E402


def _hooks() -> Hooks:
    shared = types.SimpleNamespace(values=False, handles={}, is_acc=set(), acc_alive={})
    return Hooks(shared)


def test_hooks_registered_the_torch_way_are_taken_off_by_unhook():
    x = torch.ones(3, requires_grad=True)
    y = (x * 2).exp()
    node = y.grad_fn
    log = Log()
    log.limit = 1 << 30
    state = types.SimpleNamespace(log=log)
    hooks, hooked = _hooks(), []
    hooks.hook(node, 7, state, hooked, None)  # no walk in progress: torch's own registration
    y.sum().backward(retain_graph=True)
    assert [e[1] for e in log] == [7, 7]  # its pre- and post-hook ran
    hooks.unhook(hooked)
    log.clear()
    y.sum().backward()
    assert log == []  # both hooks are off the node
