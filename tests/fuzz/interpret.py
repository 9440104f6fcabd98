"""Runs a fuzz program as a parity program on engine and on torch, and names the first difference.

The program's rendered source is compiled into `program(t, p)` and run through tests/engine/parity.py's
`describe`, so the comparison is the parity harness's: node names, next_functions, relative seq_nr,
execution order seen by Node pre-hooks, values with tolerance, errors (type and message), and, through
`p.made`, every tensor's requires_grad, grad_fn, is_leaf and `_version`.

Imports the engine; torch only when asked to compare (`import_torch`).
"""
from __future__ import annotations

import signal
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from tests.engine.parity import describe, same_event
from tests.fuzz.program import Program, render

TIMEOUT_S = 20
"""A program that runs longer than this on one module is recorded as timed out (a hang is a difference)."""

TENSOR_FIELDS = ("kind", "shape", "dtype", "values", "requires_grad", "grad_fn", "_version", "is_leaf", "seq_nr",
                 "retains_grad")
"""The positions of a tensor in a value or made event (parity.py's `_plain`, then Probe._state)."""
_TENSOR_ORDER = (0, 1, 2, 4, 5, 8, 7, 6, 9, 3)  # structure before numbers: report a wrong node before its values
NODE_FIELDS = ("node index", "node name", "seq_nr", "next_functions", "leaf")
"""The positions of a node in a graph event (parity.py's Probe.watch)."""


@dataclass(frozen=True)
class Difference:
    """The first event where engine and torch disagree: which field, in which statement."""

    field: str
    op: str  # the op of the statement that was running, or "end"
    stmt: int  # its index in the program, -1 for the end block
    tag: str  # the differing event's tag ("s3", "s5 grads", "end")
    engine: str
    torch: str

    @property
    def signature(self) -> tuple[str, str]:
        """What the shrinker keeps and the summary groups by: (field, op)."""
        return self.field, self.op


def compile_program(program: Program, bare: frozenset[int] = frozenset()) -> Callable[[Any, Any], None]:
    """The program as a function `(t, p)` (statements in `bare` without their p.attempt block)."""
    namespace: dict[str, Any] = {}
    exec(compile(render(program, bare=set(bare)), f"<fuzz seed {program.seed}>", "exec"), namespace)  # noqa: S102
    return namespace["program"]


def run(module: Any, fn: Callable[[Any, Any], None]) -> list:
    """The parity events of `fn` on `module`; an escaping exception or a hang ends them with a "crashed" event."""
    events: list = []

    def program(t: Any, p: Any) -> None:
        events.append(p.events)  # the same list object describe() returns, kept if the program crashes
        fn(t, p)

    with warnings.catch_warnings(), _deadline(TIMEOUT_S):
        warnings.simplefilter("ignore")
        try:
            return describe(module, program)
        except BaseException as e:  # noqa: BLE001 - a crash of one side is a difference to report
            if isinstance(e, KeyboardInterrupt):
                raise
            return list(events[0] if events else []) + [("crashed", type(e).__name__, str(e)[:500])]


class ProgramTimeout(BaseException):
    """A program ran too long; a BaseException so that p.attempt does not swallow it."""


