"""The state at a step: Replay, the scheduler rules, node states, the forward map, breakpoints, search, diff, and
the row models panels and `agdb show` read.

Imports store and recording; never views, fx, sources, or the engine.
"""
