"""record("torch")'s default reconstructs what torch hides when the recording ends, not inside the program's backward
calls (NOTE [observe now, reconstruct later] in tracer/sources/torch/bridge.py), and the trace is the one a
reconstruction after each call gives. Grads are judged by the program's own tensor hooks."""
from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.sources.torch import reconstruct  # noqa: E402
from agdb.tracer.sources.torch import state as state_mod  # noqa: E402
from agdb.tracer.store import events as ev  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402
from tests.tracer.torch_programs import PROGRAMS  # noqa: E402

RECONSTRUCTED = (Kind.DEPENDENCIES_COMPUTED, Kind.TASK_PUSHED, Kind.TASK_POPPED, Kind.BUFFER_WRITTEN,
                 Kind.NODE_STARTED, Kind.NODE_FINISHED, Kind.GRAPH_TASK_STARTED)


def test_the_default_writes_no_backward_event_while_the_program_runs():
    """Three backward calls: when each returns, the trace holds only the forward's increments; every event of the
    backward calls is written when the recording ends, in the order torch's own pre-hooks saw the nodes run."""
    x = torch.ones(3, requires_grad=True)
    written, ran = [], []
    with tracer.record("torch") as rec:
        for _ in range(3):
            loss = (x.tanh() * 2).sum()
            loss.grad_fn.register_prehook(lambda g: ran.append("SumBackward0"))
            loss.backward()
            written.append(rec.source.num_events)
    trace = rec.trace
    first = min(int(trace.steps_of(kind)[0]) for kind in RECONSTRUCTED)
    assert first >= written[-1], f"a backward event at step {first}, before the recording ended ({written})"
    assert len(trace.steps_of(Kind.GRAPH_TASK_FINISHED)) == 3
    assert [trace.node(trace.event_node(int(s))).name for s in trace.steps_of(Kind.NODE_STARTED)
            if trace.node(trace.event_node(int(s))).name == "SumBackward0"] == ran


def test_grads_are_those_the_program_saw_though_it_changes_them_after_the_call():
    """A program that scales and zeroes its leaves' grads in place between steps (as clipping and zero_grad do):
    each GradAccumulated holds the grad torch handed the leaf then (its tensor hook's copy), not what the leaf's
    grad became later."""
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    with tracer.record("torch") as rec:
        w.register_hook(lambda g: seen.append(g.clone()))
        for step in range(3):
            (w * w * (step + 1)).sum().backward()
            w.grad.mul_(0.5)
            w.grad.zero_()
    got = [e.grad.preview for e in rec.trace if isinstance(e, ev.GradAccumulated)]
    assert got == [tuple(float(v) for v in g) for g in seen]
    assert len(got) == 3


def _recorded(program, options):
    """The program's trace, recorded on a fresh thread (its seq_nr counter starts at 0), as text: its events, and
    its meta without torch's graph task ids (torch numbers them for the whole process)."""
    box: list = []

    def run():
        torch.manual_seed(0)
        with tracer.record("torch", **options) as rec:
            try:
                program(lambda *tensors: None)
            except Exception as e:  # noqa: BLE001 - the programs that fail on purpose: the same either way
                box.append(type(e).__name__)
        box.append(rec.trace)

    thread = threading.Thread(target=run, name="recording")  # the trace keeps the thread's name
    thread.start()
    thread.join()
    trace = box.pop()
    meta = dict(trace.meta)
    meta["graph_tasks"] = [{k: v for k, v in t.items() if not k.endswith("torch_id")} for t in meta["graph_tasks"]]
    return box, [repr(e) for e in trace], repr(sorted(meta.items()))


