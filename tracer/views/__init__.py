"""Pictures of a trace: the graph model every renderer draws (DOT, the TUI's drawn graph, JSON), its layout for a
terminal, folding, and the one naming rule for nodes and leaves.

Imports store, recording and replay; never fx, sources, or the engine.
"""
