"""Runs one program on a module (engine or torch) and describes what it did, for side-by-side comparison.

A program is `fn(t, p)`: `t` is the module (`engine` or `torch`), `p` a Probe. The description holds the
graph reachable from watched tensors (node names, seq_nr relative to the program's start, edges by
canonical index), the execution order seen by Node pre-hooks, recorded values, and any exception's type
and message. Two runs agree when their descriptions are equal, with values compared numerically.

`p.attempt(tag)` and `p.made(tag, *tensors)` serve generated programs (tests/fuzz): a block whose exception is
recorded instead of raised, and the full state of the tensors a statement made (value, requires_grad,
grad_fn and its seq_nr, is_leaf, `_version`, retains_grad).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from agdb.engine._state import UINT64_MAX


def registry() -> tuple[dict[str, Callable], Callable[[str], Callable]]:
    """A parity file's PROGRAMS (name -> program) and the `@program(name)` decorator that fills it."""
    programs: dict[str, Callable] = {}

    def program(name: str) -> Callable[[Callable], Callable]:
        def register(fn: Callable) -> Callable:
            programs[name] = fn
            return fn
        return register
    return programs, program


class Probe:
    """What a program uses to make leaves, watch graphs, run actions and record values."""

    def __init__(self, t: Any) -> None:
        self.t = t
        self.base = t.autograd._get_sequence_nr()
        self.labels: dict[int, str] = {}  # id(leaf tensor) -> name
        self._named: list = []  # the named leaves, kept alive so that no other tensor takes one's id (and name)
        self.index: dict[Any, int] = {}  # node -> canonical index
        self.nodes: list = []
        self.events: list = []
        self.hooked: set = set()  # nodes whose pre-hook logs their run

    # -- making tensors --------------------------------------------------------------------------------
    def leaf(self, name: str, data: Any, requires_grad: bool = True, dtype: str = "float64") -> Any:
        """A named leaf (float64 unless told otherwise)."""
        x = self.t.tensor(data, dtype=getattr(self.t, dtype), requires_grad=requires_grad)
        self.labels[id(x)] = name
        self._named.append(x)
        return x

    def const(self, data: Any, dtype: str = "float64") -> Any:
        """A tensor that does not require grad."""
        return self.t.tensor(data, dtype=getattr(self.t, dtype))

    # -- observing -------------------------------------------------------------------------------------
    def rel_seq(self, node: Any) -> Any:
        s = node._sequence_nr()
        return "MAX" if s == UINT64_MAX else s - self.base

    def counter(self, tag: str) -> None:
        """Record how far the thread's counter has moved since the program began."""
        self.events.append(("counter", tag, self.t.autograd._get_sequence_nr() - self.base))

    def _label(self, node: Any) -> int:
        if node not in self.index:
            self.index[node] = len(self.nodes)
            self.nodes.append(node)
        return self.index[node]

    def watch(self, *tensors: Any, hooks: bool | str = True, tag: str = "graph") -> None:
        """Describe the graph below `tensors` and log, via pre-hooks, which of its nodes run.

        `hooks="new"` hooks only nodes no earlier watch hooked, so a node watched twice logs each run once.
        """
        roots = [x.grad_fn if hasattr(x, "grad_fn") else x for x in tensors]
        order: list = []
        stack = [r for r in reversed(roots) if r is not None]
        seen = set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            order.append(n)
            self._label(n)
            for child, _ in reversed(n.next_functions):
                if child is not None and child not in seen:
                    stack.append(child)
        desc = []
        for n in order:
            edges = [(None if c is None else self._label(c), nr) for c, nr in n.next_functions]
            extra = self.labels.get(id(n.variable), "?") if hasattr(n, "variable") else None
            desc.append((self.index[n], n.name(), self.rel_seq(n), tuple(edges), extra))
            if hooks is True or (hooks == "new" and n not in self.hooked):
                self.hooked.add(n)
                n.register_prehook(lambda go, n=n: self.events.append(("run", self.index[n])))
        self.events.append((tag, tuple(desc)))

    def run(self, tag: str, action: Callable[[], Any]) -> Any:
        """Call `action`; record its result or its exception (type and message)."""
        try:
            result = action()
        except Exception as e:  # noqa: BLE001 - the exception is what we compare
            self.events.append(("raised", tag, type(e).__name__, str(e)))
            return None
        self.events.append(("ok", tag))
        return result

    def value(self, tag: str, value: Any) -> None:
        """Record a tensor, a tuple of tensors, None or a plain value."""
        self.events.append(("value", tag, _plain(value)))

    def attempt(self, tag: str) -> _Attempt:
        """A `with` block whose exception (type and message) is recorded and swallowed; else records ok."""
        return _Attempt(self, tag)

    def made(self, tag: str, *tensors: Any) -> None:
        """Record each tensor as `value` does, with its `_version`, is_leaf, grad_fn seq_nr and retains_grad."""
        self.events.append(("made", tag, tuple(self._state(x) for x in tensors)))

    def _state(self, x: Any) -> Any:
        if not (hasattr(x, "detach") and hasattr(x, "shape")):
            return _plain(x)
        seq = None if x.grad_fn is None else self.rel_seq(x.grad_fn)
        return _plain(x) + (x._version, x.is_leaf, seq, x.retains_grad)


