"""agdb's tracer: records autograd's events as plain data (from agdb's engine or real PyTorch), saves and loads
traces, replays any step, draws graphs. Arranged by stage (docs/architecture.md): store, recording, replay, views,
fx, sources.

The public names are here: `record` (with `TraceSource`, `make_source` and `Recording`), `Trace`, `TraceBuilder`,
`Kind`. Never imports textual or rich; the engine and torch only when a recording starts.
"""
from __future__ import annotations

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.sources.engine import Recorder
from agdb.tracer.sources.source import Recording, TraceSource, make_source, record
from agdb.tracer.store import events, schema
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import NodeInfo, Trace

__all__ = ["record", "Recording", "TraceSource", "make_source", "Recorder", "Trace", "TraceBuilder", "NodeInfo",
           "Kind", "events", "schema", "capture_joint", "compile_joint", "check_pass"]

_FX = {"capture_joint": ("fx.capture", "capture_joint"), "compile_joint": ("sources.fx", "compile_joint"),
       "check_pass": ("sources.fx", "check_pass")}
"""FX joint-graph entry points (tracer/fx, docs/fx.md), imported on first use: compile_joint and check_pass take a
graph of the engine's ops or of torch's (tracer/sources/fx.py)."""


def __getattr__(name: str):
    if name in _FX:
        import importlib

        module, attr = _FX[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'agdb.tracer' has no attribute {name!r}")
