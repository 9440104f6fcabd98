"""The dispatch point: every public op is declared once, beside its implementation, and called through here.

Imports the standard library only (Tensor, to attach methods, when `install` runs).

An op module declares each public entry with `public(...)`: `engine.exp`, `Tensor.exp`, `Tensor.__add__`,
`Tensor.add_`, `engine.nn.functional.linear`. `table(surface)` builds the namespace of a surface from those
declarations (engine/__init__ and nn/functional export it, `install` attaches the Tensor one), so adding
an op touches its module and its test only. `public` returns the implementation unchanged: the engine's
own calls (derivative formulas, linear's addmm, add_'s add) call it directly and never pass through here.

NOTE [op_called]
Each public entry is a wrapper whose whole cost, while no attached observer implements `op_called`, is one
truth test of `_observer.op_watchers` (so a Recorder, which watches only the engine's points, adds nothing to
an op), one read of the thread's seq_nr counter and a try block (free until the op raises: then, where torch's
argument parser would have refused the call, the parser's TypeError replaces the error and the counter is put
back, as no node was made). With an observer implementing `op_called`, the wrapper reports one `OpCall` after
the op returns:

- Only the outermost call is reported. An op implemented with other ops calls their implementations
  directly; and while a reported op runs (and while observers are told of it), this thread reports
  nothing more. So `F.linear(x, w, b)` is one `linear` call, not t + addmm: the data flow a user wrote.
  Its inner nodes (TBackward0, AddmmBackward0) are still reported by seq_nr_bumped and node_created.
- Derivative formulas never report, even under create_graph: their nodes come from node_created. An op
  called by user code inside backward (a tensor hook, a custom Function's backward) is reported, with
  `backward_node` set to the node running on this thread; ops outside backward have None there.
- A call that raises, or an operator that returns NotImplemented to Python, is not reported.
- An op is a public call that returns tensors, factories (`zeros`, `tensor`, ...) included. Metadata reads
  (`size`, `dtype`), conversions to Python (`item`, `tolist`, `numpy`) and autograd's API (`backward`,
  hooks, `requires_grad_`, `retain_grad`) are not ops.
- Tensor ids are `_observer.tensor_uid`, numbered on first report; nodes have their own `_uid` numbers.
  The report comes on the calling thread, like every other point.
"""
from __future__ import annotations

import inspect
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Literal, TypeVar

from . import _observer
from ._observer import op_watchers
from ._state import tls

Surface = Literal["torch", "Tensor", "Tensor.property", "nn.functional", "linalg"]
"""Where a public entry lives: `engine.*`, a Tensor method or operator, a Tensor property,
`engine.nn.functional.*`, or `engine.linalg.*`."""

_F = TypeVar("_F", bound=Callable[..., Any])
_Names = bool | str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OpEntry:
    """One public entry: the attribute `attr` of `surface` runs `impl`, reported as op `op`."""

    surface: Surface
    attr: str
    op: str
    impl: Callable[..., Any]


REGISTRY: dict[tuple[Surface, str], OpEntry] = {}
"""Every public entry, by (surface, attribute name), in declaration order."""

_tables: dict[Surface, dict[str, Callable[..., Any]]] = {}
_Tensor: type = type(None)  # the Tensor class, set by install()


def public(op: str, *, torch: _Names = False, tensor: _Names = False, functional: _Names = False,
           tensor_property: _Names = False, linalg: _Names = False) -> Callable[[_F], _F]:
    """Declare the decorated function as public op `op` under the given names; returns it unchanged.

    Each surface takes True (the name `op`), a name, or a tuple of names: `public("add", tensor=("__add__",
    "__radd__"))` makes both operators report `add`.

    Raises:
        ValueError: a name of the surface is declared twice, or after its table was built.
    """
    def declare(impl: _F) -> _F:
        for surface, names in (("torch", torch), ("Tensor", tensor), ("nn.functional", functional),
                               ("Tensor.property", tensor_property), ("linalg", linalg)):
            for attr in _attrs(names, op):
                if (surface, attr) in REGISTRY or surface in _tables:
                    raise ValueError(f"{surface}.{attr} is declared twice, or after its table was built")
                REGISTRY[surface, attr] = OpEntry(surface, attr, op, impl)
        return impl
    return declare


def _attrs(names: _Names, op: str) -> tuple[str, ...]:
    if names is True:
        return (op,)
    if not names:
        return ()
    return (names,) if isinstance(names, str) else names


def table(surface: Surface) -> dict[str, Callable[..., Any]]:
    """The dispatching entry of every name declared on `surface`, built once (no later declarations)."""
    if surface not in _tables:
        _tables[surface] = {e.attr: _dispatcher(e) for e in REGISTRY.values() if e.surface == surface}
    return _tables[surface]


