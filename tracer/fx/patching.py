"""What a capture swaps in for its duration: the derivative formulas' op namespace and Function.apply.

The formulas call their ops through `engine._ops` (and validate_outputs its `sum_to`/`to`), which the
dispatch point does not report; wrapping them is how the capture sees the ops a formula runs, as torch's
tracing dispatch mode sees every aten op. `Function.apply` is wrapped to know where a custom Function begins
and ends. Everything is restored on exit, however the capture ends.
"""
from __future__ import annotations

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
