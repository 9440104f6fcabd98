"""What the bridge holds per node of a deep graph stays small: its hooks (a million-node chain carries a
million of them; bench/torch_bridge.py --deep measures the whole recording's peak).

Measured with tracemalloc (allocation sizes, not time): deterministic for one Python and torch.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import tracemalloc

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.sources.torch import state as state_mod  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402

HOOK_BYTES_PER_NODE = 530
"""What the bridge's pre- and post-hook on one node may hold in Python objects (their callable, the node's two
hook dicts, and the walk's note of them: NOTE [hooked nodes] in tracer/sources/torch/hooks.py): about 490 B. Two
closures, two OrderedDicts and a weak reference to each held about 1,580; one callable and two weak references,
about 820; int-keyed dicts, 680; a weak reference to the first and an entry in a dict by key, 600."""

RECORDING_BYTES_PER_NODE = 1000
"""What recording a deep chain may hold in Python objects a node while its backward runs, beyond the plain run
(hooks, keys, seq_nrs, edges, dependency counts, node facts, the events so far): about 930 B on a 10,000-node chain
(the node facts' columns, allocated for 16,384 keys there, count ~105 of it); 1,230 with each node's facts a
NodeFacts tuple in a dict, its edges a 1-tuple in a dict and its dependency count in a dict; 1,420 with a dict per
graph of seq_nrs, one per row of seq_nr -> key, a weak reference per hooked node and a set of the nodes described."""


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
    assert len(hooked) == 2 * len(nodes) > 4000  # key and pre-hook dict of each (NOTE [hooked nodes])
    assert held / len(nodes) <= HOOK_BYTES_PER_NODE, f"{held / len(nodes):.0f} B per node"


def test_a_long_backward_s_log_is_replayed_in_parts(monkeypatch):
    """While a 3,000-node chain's backward runs, its log never holds much more than PART entries (NOTE [replay in
    parts] in tracer/sources/torch/reconstruct.py): read from a hook of the program's own on the leaf, which
    runs last."""
    from agdb.tracer.sources.torch import reconstruct

    monkeypatch.setattr(reconstruct, "PART", 256, raising=False)
    monkeypatch.setattr(state_mod, "WAITING_BYTES", -1)  # replayed at each PART, however little the process grew
    x = torch.ones(2, requires_grad=True)
    seen = []
    with tracer.record("torch") as rec:
        h = x
        for _ in range(3000):
            h = h.tanh()
        x.register_hook(lambda g: seen.append(len(rec.source.shared.thread_state().log)))
        h.sum().backward()
    assert len(seen) == 1 and seen[0] <= 256 + 2
    assert len(rec.trace.steps_of(Kind.NODE_STARTED)) == 3002 and rec.trace.meta["divergences"] == []


@pytest.mark.parametrize("options", [{}, {"values": False}])
def test_a_trace_replayed_in_parts_equals_the_one_replayed_at_the_end(monkeypatch, options):
    """Every test program recorded with a replay every 2 log entries gives the events and meta of one replay at
    the end of each call."""
    from agdb.tracer.sources.torch import reconstruct

    from .torch_programs import PROGRAMS

    def run(program, box):
        torch.manual_seed(0)
        with tracer.record("torch", **options) as rec:
            try:
                program(lambda *tensors: None)
            except Exception as e:  # noqa: BLE001 - the programs that fail on purpose: the same either way
                box.append(type(e).__name__)
        box.append(rec.trace)

    def recorded(program):
        """The program's trace, recorded on a fresh thread (its seq_nr counter starts at 0), as plain text."""
        box: list = []
        thread = threading.Thread(target=run, args=(program, box), name="recording")  # the trace keeps the name
        thread.start()
        thread.join()
        trace = box.pop()
        meta = dict(trace.meta)  # torch numbers its graph tasks for the whole process: not this run's to compare
        meta["graph_tasks"] = [{k: v for k, v in t.items() if not k.endswith("torch_id")} for t in meta["graph_tasks"]]
        return box, [repr(e) for e in trace], repr(sorted(meta.items()))

    for program in PROGRAMS:
        whole = recorded(program)
        with monkeypatch.context() as m:
            m.setattr(reconstruct, "PART", 2, raising=False)
            m.setattr(state_mod, "WAITING_BYTES", -1)  # at each PART, however little the process grew
            parts = recorded(program)
        assert parts == whole, program.__name__


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident set read from /proc")
def test_freed_heap_pages_go_back_to_the_system_before_the_trace_is_frozen():
    """release_freed_memory (called by Bridge.finish) gives back the pages of 64 MB of small blocks just freed."""
    import ctypes

    from agdb.tracer.sources.torch.state import release_freed_memory

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "malloc_trim"):
        pytest.skip("not glibc")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(1024) for _ in range(64 * 1024)]  # small blocks: the heap's, not mmap's
    for b in blocks:
        ctypes.memset(b, 1, 1024)  # touched: resident
    keep = libc.malloc(1024)  # above them all: the heap's top cannot simply shrink
    for b in blocks:
        libc.free(b)
    before = _resident()
    release_freed_memory()
    after = _resident()
    libc.free(keep)
    assert before - after > 32 * 2**20, (before, after)


