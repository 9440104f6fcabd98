"""What a capture swaps in for its duration: the derivative formulas' op namespace, the ops that composite
ops call, and Function.apply.

The formulas call their ops through `engine._ops` (and validate_outputs its `sum_to`/`to`), which the
dispatch point does not report; wrapping them is how the capture sees the ops a formula runs, as torch's
tracing dispatch mode sees every aten op. A reported op made of other ops (`linear`: t + addmm; `matmul`: view
+ mm + _unsafe_view, ...) calls them as module globals of engine/_ops/linalg.py and shape.py (and
engine/_inplace.py's add_); those are wrapped to note each innermost op it ran (`Capture.leaves`), so that the
capture can record the composite as aten decomposes it (capture.py's COMPOSITE_OPS). `Function.apply` is
wrapped to know where a custom Function begins and ends. Everything is restored on exit, however the capture
ends.
"""
from __future__ import annotations

from dataclasses import dataclass
from threading import get_ident
from typing import Any, Literal, Protocol

from agdb.tracer.fx.calls import classify_scalars
from agdb.tracer.fx.graph import Node


class Capture(Protocol):
    """What the patches read and call of the capture they serve (capture.py's `Capture`)."""

    tls: Any  # the engine's thread-local state (current node, grad mode)
    phase: Literal["setup", "forward", "backward"]
    thread: int  # the ident of the thread the capture runs on: other threads are not captured
    custom_functions: str  # "python_op": a custom Function is one PythonOp node
    in_function: int  # depth of custom Function.apply calls being captured as one PythonOp
    in_formula: int  # depth of derivative formulas running
    explained: set  # seq_nrs whose increment a captured node accounts for
    leaves: list  # the innermost ops run inside the reported op running now, as Leaf records

    def add(self, target: str, args: tuple, kwargs: dict | None, outputs: tuple, kind: str,
            name: str | None = None, extra: dict | None = None) -> Node: ...

    def node_of(self, t: Any) -> Node: ...

    def arg(self, v: Any) -> Any: ...


# -- the patches ---------------------------------------------------------------------------------------------
class Patched:
    """Wraps the formula namespace and Function.apply for one capture; restores them on exit."""

    def __init__(self, cap: Capture) -> None:
        self.cap = cap
        self.saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> Patched:
        from agdb.engine import _dispatch, _ops
        from agdb.engine.autograd import function

        cap = self.cap
        reporting = _dispatch._reporting
        tls = cap.tls
        from agdb.engine import Tensor

        self._wrap_inner_ops(cap, reporting, tls, Tensor)  # first: it reads the namespace's own functions
        for name in dir(_ops):
            fn = getattr(_ops, name)
            if name.startswith("_") or not callable(fn) or isinstance(fn, type):
                continue
            self.saved.append((_ops, name, fn))
            setattr(_ops, name, _formula_wrapper(cap, name, fn, reporting, tls, Tensor))

        from agdb.engine import _validate  # validate_outputs' sum_to and to: traced like the formulas' ops

        for name in ("sum_to", "to"):
            fn = getattr(_validate, name)
            self.saved.append((_validate, name, fn))
            setattr(_validate, name, _formula_wrapper(cap, name, fn, reporting, tls, Tensor))

        orig = function.Function.__dict__["apply"]
        self.saved.append((function.Function, "apply", orig))
        real_apply = orig.__func__

        def apply(cls, *args, **kwargs):
            if cap.phase != "forward" or cap.in_function or get_ident() != cap.thread:
                return real_apply(cls, *args, **kwargs)
            start = tls.seq_nr
            python_op = cap.custom_functions == "python_op"
            if python_op:
                cap.in_function += 1
            try:
                out = real_apply(cls, *args, **kwargs)
            finally:
                if python_op:
                    cap.in_function -= 1
            if python_op:
                outs = out if isinstance(out, tuple) else (out,)
                tensors = tuple(o for o in outs if isinstance(o, Tensor))
                attrs = {"name": cls.__name__, **classify_scalars(args)}
                cap.add("PythonOp", tuple(cap.node_of(a) for a in args if isinstance(a, Tensor)), attrs, tensors,
                        "pyop", name="PythonOp")
            # The Function's number is legitimately taken by its inner ops only if its node reached the outputs;
            # under no_grad (or with no input needing grad) it is an increment nothing in the graph owns.
            outs = out if isinstance(out, tuple) else (out,)
            if any(isinstance(o, Tensor) and o.grad_fn is not None and o.grad_fn._seq == start for o in outs):
                cap.explained.add(start)
            return out

        function.Function.apply = classmethod(apply)
        return self

    def _wrap_inner_ops(self, cap: Capture, reporting: Any, tls: Any, Tensor: type) -> None:
        """Wrap the ops composite ops call (module globals, so the formula namespace's wrappers never see them)
        under the target that runs them again: `engine._ops.<name>`, or a public op's `engine.<op>`."""
        from agdb.engine import _dispatch, _inplace, _ops
        from agdb.engine._ops import linalg, shape

        targets: dict[int, str] = {}
        for name in dir(_ops):  # the ops themselves, not the helpers (record, _out) the namespace re-exports
            fn = getattr(_ops, name)
            module = getattr(fn, "__module__", None) or ""
            if callable(fn) and not isinstance(fn, type) and module.startswith("agdb.engine._ops.") \
                    and module != "agdb.engine._ops._common":
                targets.setdefault(id(fn), f"engine._ops.{name}")
        for entry in _dispatch.REGISTRY.values():
            targets.setdefault(id(entry.impl), f"engine.{entry.op}")
        for module in (linalg, shape, _inplace):
            for name, fn in list(vars(module).items()):
                target = targets.get(id(fn)) if callable(fn) else None
                if target is not None:
                    self.saved.append((module, name, fn))
                    setattr(module, name, _inner_wrapper(cap, target, fn, reporting, tls, Tensor))

    def __exit__(self, *exc: object) -> None:
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)


