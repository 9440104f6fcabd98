"""engine/ and tracer/ never pull in a UI package (STYLE §2), and nothing but the PyTorch source imports torch:
every module of every subpackage is imported, in a fresh interpreter, and sys.modules is read afterwards."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.test_import_circles import ROOT, modules

TORCH_SOURCE = "agdb.tracer.sources.torch."
"""The real-PyTorch source's modules import torch; its package (`agdb.tracer.sources.torch`) does not."""


def _modules_after_import(names: list[str]) -> set[str]:
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n" \
           "print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code, *names], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def _importable(folders: tuple[str, ...]) -> list[str]:
    """Every module of `folders` but `__main__` (which runs the CLI)."""
    return sorted(name for name in modules(ROOT, folders) if not name.endswith("__main__"))


def _ui(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m.split(".")[0] in {"textual", "rich", "textual_serve"}}


def test_the_walk_sees_every_stage():
    """The module list the checks below import reaches every stage package and the torch source's modules."""
    names = set(_importable(("engine", "tracer")))
    for stage in ("store", "recording", "replay", "views", "fx", "sources", "sources.torch"):
        assert any(n.startswith(f"agdb.tracer.{stage}.") for n in names), stage
    assert "agdb.tracer.sources.torch.bridge" in names and "agdb.engine.nn.functional" in names


def test_engine_imports_no_ui_package_and_no_torch():
    """Importing every module of the engine loads neither textual nor rich, nor torch: the engine stands alone."""
    loaded = _modules_after_import(_importable(("engine",)))
    assert "agdb.engine.autograd.functional" in loaded
    assert not _ui(loaded)
    assert "torch" not in loaded


def test_tracer_imports_no_ui_package():
    """Importing every module of the tracer, each stage and both sources (torch's included), loads neither textual
    nor rich."""
    has_torch = importlib.util.find_spec("torch") is not None
    names = [n for n in _importable(("tracer",)) if has_torch or not n.startswith(TORCH_SOURCE)]
    loaded = _modules_after_import(names)
    assert "agdb.tracer.replay.replay" in loaded and "agdb.tracer.views.dot" in loaded
    assert not _ui(loaded)


def test_nothing_but_the_torch_source_imports_torch():
    """torch is optional: every module of the CLI, the TUI, the widgets and the tracer (the torch source's package
    included) loads without it; only the torch source's own modules, imported when a recording starts, import it."""
    names = [n for n in _importable(("tracer", "app", "widgets")) if not n.startswith(TORCH_SOURCE)]
    loaded = _modules_after_import(names)
    assert {"agdb.app.torch_cli", "agdb.tracer.sources.torch", "agdb.app.app", "agdb.widgets.graph_view"} <= loaded
    assert "torch" not in loaded
    assert not any(m.startswith(TORCH_SOURCE) for m in loaded)
