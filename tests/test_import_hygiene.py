"""engine/ and tracer/ never pull in a UI package (STYLE §2)."""
from __future__ import annotations

import subprocess
import sys


def _modules_after_import(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_engine_imports_no_ui_package():
    """Importing engine (and its autograd and nn packages) loads neither textual nor rich."""
    loaded = _modules_after_import("import engine, engine.autograd, engine.nn.functional")
    assert "engine" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"textual", "rich"}}


def test_tracer_imports_no_ui_package():
    """Importing the tracer (recording, files, replay, culprits, JSON) loads neither textual nor rich."""
    loaded = _modules_after_import(
        "import tracer, tracer.replay, tracer.tracefile, tracer.culprits, tracer.state_json")
    assert "tracer.replay" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"textual", "rich"}}


def test_engine_imports_no_torch():
    """The engine stands alone: importing it does not import torch."""
    loaded = _modules_after_import("import engine")
    assert "torch" not in loaded


def test_nothing_but_the_bridge_imports_torch():
    """torch is optional: the CLI, the TUI, the tracer (with the bridge's package and the trace diff) and the
    engine load without it; only `tracer.torch_bridge.bridge`, imported when a recording starts, imports it."""
    loaded = _modules_after_import(
        "import engine, tracer, tracer.replay, tracer.diff, tracer.torch_bridge, tracer.torch_bridge.model, "
        "app.cli, app.app, app.torch_cli, app.torch_run, widgets")
    assert {"app.torch_cli", "tracer.torch_bridge", "app.app"} <= loaded
    assert "torch" not in loaded
    assert "tracer.torch_bridge.bridge" not in loaded