def _resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_finish_releases_freed_memory_before_it_freezes_the_trace(monkeypatch):
    """Bridge.finish hands freed pages back before the builder freezes the trace (release_freed_memory)."""
    from agdb.tracer.recording.builder import TraceBuilder
    from agdb.tracer.sources.torch import bridge

    calls = []
    monkeypatch.setattr(bridge, "release_freed_memory", lambda: calls.append("released"))
    freeze = TraceBuilder.finish
    monkeypatch.setattr(TraceBuilder, "finish", lambda self, *a: calls.append("frozen") or freeze(self, *a))
    with tracer.record("torch"):
        (torch.ones(2, requires_grad=True) * 2).sum().backward()
    assert calls == ["released", "frozen"]


def test_a_nested_call_leaves_the_outer_call_its_hooks():
    """A backward call made from a tensor hook while another runs walks nodes the outer call hooked: it neither
    hooks them again nor takes their hooks off when it returns (NOTE [hooked nodes] in
    tracer/sources/torch/hooks.py), so the outer call's AddBackward0 and AccumulateGrad are still seen to run."""
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with tracer.record("torch") as rec:
        y = x + 1  # no node here saves a tensor: the inner call may free the graph it shares
        z, w = y * 2, (y * 3).sum()
        z.register_hook(lambda g: torch.autograd.grad(w, x) and None)
        z.sum().backward()
        handle = y.grad_fn.register_prehook(lambda g: None)  # torch's own registration: its handle finds the dict
    from agdb.tracer.sources.torch.hooks import HOOK_KEY

    assert HOOK_KEY not in handle.hooks_dict_ref()  # taken off once the outer call returned
    trace = rec.trace
    started = [trace.node(trace.event_node(int(s))).name for s in trace.steps_of(Kind.NODE_STARTED)]
    assert started.count("AddBackward0") == 2 and started.count("torch::autograd::AccumulateGrad") == 1
    assert trace.meta["divergences"] == []


def test_a_deep_chain_s_recording_holds_at_most_the_budget_per_node(monkeypatch):
    """While a 10,000-node chain's backward runs (read from a hook on the leaf, which runs last), the recording holds
    at most RECORDING_BYTES_PER_NODE a node in Python objects (the graph itself is torch's, in C++)."""
    from agdb.tracer.sources.torch import reconstruct

    monkeypatch.setattr(state_mod, "WAITING_BYTES", -1)  # NOTE [what a waiting log holds]: as if the graph grew it
    monkeypatch.setattr(reconstruct, "PART", 1024, raising=False)  # as a long backward's log is (replayed in parts)
    n = 10_000
    x = torch.ones(2, requires_grad=True)
    seen = []
    gc.collect()
    tracemalloc.start()
    try:
        with tracer.record("torch") as rec:
            before = tracemalloc.get_traced_memory()[0]
            h = x
            for _ in range(n):
                h = h.tanh()
            x.register_hook(lambda g: seen.append(tracemalloc.get_traced_memory()[0] - before))
            h.sum().backward()
            del h
    finally:
        tracemalloc.stop()
    assert len(rec.trace.steps_of(Kind.NODE_STARTED)) == n + 2 and rec.trace.meta["divergences"] == []
    assert seen[0] / n <= RECORDING_BYTES_PER_NODE, f"{seen[0] / n:.0f} B per node"


