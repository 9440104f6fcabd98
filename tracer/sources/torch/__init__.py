"""The PyTorch bridge: record a real PyTorch run into agdb's trace format (docs/torch-bridge.md).

`with agdb.tracer.record("torch") as rec: ...` records everything the block does with torch (the bridge,
bridge.py; its options are Bridge's); `rec.trace` is the Trace afterwards, which the TUI, `agdb show`, `culprits`
and `export` read like any other. torch is an
optional dependency: it is imported here only when a recording starts, so nothing else in agdb pulls it in, and
without it `record("torch")` raises TorchMissing, whose message says how to install it.
"""
from __future__ import annotations

import importlib.util
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from agdb.tracer.views.labels import NodeLabels

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


def run_with_big_stack(fn: Callable[[], T], stack_size: int = BIG_STACK, name: str = "agdb-torch",
                       daemon: bool = False, wait: Callable[[threading.Thread], None] | None = None) -> T:
    """Run `fn` in a fresh thread with a `stack_size` stack, and return what it returns (or raise what it raised).

    `wait(thread)` waits for the thread to end (default: join it); agdb's script runner passes one that hands an
    interrupt on to the script (app/run_script.py).
    """
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            result["error"] = e

    old = threading.stack_size()
    threading.stack_size(stack_size)
    try:
        thread = threading.Thread(target=run, name=name, daemon=daemon)
        thread.start()
    finally:
        threading.stack_size(old)
    (wait or threading.Thread.join)(thread)
    if "error" in result:
        raise result["error"]
    return result["value"]


def divergence_text(trace: Any, limit: int = 3) -> str:
    """Where agdb's model of the engine, torch's own witnesses and the observed order differed in a bridge trace
    ("" when nowhere): the order (model against the pre-hooks), torch's graph task id or running node against the
    hook's, and the execution-order witness (docs/torch-bridge.md)."""
    found = trace.meta.get("divergences") or []
    labels = NodeLabels(trace)
    lines = [_divergence_line(labels, d) for d in found[:limit]]
    if len(found) > limit:
        lines.append(f"… and {len(found) - limit} more")
    return "\n".join(lines)


def _divergence_line(labels: NodeLabels, d: dict) -> str:
    def name(field: str, none: str) -> str:
        row = d.get(field, -1)
        return labels.label(row) if row is not None and row >= 0 else none

    where = f"step {d['step']}, graph task {d['graph_task']}"
    kind = d.get("kind", "order")
    if kind == "graph_task":
        return (f"{where}: {name('node', '?')} ran in torch's graph task {d['observed_id']}, its backward call's is "
                f"{d['expected_id']}")
    if kind == "running_node":
        return (f"{where}: the hook of {name('node', '?')} fired while torch's running node had seq_nr "
                f"{d['running_seq_nr']}")
    if kind == "witness":
        other = "agdb's model popped" if d["against"] == "model" else "the pre-hooks saw"
        return (f"{where}: torch's execution order has {name('expected', 'nothing more')} at position {d['index']}, "
                f"{other} {name('observed', 'nothing more')}")
    return (f"{where}: the model expected {name('expected', 'no more nodes')}, torch ran "
            f"{name('observed', 'nothing more')}")


def witness_text(trace: Any) -> str:
    """One line on torch's execution-order witness (NOTE [witness] in backward.py), or "" when no backward ran with
    multithreading disabled."""
    tasks = trace.meta.get("graph_tasks") or []
    witnessed = [t for t in tasks if "execution_order" in t]
    if not witnessed:
        return ""
    agreed = sum(1 for t in witnessed if t["execution_order"]["model"] == t["execution_order"]["observed"] == "agrees")
    return (f"torch's execution order (multithreading disabled) agrees with the observed order and agdb's model in "
            f"{agreed} of {len(witnessed)} graph task(s)")