class _deadline:
    """Raise TimeoutError in the main thread after `seconds` (no-op elsewhere)."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self.armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")

    def __enter__(self) -> None:
        if self.armed:
            self.old = signal.signal(signal.SIGALRM, self._fire)
            signal.alarm(self.seconds)

    def __exit__(self, *exc: Any) -> None:
        if self.armed:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self.old)

    def _fire(self, signum: int, frame: Any) -> None:
        raise ProgramTimeout(f"the program ran longer than {self.seconds} s")


def import_torch() -> Any:
    """torch, or SystemExit with what to install."""
    try:
        import torch
    except ImportError:
        raise SystemExit("tests.fuzz compares with PyTorch, which is not installed: "
                         "run `make test` once (it installs torch 2.13.0 CPU) or pip install torch==2.13.0") from None
    return torch


def compare(program: Program, bare: frozenset[int] = frozenset(), ours: Any = None,
            theirs: Any = None) -> Difference | None:
    """Run `program` on `ours` (default engine) and `theirs` (default torch); their first difference or None."""
    if ours is None:
        from agdb import engine as ours
        _engine_paths(program.seed)
    if theirs is None:
        theirs = import_torch()
    fn = compile_program(program, bare)
    return first_difference(run(ours, fn), run(theirs, fn))


ONE_WAY_FLAGS = ("inference_seen", "saved_hooks_seen", "detached_in_place")


def _engine_paths(seed: int) -> None:
    """Set the engine's one-way flags for program `seed`. Once a process has used inference_mode, saved-tensor
    hooks or detach_(), they stay on and switch the engine to slower paths that must behave the same; left to the
    programs a worker happened to run before, a difference would depend on them and vanish when shrunk. Each
    program starts as in a fresh process, or, for one seed in three, with every flag on: both paths are covered,
    and a result depends on its seed alone."""
    from agdb.engine import _state

    on = seed % 3 == 0
    for flag in ONE_WAY_FLAGS:
        setattr(_state, flag, on)


def first_difference(ours: list, theirs: list) -> Difference | None:
    """The first event that differs, with the field that differs and the statement that was running."""
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else None
        b = theirs[i] if i < len(theirs) else None
        if a is not None and b is not None and (same_event(a, b) or _deliberately_same(a, b)):
            continue
        if _refused_on_purpose(a) or _torch_bug(b):
            return None  # generator.ABSENT: one side stops there on purpose or by a bug; what came before matched
        stmt, op = _statement(ours, i) if a is not None else _statement(theirs, i)
        field, x, y = _field(a, b)
        tag = next((e[1] for e in (a, b) if e is not None and len(e) > 1 and isinstance(e[1], str)), "")
        return Difference(field, op, stmt, tag, _short(x), _short(y))
    return None


def _refused_on_purpose(ours: Any) -> bool:
    """The engine's NotImplementedError for a third-order graph through a formula it computes in numpy
    (generator.ABSENT["third_order"]), or for create_graph through a convolution (ABSENT["conv_create_graph"])."""
    return ours is not None and ours[0] == "raised" and ours[2] == "NotImplementedError" \
        and ("agdb's engine does not record the derivative" in ours[3]
             or "agdb's engine does not record convolution_backward's graph" in ours[3])


def _torch_bug(theirs: Any) -> bool:
    """torch's own "INTERNAL ASSERT FAILED ... please report a bug to PyTorch" (generator.ABSENT["torch_bug"])."""
    return theirs is not None and theirs[0] == "raised" and "INTERNAL ASSERT FAILED" in str(theirs[3])


def _deliberately_same(ours: Any, theirs: Any) -> bool:
    """A difference generator.DELIBERATE names (same type, same statement): torch's multi-line "invalid
    combination of arguments" TypeError of an overloaded op given a non-tensor, which the engine words in one
    line; the error of an op whose kernel torch runs with out= on an inference tensor (kernel_version)."""
    if not (ours[0] == theirs[0] == "raised" and ours[1] == theirs[1] and ours[2] == theirs[2]):
        return False
    return (ours[2] == "TypeError" and "received an invalid combination of arguments" in theirs[3]) or (
        ours[2] == "RuntimeError" and "functions with out=... arguments don't support automatic differentiation"
        in theirs[3])


def _statement(events: list, i: int) -> tuple[int, str]:
    """The statement whose attempt encloses event i: the first ok/raised at or after it."""
    for e in events[i:]:
        if e[0] in ("ok", "raised"):
            tag = e[1]
            if tag == "end":
                return -1, "end"
            index, _, op = tag.partition(" ")
            return int(index[1:]), op
    return -1, "end"


def _field(a: Any, b: Any) -> tuple[str, Any, Any]:
    """The name of the first differing field of two events, and the differing parts."""
    if a is None or b is None:
        return "event count", a, b
    if a[0] != b[0]:
        kinds = {a[0], b[0]}
        name = ("raised on one side" if "raised" in kinds else "crashed" if "crashed" in kinds else
                "execution order" if "run" in kinds else f"event kind ({a[0]}/{b[0]})")
        return name, a, b
    kind = a[0]
    if kind == "raised":
        return ("error type" if a[2] != b[2] else "error message"), a[2:], b[2:]
    if kind in ("run", "counter", "crashed"):
        return {"run": "execution order", "counter": "seq_nr counter", "crashed": "crashed"}[kind], a, b
    if kind.endswith("graph"):  # p.watch's event kind is its tag
        return _graph_field(a[1], b[1])
    if kind in ("value", "made"):
        return _value_field(a[2], b[2])
    return kind, a, b


def _graph_field(a: tuple, b: tuple) -> tuple[str, Any, Any]:
    for x, y in zip(a, b, strict=False):
        for j, name in enumerate(NODE_FIELDS):
            if not same_event(x[j], y[j]):
                return "graph " + name, x, y
    return "graph size", a, b


def _value_field(a: Any, b: Any) -> tuple[str, Any, Any]:
    if _is_tensor(a) and _is_tensor(b):
        for j in _TENSOR_ORDER:
            if j < min(len(a), len(b)) and not same_event(a[j], b[j]):
                return TENSOR_FIELDS[j], a, b
        return "value", a, b
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            if not same_event(x, y):
                field, x, y = _value_field(x, y)
                return field, (f"#{k}", x), (f"#{k}", y)
    if (a is None) != (b is None):
        return "None or not", a, b
    return "value", a, b


def _is_tensor(v: Any) -> bool:
    return isinstance(v, tuple) and len(v) >= 6 and v[0] == "tensor"


def _short(e: Any) -> str:
    text = repr(e)
    return text if len(text) < 600 else text[:600] + "..."
