"""FX-like joint graphs on agdb's engine: capture, descriptors, the seq_nr map, compile and pass checks.

Imports the engine only inside the functions that drive it; never textual or rich. See docs/fx.md.
"""
from __future__ import annotations

from agdb.tracer.fx.capture import GRADIENT_ACC_SPECIAL_STACK, capture_joint
from agdb.tracer.fx.graph import Graph, Node, from_data, to_data

__all__ = ["Graph", "Node", "capture_joint", "from_data", "to_data", "GRADIENT_ACC_SPECIAL_STACK"]
