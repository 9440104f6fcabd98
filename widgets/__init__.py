"""agdb widgets package (placeholder until its issue lands)."""
