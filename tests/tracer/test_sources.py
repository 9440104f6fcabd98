"""One TraceSource interface and one `record(source=...)`: the engine's Recorder and the real-PyTorch bridge are
made, attached and finished the same way, and a wrong name or option is refused with a message."""
from __future__ import annotations

import pytest

from agdb import engine, tracer
from agdb.tracer import make_source
from agdb.tracer.sources import torch as torch_source
from agdb.tracer.store.events import NodeCreated
from tests.engine.helpers import run_in_thread


def _program(lib):
    x = lib.ones(2, requires_grad=True)
    (x * 2).sum().backward()


def _made(trace) -> list[str]:
    """The backward nodes made, in order (AccumulateGrads aside: the bridge meets them at the walk)."""
    return [e.name for e in trace if isinstance(e, NodeCreated) and not e.name.endswith("AccumulateGrad")]


def test_record_defaults_to_the_engine():
    """`tracer.record()` records agdb's engine: the block's nodes are in `rec.trace`, the source says `engine`."""
    def go():
        with tracer.record() as rec:
            _program(engine)
        return rec

    rec = run_in_thread(go)
    assert rec.trace.source == "engine"
    assert _made(rec.trace) == ["MulBackward0", "SumBackward0"]


def test_record_torch_records_real_pytorch():
    """`tracer.record("torch")` records real PyTorch through the bridge, with the same node names."""
    torch = pytest.importorskip("torch")

    def go():
        with tracer.record("torch", values=False) as rec:
            _program(torch)
        return rec

    rec = run_in_thread(go)
    assert rec.trace.source == "torch"
    assert _made(rec.trace) == ["MulBackward0", "SumBackward0"]


def test_both_sources_implement_the_protocol():
    """Each source has num_events, attach, detach and finish; a source made but never attached finishes empty."""
    names = ["engine"] + (["torch"] if torch_source.available() else [])
    for name in names:
        source = make_source(name)
        assert isinstance(source, tracer.TraceSource)
        assert source.num_events == 0
        assert len(source.finish()) == 0


def test_record_attaches_a_source_already_made():
    """A source made beforehand (here the engine's Recorder) is attached by record() and finished at the end."""
    def go():
        with tracer.record(make_source("engine")) as rec:
            _program(engine)
            seen = rec.source.num_events
        return rec, seen

    rec, seen = run_in_thread(go)
    assert seen == len(rec.trace) > 0


def test_unknown_source_and_options_are_refused():
    """A misspelt source or an option the source does not take raises ValueError saying so."""
    with pytest.raises(ValueError, match="unknown trace source 'engnie'"):
        make_source("engnie")
    with pytest.raises(ValueError, match="takes no options, not values"):
        make_source("engine", values=False)
    with pytest.raises(ValueError, match="go to make_source"):
        with tracer.record(make_source("engine"), values=False):
            pass
    if torch_source.available():
        with pytest.raises(ValueError, match="does not take these options"):
            make_source("torch", colour="red")
