"""agdb's Textual widgets, one per module; they render EngineState values and post messages up.

Widgets never call the engine or the tracer's recorder; they read a Trace and EngineState given to them.
"""
