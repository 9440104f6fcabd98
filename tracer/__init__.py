"""agdb's tracer: records the engine's events as plain data, saves and loads traces, replays any step.

Imports numpy, the standard library and the engine's observer API; never textual or rich.
"""
from __future__ import annotations

from . import events
from .recorder import Recorder, record
from .trace import NodeInfo, Trace

__all__ = ["Recorder", "record", "Trace", "NodeInfo", "events"]
