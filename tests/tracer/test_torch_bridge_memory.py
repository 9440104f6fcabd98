"""What the bridge holds per node of a deep graph stays small: its hooks (a million-node chain carries a
million of them; bench/torch_bridge.py --deep measures the whole recording's peak).

Measured with tracemalloc (allocation sizes, not time): deterministic for one Python and torch.
"""
from __future__ import annotations

import gc
import threading
import tracemalloc

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402

HOOK_BYTES_PER_NODE = 900
"""What the bridge's pre- and post-hook on one node may hold in Python objects (their callable, the node's two
hook dicts, and the bridge's weak references to them): about 820 B; two closures and two OrderedDicts held
about 1,580."""


def _chain(n: int):
    x = torch.ones(2, requires_grad=True)
    h = x
    for _ in range(n):
        h = h.tanh()
    return h.sum()


def test_hooks_hold_at_most_the_budget_per_node():
    """Hooking every node of a 2,000-node chain, as a walk does, holds at most HOOK_BYTES_PER_NODE per node."""
    from agdb.tracer.sources.torch.hooks import LEAN

    y = _chain(2000)
    nodes, n = [], y.grad_fn
    while n is not None:
        nodes.append(n)
        n = n.next_functions[0][0] if n.next_functions else None
    with tracer.record("torch") as rec:
        bridge = rec.source
        state = bridge.shared.thread_state()
        hooked: list[int] = []
        gc.collect()
        tracemalloc.start()
        LEAN.thread = threading.get_ident()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for key, node in enumerate(nodes, start=10**6):
                bridge.hooks.hook(node, key, state, hooked, None)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            LEAN.thread = None
            tracemalloc.stop()
        bridge.hooks.unhook(hooked)
    assert len(hooked) == len(nodes) > 2000
    assert held / len(nodes) <= HOOK_BYTES_PER_NODE, f"{held / len(nodes):.0f} B per node"
