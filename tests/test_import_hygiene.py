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
    loaded = _modules_after_import("import agdb.engine, agdb.engine.autograd, agdb.engine.nn.functional")
    assert "agdb.engine" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"textual", "rich"}}


def test_tracer_imports_no_ui_package():
    """Importing the tracer (recording, files, replay, culprits, JSON) loads neither textual nor rich."""
    loaded = _modules_after_import(
        "import agdb.tracer, agdb.tracer.replay.replay, agdb.tracer.store.tracefile, agdb.tracer.recording.culprits, agdb.tracer.replay.state_json")
    assert "agdb.tracer.replay.replay" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"textual", "rich"}}


def test_engine_imports_no_torch():
    """The engine stands alone: importing it does not import torch."""
    loaded = _modules_after_import("import agdb.engine")
    assert "torch" not in loaded


def test_nothing_but_the_bridge_imports_torch():
    """torch is optional: the CLI, the TUI, the tracer (with the bridge's package and the trace diff) and the
    engine load without it; only `tracer.sources.torch.bridge`, imported when a recording starts, imports it."""
    loaded = _modules_after_import(
        "import agdb.engine, agdb.tracer, agdb.tracer.replay.replay, agdb.tracer.replay.diff, agdb.tracer.sources.torch, "
        "agdb.tracer.sources.torch.model, agdb.app.cli, agdb.app.app, agdb.app.torch_cli, agdb.app.run_script, agdb.widgets")
    assert {"agdb.app.torch_cli", "agdb.tracer.sources.torch", "agdb.app.app"} <= loaded
    assert "torch" not in loaded
    assert "agdb.tracer.sources.torch.bridge" not in loaded
