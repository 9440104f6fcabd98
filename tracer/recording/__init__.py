"""Writing a trace: TraceBuilder (the one way any source writes), freezing, the user's frames and lines, leaf names,
seq_nr culprits.

Imports store only among agdb's stages (never replay, views, fx or sources); the engine only inside functions.
"""
