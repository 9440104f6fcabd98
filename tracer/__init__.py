"""agdb's tracer: records the engine's events as plain data, saves and loads traces, replays any step.

Imports numpy, the standard library and the engine's observer API; never textual or rich.
"""
from __future__ import annotations

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.sources.engine import Recorder, record
from agdb.tracer.store import events, schema
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import NodeInfo, Trace

__all__ = ["Recorder", "record", "Trace", "TraceBuilder", "NodeInfo", "Kind", "events", "schema", "capture_joint",
           "compile_joint", "check_pass"]

_FX = {"capture_joint": ("fx.capture", "capture_joint"), "compile_joint": ("fx.compile", "compile_joint"),
       "check_pass": ("fx.check_pass", "check_pass")}
"""FX joint-graph entry points (tracer/fx, docs/fx.md), imported on first use."""


def __getattr__(name: str):
    if name in _FX:
        import importlib

        module, attr = _FX[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'tracer' has no attribute {name!r}")
