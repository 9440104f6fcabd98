"""agdb's screens: stepping through a trace, and help."""
