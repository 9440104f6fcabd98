"""agdb tracer package (placeholder until its issue lands)."""