def _formula_wrapper(cap: Capture, name: str, fn: Any, reporting: Any, tls: Any, Tensor: type) -> Any:
    target = f"engine._ops.{name}"

    def wrapped(*args, **kwargs):
        if cap.phase != "backward" or cap.in_formula or reporting.active or cap.in_function \
                or tls.current_node is None or get_ident() != cap.thread:
            return fn(*args, **kwargs)
        cap.in_formula += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            cap.in_formula -= 1
        outs = out if isinstance(out, tuple) else (out,)
        tensors = tuple(o for o in outs if isinstance(o, Tensor))
        if tensors:
            cap.add(target, tuple([cap.arg(a) for a in args]),
                    {k: cap.arg(v) for k, v in kwargs.items()} if kwargs else None, tensors, "formula", name=name)
        return out
    wrapped.__wrapped__ = fn
    return wrapped


@dataclass(frozen=True, slots=True)
class Leaf:
    """One innermost op run inside a reported op: what to call again, what it returned, and the thread's
    sequence number before and after it (it made autograd nodes numbered `before` to `after - 1`)."""

    target: str
    fn: Any
    args: tuple
    kwargs: dict
    out: Any
    before: int
    after: int


def _inner_wrapper(cap: Capture, target: str, fn: Any, reporting: Any, tls: Any, Tensor: type) -> Any:
    def wrapped(*args, **kwargs):
        if not reporting.active or cap.phase == "setup" or cap.in_function or cap.in_formula \
                or get_ident() != cap.thread:
            return fn(*args, **kwargs)
        leaves = cap.leaves
        mark = len(leaves)
        before = tls.seq_nr
        out = fn(*args, **kwargs)
        if len(leaves) == mark and out.__class__ is Tensor:  # innermost: it ran no wrapped op itself
            after = tls.seq_nr
            if after != before or not any(out is a for a in args):  # not contiguous() handing back its input
                leaves.append(Leaf(target, fn, args, kwargs, out, before, after))
        return out
    wrapped.__wrapped__ = fn
    return wrapped
