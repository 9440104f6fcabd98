"""agdb's tracer: records the engine's events as plain data, saves and loads traces, replays any step.

Imports numpy, the standard library and the engine's observer API; never textual or rich.
"""
from __future__ import annotations

from . import events, schema
from .builder import TraceBuilder
from .recorder import Recorder, record
from .schema import Kind
from .trace import NodeInfo, Trace

__all__ = ["Recorder", "record", "Trace", "TraceBuilder", "NodeInfo", "Kind", "events", "schema"]
