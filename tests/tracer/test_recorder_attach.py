"""A Recorder attached while a backward runs (from one of its hooks, or from another thread) gives a trace that
saves, loads and replays: the graph task already running is left out and `meta["omitted"]` says so; graph
tasks started after attaching are recorded whole. `finish()` may run while another thread still records.

Expected node orders are derived by hand: a chain y_{k+1} = exp(y_k) runs its nodes from the sum down
(engine-semantics §6.1: one ready node at a time, highest seq_nr first).
"""
from __future__ import annotations

import random
import threading
import time

from agdb import engine
from agdb.tracer import Recorder
from agdb.tracer.replay.replay import Replay
from agdb.tracer.store import events as ev
from agdb.tracer.store.tracefile import load, save
from tests.engine.helpers import run_in_thread

CHAIN = ["SumBackward0", *["ExpBackward0"] * 4, "torch::autograd::AccumulateGrad"]


def _chain(x, n=4):
    """sum(exp(exp(...exp(x)))) with n ExpBackward0 nodes."""
    y = x
    for _ in range(n):
        y = y.exp()
    return y.sum()


def _node_at(loss, depth: int):
    """The node `depth` edges below the loss along first edges."""
    node = loss.grad_fn
    for _ in range(depth):
        node = node.next_functions[0][0]
    return node


def _reloaded(trace, tmp_path):
    """`trace` saved and loaded back, after replaying the loaded copy to its first and last step."""
    path = tmp_path / "t.agdb"
    save(trace, path)
    loaded = load(path)
    if len(loaded):
        replay = Replay(loaded)
        replay.state_at(0)
        replay.state_at(len(loaded) - 1)
    return loaded


def _pause(*events: threading.Event):
    """A pre-hook that sets the first event and waits for the second."""
    def hook(grads):
        events[0].set()
        events[1].wait(60)
    return hook


def _started(trace) -> list[str]:
    return [e.node_name for e in trace if isinstance(e, ev.NodeStarted)]


def test_attached_from_a_hook_leaves_the_running_backward_out_and_says_so(tmp_path):
    """Attached in a pre-hook mid-backward: the trace loads and replays, omits that graph task (meta says 1),
    and records the next backward whole."""
    def program():
        x = engine.tensor([0.1, 0.2], requires_grad=True)
        loss = _chain(x)
        box = {}

        def attach(grads):
            box["rec"] = Recorder().attach()

        _node_at(loss, 2).register_prehook(attach)
        loss.backward()
        _chain(x).backward()
        return box["rec"].finish()

    trace = _reloaded(run_in_thread(program), tmp_path)
    omitted = trace.meta["omitted"]
    assert omitted["graph_tasks"] == 1 and omitted["events"] > 0
    assert [e for e in trace if isinstance(e, ev.GraphTaskStarted)] and _started(trace) == CHAIN
    assert {getattr(e, "graph_task", 0) for e in trace} - {0} == {1}


def test_attached_from_another_thread_mid_backward_and_finished_mid_backward(tmp_path):
    """Another thread attaches while a backward runs and finishes while the next one runs: the first is
    omitted, the second is kept up to the finish, and the file loads and replays."""
    reached, attached, finishing, finished = (threading.Event() for _ in range(4))
    box = {}

    def other():
        reached.wait(60)
        box["rec"] = Recorder().attach()
        attached.set()
        finishing.wait(60)
        box["trace"] = box["rec"].finish()
        finished.set()

    def program():
        thread = threading.Thread(target=other)
        thread.start()
        x = engine.tensor([0.1, 0.2], requires_grad=True)
        loss = _chain(x)
        _node_at(loss, 2).register_prehook(_pause(reached, attached))
        loss.backward()
        loss = _chain(x)
        _node_at(loss, 3).register_prehook(_pause(finishing, finished))
        loss.backward()
        thread.join(60)

    run_in_thread(program)
    trace = _reloaded(box["trace"], tmp_path)
    assert trace.meta["omitted"]["graph_tasks"] == 1
    assert _started(trace) == CHAIN[:3]  # the hook on the 4th node ran when finish() was called
    assert not [e for e in trace if isinstance(e, ev.GraphTaskFinished)]


def test_attach_and_finish_racing_backwards_on_another_thread_always_load(tmp_path):
    """A thread attaches and finishes Recorders at seeded random moments while another runs backwards in a
    loop: every trace saves, loads and replays (finish() never sees a buffer change under it)."""
    rng = random.Random(0)
    stop = threading.Event()

    def busy():
        x = engine.tensor([0.1, 0.2], requires_grad=True)
        while not stop.is_set():
            _chain(x, 30).backward()

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        for _ in range(25):
            recorder = Recorder().attach()
            time.sleep(rng.uniform(0.0, 0.004))
            _reloaded(recorder.finish(), tmp_path)
    finally:
        stop.set()
        thread.join(60)
