"""agdb's Textual application and CLI."""