def install() -> None:
    """Attach the Tensor methods, operators and properties (called once by engine/__init__)."""
    global _Tensor
    from ._tensor import Tensor

    _Tensor = Tensor  # for _tensors; _tensor imports this module, so it cannot be imported at the top
    for attr, func in table("Tensor").items():
        setattr(Tensor, attr, func)
    for attr, func in table("Tensor.property").items():
        # a property Tensor can assign (`p.data = ...`) has its setter beside it as `_set_<name>`
        setattr(Tensor, attr, property(func, getattr(Tensor, f"_set_{attr}", None), doc=func.__doc__))


def _dispatcher(entry: OpEntry) -> Callable[..., Any]:
    """The public entry of `entry`, with `impl`'s own parameters: forwarding *args/**kwargs would cost more
    than the truth test."""
    op, impl = entry.op, entry.impl
    params, args, kwargs, call, defaults, aliases = _forwarding(inspect.signature(impl), _takes_numpy_names(entry))
    source = (f"def dispatched({params}):\n{aliases}"
              f"    seq_nr = _tls.seq_nr  # restored if torch's parser would have refused the call\n"
              f"    try:  # costs nothing until an op raises\n"
              f"        if _op_watchers:  # NOTE [op_called]: the only cost when nobody watches ops\n"
              f"            return _call_observed(_op, _impl, {args}, {kwargs})\n"
              f"        return _impl({call})\n"
              f"    except Exception:\n"
              f"        _after_failure(_entry, {args}, seq_nr)\n"
              f"        raise\n")
    scope = {"_op_watchers": op_watchers, "_call_observed": _call_observed, "_op": op, "_impl": impl,
             "_after_failure": _after_failure, "_entry": entry, "_tls": tls, "_UNSET": _UNSET, "_alias": _alias,
             "_attr": entry.attr, **defaults}
    # A file name inside engine/, so that stack walks stopping at the user's line skip this frame too.
    filename = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"<dispatch {entry.surface}.{entry.attr}>")
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - built from a signature, as dataclasses do
    dispatched = scope["dispatched"]
    dispatched.__name__ = entry.attr
    dispatched.__qualname__ = ("Tensor." if entry.surface.startswith("Tensor") else "") + entry.attr
    dispatched.__doc__ = impl.__doc__
    dispatched.__wrapped__ = impl  # inspect.signature and help() show the implementation's
    return dispatched


_NUMPY_ALIASES = (("dim", "axis"), ("keepdim", "keepdims"))
"""torch's argument parser takes numpy's names for these parameters, in every op that has them."""
_ALIASED = frozenset(name for name, _ in _NUMPY_ALIASES)
_PYTHON_IN_TORCH = frozenset({"split", "norm"})
"""Ops torch writes in Python (torch.functional, torch/_tensor.py), whose signatures take no numpy names."""


def _takes_numpy_names(entry: OpEntry) -> bool:
    """Whether torch's argument parser handles the entry (nn.functional's are Python functions in torch)."""
    return entry.surface in ("torch", "Tensor", "linalg") and entry.attr not in _PYTHON_IN_TORCH
_UNSET = object()


def _later_defaults(sig: inspect.Signature, name: str) -> bool:
    """Whether every positional parameter after `name` has a default (so that `name` can take one)."""
    after = list(sig.parameters.values())
    after = after[[p.name for p in after].index(name) + 1:]
    return all(p.default is not p.empty for p in after if p.kind is p.POSITIONAL_OR_KEYWORD)


def _alias(attr: str, name: str, value: Any, default: Any, alias: str, given: Any) -> Any:
    """The value of parameter `name` given by its numpy alias; torch refuses the alias beside the name itself."""
    if value is not default:
        raise TypeError(f"{attr}() got an unexpected keyword argument '{alias}'")
    return given


