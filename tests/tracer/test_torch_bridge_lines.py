"""Runs torch_bridge_lines_checks.py in a fresh interpreter: NOTE [lines are opt-in] in tracer/torch_bridge/bridge.py
(in the suite's own process, after Textual apps had run, CPython 3.11 spun forever once a trace function was set)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def test_line_culprits_in_a_fresh_interpreter():
    checks = Path(__file__).with_name("torch_bridge_lines_checks.py")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(checks)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "15 passed" in done.stdout, done.stdout[-2000:]