def _training(watch):
    """A loop of small steps whose logs pile up across calls: a retained graph backwarded twice, an optimizer."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 3)
    for _ in range(4):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward(retain_graph=True)
        loss.backward()
        opt.step()


def _late_names(watch):
    """Nodes a line made and did not keep, named by a later line (NOTE [line culprits]) after a backward call; the
    last graph is never walked, so only those late names name it."""
    ps = [torch.ones(2, requires_grad=True) for _ in range(3)]
    for step in range(3):
        parts = [p.exp() * 2 for p in ps]
        out = torch.cat(parts).sum()
        if step < 2:
            out.backward()


def _renumbered(watch):
    """A node given another number by `_set_sequence_nr` after its line took one, while a log waits (NOTE
    [renumbered nodes] in renumbered.py)."""
    x = torch.ones(2, requires_grad=True)
    for step in range(3):
        y = x.exp()
        y.grad_fn._set_sequence_nr(10_000 + step)
        y.sum().backward()


@pytest.mark.parametrize("values", [True, False], ids=["values", "no-values"])
@pytest.mark.parametrize("program", [*PROGRAMS, _training, _late_names, _renumbered], ids=lambda p: p.__name__)
def test_the_default_trace_is_the_one_reconstructed_after_each_call(monkeypatch, program, values):
    """Events and meta equal those of `defer=False` (the model run before each call returns), with the default's log
    replayed at the end and, PART set to 8, in parts as it grows across calls (NOTE [replay in parts])."""
    after_each = _recorded(program, {"values": values, "defer": False})
    assert _recorded(program, {"values": values}) == after_each
    monkeypatch.setattr(reconstruct, "PART", 8, raising=False)
    monkeypatch.setattr(state_mod, "WAITING_BYTES", -1)  # NOTE [what a waiting log holds]: as if each part grew it
    assert _recorded(program, {"values": values}) == after_each


def _threads(watch):
    """The recording thread's backward, then two threads one after the other, each with its own forward and backward
    (docs/examples/threads.py), then the recording thread's again: what each thread did is written in that order."""
    w = torch.tensor([0.5, -1.0], requires_grad=True)

    def step(scale):
        h = (w * scale).tanh()
        (h * h).sum().backward()

    step(3.0)
    for i in range(2):
        worker = threading.Thread(target=step, args=(i + 1.0,), name=f"worker-{i}")
        worker.start()
        worker.join()
    step(4.0)


def test_threads_events_are_in_the_order_they_happened():
    """NOTE [deferral on one thread]: with threads recording one after another, the default's trace equals the one
    reconstructed after each call, event by event: no thread's backward is written after what a later thread did."""
    assert _recorded(_threads, {}) == _recorded(_threads, {"defer": False})


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="the resident set read from /proc")
def test_a_waiting_log_whose_grads_grow_the_process_is_replayed_when_a_call_returns(monkeypatch):
    """NOTE [what a waiting log holds]: eight steps whose grads are 40 MB each, with 64 MB allowed: the log is replayed
    when calls return, and never holds more than a few steps (else all eight: 320 MB); the trace has every step, in
    the order torch's own pre-hooks saw. Grads past glibc's largest mmap threshold (32 MiB) take fresh pages, which
    memory the heap kept free after other tests cannot stand in for."""
    monkeypatch.setattr(state_mod, "WAITING_BYTES", 64 << 20)
    w = torch.zeros(10_000_000, requires_grad=True)
    waiting, ran = [], []
    with tracer.record("torch") as rec:
        for step in range(8):
            loss = (w * (step + 1)).sum()
            loss.grad_fn.register_prehook(lambda g: ran.append("SumBackward0"))
            loss.backward()
            waiting.append(len(rec.source.shared.thread_state().log))
    assert waiting.count(0) >= 2 and max(waiting) <= 40, waiting  # a step logs 8-11 entries
    trace = rec.trace
    assert len(trace.steps_of(Kind.GRAPH_TASK_FINISHED)) == 8
    names = [trace.node(trace.event_node(int(s))).name for s in trace.steps_of(Kind.NODE_STARTED)]
    assert [n for n in names if n == "SumBackward0"] == ran and len(ran) == 8


def test_a_long_backward_whose_grads_are_small_is_not_replayed_inside_the_call(monkeypatch):
    """A 3,000-node chain with PART at 256 entries: by default its log waits whole (the process does not grow by
    WAITING_BYTES), read from a hook of the program's own on the leaf, which runs last; the trace has every node."""
    monkeypatch.setattr(reconstruct, "PART", 256, raising=False)
    x = torch.ones(2, requires_grad=True)
    seen = []
    with tracer.record("torch") as rec:
        h = x
        for _ in range(3000):
            h = h.tanh()
        x.register_hook(lambda g: seen.append(len(rec.source.shared.thread_state().log)))
        h.sum().backward()
    assert len(seen) == 1 and seen[0] > 6000
    assert len(rec.trace.steps_of(Kind.NODE_STARTED)) == 3002 and rec.trace.meta["divergences"] == []