def _forwarding(sig: inspect.Signature, numpy_names: bool = False) -> tuple[str, str, str, str, dict[str, Any], str]:
    """For a wrapper with `sig`: its parameter list, the positional arguments as a tuple and the keyword ones
    as a dict (for the observed path), the same as a call's arguments, the names its defaults take, and the
    lines that read `axis=`/`keepdims=` into `dim`/`keepdim` (for parameters with a default)."""
    params: list[str] = []
    args: list[str] = []
    kwargs: list[str] = []
    call: list[str] = []
    defaults: dict[str, Any] = {}
    required: list[str] = []
    for p in sig.parameters.values():
        name, default = p.name, ""
        if p.default is not p.empty:
            defaults[f"_default_{name}"] = p.default
            default = f"=_default_{name}"
        elif numpy_names and name in _ALIASED and _later_defaults(sig, name):  # required, but its alias may give it
            defaults[f"_default_{name}"] = _UNSET
            default = "=_UNSET"
            required.append(name)
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            params.append(name + default)
            args.append(name)
            call.append(name)
        elif p.kind is p.VAR_POSITIONAL:
            params.append(f"*{name}")
            args.append(f"*{name}")
            call.append(f"*{name}")
        elif p.kind is p.KEYWORD_ONLY:
            if not any(x.startswith("*") for x in params):
                params.append("*")
            params.append(name + default)
            kwargs.append(f"{name!r}: {name}")
            call.append(f"{name}={name}")
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{name}")
            kwargs.append(f"**{name}")
            call.append(f"**{name}")
        else:
            raise TypeError(f"positional-only parameter {name!r}: declare public ops without `/`")
    aliases = ""
    if numpy_names and not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        for name, alias in _NUMPY_ALIASES:
            p = sig.parameters.get(name)
            if p is None or p.kind is not p.POSITIONAL_OR_KEYWORD or alias in sig.parameters or (
                    p.default is p.empty and name not in required):
                continue
            if not any(x.startswith("*") for x in params):
                params.append("*")
            params.append(f"{alias}=_UNSET")
            aliases += (f"    if {alias} is not _UNSET:\n"
                        f"        {name} = _alias(_attr, {name!r}, {name}, _default_{name}, {alias!r}, {alias})\n")
            if name in required:
                aliases += (f"    elif {name} is _UNSET:\n"
                            f"        raise TypeError(f\"{{_attr}}() missing 1 required positional argument: "
                            f"'{name}'\")\n")
    return ", ".join(params), "(" + "".join(f"{a}, " for a in args) + ")", "{" + ", ".join(kwargs) + "}", \
        ", ".join(call), defaults, aliases


_TENSOR_PARAMS = {"matmul": ("other",), "mm": ("mat2",), "bmm": ("mat2",), "mv": ("vec",), "dot": ("tensor",),
                  "maximum": ("other",), "minimum": ("other",), "expand_as": ("other",), "view_as": ("other",),
                  "reshape_as": ("other",), "type_as": ("other",), "copy_": ("other",), "add_": ("other",),
                  "sub_": ("other",), "mul_": ("other",), "div_": ("other",), "linear": ("weight",),
                  "addmm": ("mat1", "mat2")}
"""Ops whose parameters after the first are Tensors, with torch's names for them."""
_NUMBERS_TOO = frozenset({"add_", "sub_", "mul_", "div_", "copy_"})
"""Of those, the ones that also take a number there (only None is refused)."""
_OVERLOADED = frozenset({"where", "pow", "lt", "le", "gt", "ge", "eq", "ne", "masked_fill"})
"""Ops with overloads taking numbers: torch's parser, given None, lists them all ("invalid combination")."""
_NOT_TENSOR_FIRST = frozenset({"cat", "stack", "tensor", "as_tensor", "where", "pow", "clamp", "dropout"})
"""torch functions whose first parameter is not a plain Tensor (lists, overloads with numbers)."""


_SIZE_CHECKED = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                           "binary_cross_entropy_with_logits"})
"""torch.nn.functional losses written in Python that compare `target.size()` with `input.size()` first."""
_ATEN_NAMES = {"cross_entropy": "cross_entropy_loss", "nll_loss": "nll_loss_nd"}
"""Functional ops whose parser errors name the aten op they call."""


_INPLACE_ARG = {"relu": 1, "leaky_relu": 2}
"""Functional ops whose `inplace=True` calls the in-place aten op (`relu_`), which the parser's error names: the
position of `inplace` among the arguments."""


def _check_functional_none(attr: str, args: tuple) -> None:
    """torch.nn.functional's own first failures on a None input or target (Python code before the parser)."""
    at = _INPLACE_ARG.get(attr)
    if at is not None and args and args[0] is None and len(args) > at and args[at]:
        raise TypeError(f"{attr}_(): argument 'input' (position 1) must be Tensor, not NoneType")
    if attr in _SIZE_CHECKED and None in args[:2]:
        raise AttributeError("'NoneType' object has no attribute 'size'")
    if attr in ("softmax", "log_softmax", "tanh", "sigmoid") and args and args[0] is None:  # input.<attr>(...)
        raise AttributeError(f"'NoneType' object has no attribute '{attr}'")
    if attr in _CHANNEL_DROPOUT and args and args[0] is None and _valid_p(args[1:2]):
        raise AttributeError("'NoneType' object has no attribute 'dim'")  # `inp_dim = input.dim()`, after p's check
    if attr in _ATEN_NAMES:
        for position, (value, name) in enumerate(zip(args[:2], ("input", "target"), strict=False), start=1):
            if value is None:
                raise TypeError(f"{_ATEN_NAMES[attr]}(): argument '{name}' (position {position}) must be Tensor, "
                                f"not NoneType")


