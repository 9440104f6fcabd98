"""One interface for every trace source, and one `record()` for all of them.

A source watches something run and writes what it sees through a TraceBuilder (recording/builder.py):
- "engine": agdb's engine, through its observer points (sources/engine.py, the Recorder);
- "torch": real PyTorch, through its hooks and a model of its engine (sources/torch/, the bridge).
Readers never depend on which one wrote a trace (STYLE.md §1): `Trace.source` names it, `Trace.provenance` says
which event kinds it observed, reconstructed or could not provide.

Imports the stages below; the engine and torch only inside `make_source`, when a source is made.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Protocol, runtime_checkable

from agdb.tracer.store.trace import Trace

SourceName = Literal["engine", "torch"]
SOURCES: tuple[SourceName, ...] = ("engine", "torch")


@runtime_checkable
class TraceSource(Protocol):
    """Something that records a trace while attached."""

    @property
    def num_events(self) -> int:
        """How many events were recorded so far (for progress; any thread may ask)."""
        ...

    def attach(self) -> TraceSource:
        """Start recording; returns the source."""
        ...

    def detach(self) -> None:
        """Stop recording; the events so far stay."""
        ...

    def finish(self, progress: Callable[[int, int], None] | None = None) -> Trace:
        """Detach and freeze what was recorded into a Trace."""
        ...


def make_source(source: SourceName = "engine", **options: Any) -> TraceSource:
    """A new, detached source of the named kind.

    Options: "engine" takes none; "torch" takes the bridge's (sources/torch/bridge.py, `Bridge`): values, defer,
    single_threaded, culprits.

    Raises:
        ValueError: an unknown source name, or options the source does not take.
        TorchMissing: "torch" without torch installed (the message says how to install it).
    """
    if source == "engine":
        if options:
            raise ValueError(f"the engine's recorder takes no options, not {', '.join(sorted(options))}")
        from agdb.tracer.sources.engine import Recorder

        return Recorder()
    if source == "torch":
        from agdb.tracer.sources import torch as torch_source

        if not torch_source.available():
            raise torch_source.TorchMissing(torch_source.INSTALL_HINT)
        from agdb.tracer.sources.torch.bridge import Bridge

        try:
            return Bridge(**options)
        except TypeError as e:
            raise ValueError(f"the torch source does not take these options: {e}") from None
    raise ValueError(f"unknown trace source {source!r}: choose one of {', '.join(SOURCES)}")


@dataclass
class Recording:
    """What `record()` yields: the live source, and the trace once the block has ended."""

    source: TraceSource
    trace: Trace | None = None


@contextmanager
def record(source: SourceName | TraceSource = "engine", **options: Any) -> Iterator[Recording]:
    """Record the block: `with tracer.record() as rec: ...` (agdb's engine), or `record("torch", culprits="mode")`
    (real PyTorch, the bridge's options). `rec.trace` holds the Trace once the block ends, however it ends.

    `source` may also be a source already made (make_source, or one of a test's own), which is attached here; its
    options were given when it was made, and any given here are refused.
    """
    if not isinstance(source, str) and options:
        raise ValueError(f"options ({', '.join(sorted(options))}) go to make_source, not to record() with a source "
                         "already made")
    made = make_source(source, **options) if isinstance(source, str) else source
    recording = Recording(made)
    made.attach()
    try:
        yield recording
    finally:
        recording.trace = made.finish()