class _Attempt:
    """See Probe.attempt."""

    def __init__(self, probe: Probe, tag: str) -> None:
        self.probe, self.tag = probe, tag

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
        if kind is None:
            self.probe.events.append(("ok", self.tag))
            return False
        if not issubclass(kind, Exception):
            return False
        self.probe.events.append(("raised", self.tag, kind.__name__, str(error)))
        return True


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    if hasattr(v, "detach") and hasattr(v, "shape"):
        data = v.detach()
        if getattr(data, "_is_zerotensor", lambda: False)():
            data = data + 0  # torch's efficient zero tensors refuse tolist()
        return ("tensor", tuple(v.shape), str(v.dtype), np.asarray(data.tolist(), dtype=float),
                bool(v.requires_grad), None if v.grad_fn is None else v.grad_fn.name())
    return repr(v)


def describe(t: Any, program: Callable[[Any, Probe], None]) -> list:
    """Run `program` on module `t` and return its event list."""
    p = Probe(t)
    program(t, p)
    return p.events


def assert_same(ours: list, theirs: list, rtol: float = 1e-6, atol: float = 1e-8) -> None:
    """Events must match one for one; arrays compare with allclose (NaN equal to NaN)."""
    assert len(ours) == len(theirs), _diff(ours, theirs)
    for a, b in zip(ours, theirs):
        _assert_event(a, b, rtol, atol, ours, theirs)


def _assert_event(a: Any, b: Any, rtol: float, atol: float, ours: list, theirs: list) -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), _diff(ours, theirs)
        assert a.shape == b.shape and np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True), (
            f"values differ:\nengine: {a}\ntorch:  {b}")
        return
    if isinstance(a, tuple) and isinstance(b, tuple):
        assert len(a) == len(b), _diff(ours, theirs)
        for x, y in zip(a, b):
            _assert_event(x, y, rtol, atol, ours, theirs)
        return
    assert a == b, _diff(ours, theirs)


def _diff(ours: list, theirs: list) -> str:
    lines = ["engine vs torch events differ:"]
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else "<missing>"
        b = theirs[i] if i < len(theirs) else "<missing>"
        mark = "  " if same_event(a, b) else "!!"
        lines.append(f"{mark} engine: {_short(a)}")
        if mark == "!!":
            lines.append(f"   torch:  {_short(b)}")
    return "\n".join(lines)


def same_event(a: Any, b: Any) -> bool:
    """Whether two events are equal, arrays within assert_same's default tolerance."""
    try:
        _assert_event(a, b, 1e-6, 1e-8, [], [])
        return True
    except AssertionError:
        return False


def _short(e: Any) -> str:
    text = repr(e)
    return text if len(text) < 400 else text[:400] + "..."