_CHANNEL_DROPOUT = frozenset({"dropout1d", "dropout2d", "dropout3d"})
"""torch.nn.functional ops that check `p` and call `input.dim()` in Python: a None input fails there, with p's
ValueError first, never in the parser."""


def _valid_p(p: tuple) -> bool:
    """Whether channel dropout's `p` (given positionally, or its default 0.5) passes torch's Python range check."""
    return not p or (isinstance(p[0], (int, float)) and 0.0 <= p[0] <= 1.0)


def _after_failure(entry: OpEntry, args: tuple, seq_nr: int) -> None:
    """After an op raised: where it failed with None where torch's argument parser wants a Tensor, raise the
    parser's TypeError instead, with the thread's sequence number as it was before the call: torch refuses before
    making any node.

    Otherwise, when the op made a node before its kernel refused the call, torch had collected the node's edges
    in between: stale views among the arguments got their AsStridedBackward0 then (the engine collects edges
    after the kernel), so they get it now, in argument order."""
    try:
        _parser_errors(entry, args)
    except (TypeError, AttributeError):
        tls.seq_nr = seq_nr
        raise
    if tls.seq_nr != seq_nr:
        for a in args:
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, _Tensor) and t._view is not None and t.requires_grad:
                    t.grad_fn  # noqa: B018 - reading regenerates it


def _parser_errors(entry: OpEntry, args: tuple) -> None:
    """The parser's TypeError for a None (or another non-tensor) where a Tensor goes (`dot(): argument 'tensor'
    (position 1) must be Tensor, not NoneType`): torch checks arguments before anything else, so whatever the
    implementation met instead does not matter. Returns when no argument is at fault."""
    method = entry.surface == "Tensor"
    if entry.op in _OVERLOADED and not entry.attr.startswith("__") and any(a is None for a in args):
        got = ", ".join(type(a).__name__ for a in (args[1:] if method else args))
        raise TypeError(f"{entry.attr}() received an invalid combination of arguments - got ({got}), but expected "
                        f"one of: (see torch's overloads of {entry.attr})")
    if entry.surface == "nn.functional":
        _check_functional_none(entry.attr, args)
    function = entry.surface in ("torch", "linalg", "nn.functional")
    if function and entry.attr not in _NOT_TENSOR_FIRST and entry.attr not in _CHANNEL_DROPOUT and args and \
            args[0] is None:
        raise TypeError(f"{entry.attr}(): argument 'input' (position 1) must be Tensor, not NoneType")
    names = _TENSOR_PARAMS.get(entry.attr, ())
    for k, (name, value) in enumerate(zip(names, args[1:], strict=False), start=1):
        if isinstance(value, _Tensor) or (value is not None and (entry.attr in _NUMBERS_TOO or
                                                                 isinstance(value, (list, tuple)))):
            continue
        raise TypeError(f"{entry.attr}(): argument '{name}' (position {k if method else k + 1}) must be Tensor, "
                        f"not {type(value).__name__}")


class _Reporting(threading.local):
    active: bool = False
    """True while this thread runs (or reports) an op it will report: nested calls stay silent."""


_reporting = _Reporting()


def _call_observed(op: str, impl: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    methods = tuple(op_watchers)  # a copy: an observer may attach or detach while the op runs
    if not methods or _reporting.active:
        return impl(*args, **kwargs)
    inputs = _tensors(args) + (_tensors(kwargs.values()) if kwargs else ())
    had = [t.grad_fn for t in inputs]
    meta = _observer.tensor_meta
    before = tuple([meta(t) for t in inputs])  # before the op runs: an in-place op changes the version
    _reporting.active = True
    try:
        result = impl(*args, **kwargs)
        if result is NotImplemented:
            return result
        outputs = _tensors((result,))
        call = _observer.OpCall(op, before, tuple([meta(t) for t in outputs]), _new_node(outputs, had),
                                tls.current_node, inputs, outputs, args, kwargs or None, impl)
        for method in methods:
            method(call)
    finally:
        _reporting.active = False
    return result


def _new_node(outputs: tuple, had: list) -> Any:
    """The first output's grad_fn that no input had before the call: the node this op recorded."""
    for t in outputs:
        fn = t.grad_fn
        if fn is not None and not any(fn is g for g in had):
            return fn
    return None


def _tensors(values: Any) -> tuple:
    """The tensors among `values`, looking one level into lists and tuples (cat's list, max's pair)."""
    found = []
    for v in values:
        if isinstance(v, _Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, _Tensor))
    return tuple(found)
