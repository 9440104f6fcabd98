"""agdb: an interactive debugger and visualizer for autograd execution.

Installed, agdb's code lives under this one package, so a user's own `engine`, `app`, `tracer` or `widgets`
module never meets agdb's: pyproject.toml maps this folder to `agdb`, and the repository's top-level folders to
its subpackages (`agdb.engine`, `agdb.tracer`, `agdb.widgets`, `agdb.app`).
"""
