"""A module loaded while the bridge records (NOTE [library imports] in tracer/sources/torch/patching.py): a library's
loads with no line tracer on its thread, so a lazy import inside torch (DDP's constructor loads torch._dynamo) costs
what it costs unrecorded; the user's own modules keep their line culprits."""
from __future__ import annotations

import importlib._bootstrap as bootstrap
import sys
import textwrap

import pytest

from agdb import tracer
from tests.engine.helpers import run_in_thread

torch = pytest.importorskip("torch")

LIBRARY_MODULE = "torch.utils.file_baton"  # small, no side effects, not loaded by `import torch`


@pytest.fixture
def loads(monkeypatch):
    """Whether a trace function was set on the loading thread, per module name, as importlib's loader saw it (the
    bridge wraps this spy while it records)."""
    seen: dict[str, bool] = {}
    original = bootstrap._find_and_load

    def spy(name, import_):
        seen.setdefault(name, sys.gettrace() is not None)
        return original(name, import_)

    monkeypatch.setattr(bootstrap, "_find_and_load", spy)
    monkeypatch.delitem(sys.modules, LIBRARY_MODULE, raising=False)
    return seen


def test_a_library_module_loads_untraced_and_a_users_module_keeps_its_lines(tmp_path, monkeypatch, loads):
    (tmp_path / "users_module.py").write_text(textwrap.dedent("""
        import torch
        x = torch.ones(2, requires_grad=True)
        y = x.exp()
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "users_module", raising=False)

    def go():
        with tracer.record("torch") as rec:
            importlib_module = __import__(LIBRARY_MODULE, fromlist=["FileBaton"])
            import users_module  # noqa: F401
            users_module.y.sum().backward()
        assert importlib_module.FileBaton
        return rec.trace

    trace = run_in_thread(go)
    assert loads[LIBRARY_MODULE] is False
    assert loads["users_module"] is True
    exp = [trace.node(i) for i in range(trace.num_nodes) if trace.node(i).name == "ExpBackward0"]
    assert [(n.lineno, n.source) for n in exp] == [(4, "y = x.exp()")]
