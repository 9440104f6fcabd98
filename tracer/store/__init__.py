"""The trace format: schema, events, Trace, the .agdb file, and the indexes derived from a Trace.

The lowest stage: imports numpy and the standard library only (never recording, replay, views, fx or sources).
"""
