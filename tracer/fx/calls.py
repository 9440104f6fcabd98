"""A recorded call's arguments: trailing defaults dropped, the exact public entry that ran, object references,
and a custom Function's non-tensor arguments classified as PythonOp attributes (seed 002).

Imports the standard library and, on first use, the engine's dispatch table.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

_overloads: dict[int, str] = {}
_defaults: dict[int, tuple] = {}


def without_defaults(impl: Any, args: tuple) -> tuple:
    """`args` less the trailing ones equal to the implementation's defaults (the dispatcher passes every
    positional parameter, so `x.sum()` arrives as `(x, None, False, None)`): FX shows what the user wrote."""
    if impl is None or not args:
        return args
    defaults = _defaults.get(id(impl))
    if defaults is None:
        try:
            params = list(inspect.signature(impl).parameters.values())
        except (TypeError, ValueError):
            params = []
        defaults = _defaults[id(impl)] = tuple(
            p.default for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
    n = len(args)
    while n and n <= len(defaults):
        d, a = defaults[n - 1], args[n - 1]
        if d is inspect.Parameter.empty or not (a is d or (type(a) is type(d) and a == d)):
            break
        n -= 1
    return args[:n]


def overload_of(impl: Any) -> str | None:
    """Which public entry ran, as `surface:attr` (`Tensor:sum`, `torch:sum`): tracer.fx.interpret runs that one."""
    if impl is None:
        return None
    if not _overloads:
        from agdb.engine import _dispatch

        for entry in _dispatch.REGISTRY.values():
            _overloads.setdefault(id(entry.impl), f"{entry.surface}:{entry.attr}")
    return _overloads.get(id(impl))


@dataclass(frozen=True)
class Ref:
    """A non-tensor argument kept as an object reference (printed by type and a short repr)."""

    obj: Any

    def __repr__(self) -> str:
        return f"<{type(self.obj).__name__} object>"


# -- custom Function classification (seed 002) -------------------------------------------------------------
def classify_scalars(args: tuple) -> dict:
    """PythonOp's attributes for the non-tensor arguments: bool/int/float scalars and tuples of one of those
    types as typed lists with their positions; anything else as an object reference."""
    from agdb.engine import Tensor

    return classify_literals(list(args), lambda a: isinstance(a, Tensor))


def classify_literals(args: list, is_tensor: Any) -> dict:
    """`classify_scalars` for any arguments, `is_tensor(a)` saying which are the op's tensor inputs."""
    attrs: dict[str, list] = {}

    def put(kind: str, pos: int, value: Any) -> None:
        attrs.setdefault(f"input_{kind}", []).append(value)
        attrs.setdefault(f"input_{kind}_positions", []).append(pos)

    for pos, a in enumerate(args):
        if is_tensor(a):
            continue
        kind = _scalar_kind(a)
        if kind is not None:
            put(f"{kind}_scalars", pos, a)
        elif isinstance(a, tuple) and a and len({_scalar_kind(x) for x in a}) == 1 and _scalar_kind(a[0]):
            put(f"{_scalar_kind(a[0])}_tuples", pos, list(a))
        else:
            put("pointer_scalars", pos, f"<{type(a).__name__} object>")
    return attrs


def _scalar_kind(v: Any) -> str | None:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return None
