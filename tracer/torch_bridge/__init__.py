"""The PyTorch bridge: record a real PyTorch run into agdb's trace format (docs/torch-bridge.md).

`with tracer.torch_bridge.record() as rec: ...` records everything the block does with torch; `rec.trace` is
the Trace afterwards, which the TUI, `agdb show`, `culprits` and `export` read like any other. torch is an
optional dependency: it is imported here only when `record()` runs, so nothing else in agdb pulls it in, and
without it `record()` raises TorchMissing, whose message says how to install it.
"""
from __future__ import annotations

import importlib.util
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

INSTALL_HINT = ("agdb's PyTorch bridge needs torch 2.13: `pip install 'agdb[torch]'` (or `pip install "
                "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu` for the CPU build)")

BIG_STACK = 1 << 30
"""Stack size of the thread `run_with_big_stack` makes: PyTorch frees a deep graph recursively, and a
1M-deep chain needs about 1 GiB (64 MiB was enough for 100k). It is address space, not memory used."""

T = TypeVar("T")


class TorchMissing(ImportError):
    """torch is not installed; the message says how to install it."""


def available() -> bool:
    """Whether torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


@contextmanager
def record(values: bool = True, defer: bool = False) -> Iterator[Any]:
    """Record the block's PyTorch work on this thread; `.trace` holds the Trace once the block ends.

    values: keep each grad's first values and NaN/inf flags (False: shapes and dtypes only, a little faster).
    defer: reconstruct what torch hides when the block ends rather than after each backward call (the program
    runs faster, but every grad it computes stays alive until then).
    Deep graphs: run the block in `run_with_big_stack` (torch frees a deep graph recursively).
    """
    if not available():
        raise TorchMissing(INSTALL_HINT)
    from .bridge import Bridge

    bridge = Bridge(values=values, defer=defer).attach()
    handle = _RecordingHandle(bridge)
    try:
        yield handle
    finally:
        handle.trace = bridge.finish()


class _RecordingHandle:
    """What `record()` yields: the live bridge, and the trace once the block has ended."""

    def __init__(self, bridge: Any) -> None:
        self.bridge = bridge
        self.trace: Any = None


def run_with_big_stack(fn: Callable[[], T], stack_size: int = BIG_STACK, name: str = "agdb-torch") -> T:
    """Run `fn` in a fresh thread with a `stack_size` stack, and return what it returns (or raise what it raised)."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            result["error"] = e

    old = threading.stack_size()
    threading.stack_size(stack_size)
    try:
        thread = threading.Thread(target=run, name=name)
        thread.start()
    finally:
        threading.stack_size(old)
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def divergence_text(trace: Any, limit: int = 3) -> str:
    """Where agdb's model of the engine and the observed order differed in a bridge trace ("" when nowhere)."""
    found = trace.meta.get("divergences") or []
    lines = []
    for d in found[:limit]:
        expected = trace.node(d["expected"]).name if d.get("expected", -1) >= 0 else "no more nodes"
        observed = trace.node(d["observed"]).name if d.get("observed", -1) >= 0 else "nothing more"
        lines.append(f"step {d['step']}, graph task {d['graph_task']}: the model expected {expected}, torch ran "
                     f"{observed}")
    if len(found) > limit:
        lines.append(f"… and {len(found) - limit} more")
    return "\n".join(lines)