def test_seq_keys_map_like_a_dict():
    """SeqKeys (a thread's seq_nr -> key) answers as a dict given the same writes would, for numbers in its column,
    below it, and past its reach."""
    from agdb.tracer.sources.torch.state import SeqKeys

    keys, truth = SeqKeys(), {}
    reach = SeqKeys.REACH
    writes = [(100, 1), (101, 2), (103, 3), (50, 4), (100 + 4 * reach, 5), (102, 6), (104 + reach // 2, 7),
              (100 + 4 * reach, 8), (101, 9)]
    for seq, key in writes:
        keys[seq] = key
        truth[seq] = key
    assert keys.setdefault(102, 99) == 6 and keys.setdefault(200, 10) == 10
    truth[200] = 10
    for seq in [*truth, 0, 49, 99, 105, 103 + reach // 2, 10**12]:
        assert keys.get(seq) == truth.get(seq) and keys.get(seq, 0) == truth.get(seq, 0)


def test_seq_nrs_map_like_a_dict():
    """SeqNrs (node key -> seq_nr, shared by the bridge's graphs) answers as a dict would, UINT64_MAX included."""
    from agdb.tracer.sources.torch.model import SeqNrs
    from agdb.tracer.store.schema import UINT64_MAX

    seqs, truth = SeqNrs(), {}
    for key, seq in [(5, 0), (1, 7), (3000, UINT64_MAX), (2, 12), (5, 3)]:
        seqs[key] = seq
        truth[key] = seq
    for key in [*truth, 0, 4, 2999, 3001, 10**6]:
        assert seqs.get(key) == truth.get(key) and seqs.get(key, 0) == truth.get(key, 0)
    assert seqs[3000] == UINT64_MAX
    with pytest.raises(KeyError):
        seqs[4]


@pytest.mark.parametrize(("spread", "smallest"), [(1, 1), (10_000, 1), (1, 1024)])
def test_edges_map_like_a_dict(monkeypatch, spread, smallest):
    """Edges.of (a walk's next edges, its one-edge nodes in columns by key) answers as a dict given the same entries
    would: dense (columns), spread out or few (a plain dict), null edges, nodes with two edges or none, and an entry
    set again afterwards."""
    from array import array

    from agdb.tracer.sources.torch.columns import Edges

    monkeypatch.setattr(Edges, "SMALLEST", smallest)
    ones = [(5 * spread, 4 * spread, 0), (4 * spread, 0, 1), (3 * spread, 2 * spread, 0), (2 * spread, 1, 2)]
    truth = {key: ((child, nr),) for key, child, nr in ones}
    other = {7: ((1, 0), (2, 1)), 8: ()}
    truth.update(other)
    edges = Edges.of(other, *(array("q", column) for column in zip(*ones, strict=True)))
    assert isinstance(edges, Edges) == (spread == 1 and smallest == 1)
    edges[3 * spread] = truth[3 * spread] = ((9, 0), (0, 0))
    edges[6 * spread] = truth[6 * spread] = ((1, 1),)
    for key in [*truth, 1, 9, 2 * spread + 1, 10**9]:
        assert edges.get(key) == truth.get(key) and edges.get(key, ()) == truth.get(key, ())
        assert (key in edges) == (key in truth)
    assert edges[4 * spread] == ((0, 1),)
    with pytest.raises(KeyError):
        edges[10**9]


def test_counts_map_like_a_dict():
    """Counts (a graph task's dependency counts as an array by key) answers as the dict it was made from would, through
    what scheduler.route does to it (counts taken down, dropped at zero); a small or spread-out dict stays a dict."""
    import random

    from agdb.tracer.sources.torch.columns import Counts

    rng = random.Random(3)
    keys = rng.sample(range(50, 5000), 2000)
    truth = {k: rng.randint(1, 3) for k in keys}
    counts = Counts.of(dict(truth))
    assert isinstance(counts, Counts)
    for _ in range(6000):
        key = rng.choice(keys)
        count = counts.get(key)
        assert count == truth.get(key) and (key in counts) == (key in truth)
        if count is None:
            with pytest.raises(KeyError):
                del counts[key]
        elif count == 1:
            del counts[key], truth[key]
        else:
            counts[key] = truth[key] = count - 1
    assert [counts.get(k) for k in range(0, 5100)] == [truth.get(k) for k in range(0, 5100)]
    small, spread = {1: 2}, {k * 10_000: 1 for k in range(2000)}
    assert Counts.of(small) is small and Counts.of(spread) is spread
