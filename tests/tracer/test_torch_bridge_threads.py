"""The bridge on every thread (NOTE [threads' line tracers] in tracer/sources/torch/lines.py): the forward
increments of threads started while recording are put on their lines and threads, checked against the counter
each thread reads itself (torch's seq_nr is thread-local)."""
from __future__ import annotations

import sys
import threading

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.recording.culprits import of_trace  # noqa: E402
from agdb.tracer.store.schema import Kind  # noqa: E402

_seq = torch.autograd._get_sequence_nr


def _work(scale, truth):
    """A worker: three ops, each line's numbers read from torch's own counter around it, then a backward."""
    x = torch.ones(3, requires_grad=True)
    a = _seq()
    y = x * scale
    b = _seq()
    z = y.exp().sin()
    c = _seq()
    loss = z.sum()
    d = _seq()
    first = _work.__code__.co_firstlineno
    truth[threading.current_thread().name] = [(first + 4, a, b), (first + 6, b, c), (first + 8, c, d)]
    loss.backward()


def _start_workers(truth, names):
    """Start one thread per name, one after the other (each joined before the next starts)."""
    for i, name in enumerate(names):
        t = threading.Thread(target=_work, args=(i + 2, truth), name=name)
        t.start()
        t.join()


def _by_thread(trace):
    """{thread name: [(line, seq_nr, node name)]} of the increments the trace puts on this file's lines."""
    out: dict[str, list] = {}
    for c in of_trace(trace):
        if c.filename == __file__:
            out.setdefault(trace.threads[c.thread][1], []).append((c.lineno, c.old, c.node_name))
    return out


@pytest.mark.parametrize("culprits", ["lines", "mode"])
def test_threads_started_while_recording_have_their_culprits(culprits):
    """Each worker's increments are on its own thread, on the line that made them, with the numbers torch's
    counter on that thread moved through there: the two workers' counters each start at 0."""
    truth: dict[str, list] = {}
    with tracer.record("torch", culprits=culprits) as rec:
        _start_workers(truth, ["worker-a", "worker-b"])
    found = _by_thread(rec.trace)
    assert set(found) == {"worker-a", "worker-b"}
    for name, lines in truth.items():
        expected = [(line, s) for line, lo, hi in lines for s in range(lo, hi)]
        assert [(line, s) for line, s, _ in found[name]] == expected, name
        assert [n for _, _, n in found[name]] == ["MulBackward0", "ExpBackward0", "SinBackward0", "SumBackward0"]
        assert expected[0][1] == 0  # a fresh thread's counter: torch's, read by the worker
    assert "?" not in {n for lines in found.values() for _, _, n in lines}


def test_thread_rows_follow_first_appearance_not_idents():
    """Thread rows are given in the order threads first took a number (the engine's rule), named by thread name:
    the worker started second but numbering first gets the lower row."""
    truth: dict[str, list] = {}
    go_second = threading.Event()

    def first():
        go_second.wait()
        _work(2, truth)

    with tracer.record("torch") as rec:
        late = threading.Thread(target=first, name="started-first")
        late.start()
        _start_workers(truth, ["numbers-first"])
        go_second.set()
        late.join()
    trace = rec.trace
    numbering = []
    for s in trace.steps_of(Kind.SEQ_NR_BUMPED):
        name = trace.threads[trace[int(s)].thread][1]
        if name not in numbering:
            numbering.append(name)
    assert numbering == ["numbers-first", "started-first"]
    rows = {name: row for row, name in trace.threads}
    assert rows["numbers-first"] < rows["started-first"]


def test_a_thread_still_running_when_the_recording_ends_is_left_untraced():
    """A worker that outlives the recording loses the bridge's trace function at its next call, and its later ops
    are not written to the finished trace."""
    started, stopped, done = threading.Event(), threading.Event(), threading.Event()
    after: dict = {}

    def worker():
        x = torch.ones(2, requires_grad=True)
        y = x * 2  # noqa: F841 - recorded
        started.set()
        stopped.wait()
        _work(3, {})  # a call: the bridge's trace function takes itself off
        after["trace"] = sys.gettrace()
        done.set()

    with tracer.record("torch") as rec:
        t = threading.Thread(target=worker, name="outliving")
        t.start()
        started.wait()
    stopped.set()
    t.join()
    found = _by_thread(rec.trace)
    assert [(s, n) for _, s, n in found["outliving"]] == [(0, "MulBackward0")]
    assert after["trace"] is None
    assert threading.gettrace() is None


def test_a_thread_started_before_the_recording_gets_no_lines_but_its_backward_is_recorded():
    """A thread that was running before the recording began cannot be given a trace function (Python 3.11 has
    no settrace_all_threads): its forward ops are not put on lines, and its backward call is still recorded."""
    go, done = threading.Event(), threading.Event()
    box: dict = {}

    def worker():
        go.wait()
        _work(2, box)
        done.set()

    t = threading.Thread(target=worker, name="before")
    t.start()
    with tracer.record("torch") as rec:
        go.set()
        done.wait()
    t.join()
    trace = rec.trace
    assert _by_thread(trace).get("before", []) == []
    tasks = [trace[int(s)] for s in trace.steps_of(Kind.GRAPH_TASK_STARTED)]
    assert [trace.threads[e.thread][1] for e in tasks] == ["before"]
    assert any(trace.node(i).name == "SumBackward0" for i in range(trace.num_nodes))
