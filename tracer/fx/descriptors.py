"""Descriptors of a joint graph's inputs and outputs (PyTorch 2.13's names; fx_utils.py reads a graph by them).

`meta["desc"]` on each placeholder is an AOTInput; the output node's `meta["desc"]` is a list with one
AOTOutput (or None) per returned value. `expr()` gives the Python expression torch 2.13 gives (measured:
`args[0]`, `self.get_parameter('lin.weight')`, `__output_tangent(output[0])`, `__grad(args[1])`).

Imports the standard library only.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any


class AOTInput:
    """Where an input of the joint graph comes from."""

    def expr(self) -> str:
        raise NotImplementedError

    def is_param(self) -> bool:
        """True for a parameter."""
        return False

    def is_buffer(self) -> bool:
        """True for a buffer."""
        return False

    def is_tangent(self) -> bool:
        """True for a tangent (the grad flowing into an output)."""
        return False

    def to_data(self) -> dict:
        """Plain data: the class name and fields."""
        return {"class": type(self).__name__, **{k: _enc(v) for k, v in self.__dict__.items()}}


class DifferentiableAOTInput(AOTInput):
    """An input that can have a gradient output (GradAOTOutput)."""


class AOTOutput:
    """Where an output of the joint graph goes."""

    def expr(self) -> str:
        raise NotImplementedError

    def is_grad(self) -> bool:
        """True for a gradient output."""
        return False

    def to_data(self) -> dict:
        """Plain data: the class name and fields."""
        return {"class": type(self).__name__, **{k: _enc(v) for k, v in self.__dict__.items()}}


class DifferentiableAOTOutput(AOTOutput):
    """An output that can have a tangent input (TangentAOTInput)."""


@dataclass(frozen=True)
class PlainAOTInput(DifferentiableAOTInput):
    """The positional argument `idx` of the traced function."""

    idx: int

    def expr(self) -> str:
        return f"args[{self.idx}]"


@dataclass(frozen=True)
class ParamAOTInput(DifferentiableAOTInput):
    """A parameter of the traced module, by its fully qualified name."""

    target: str

    def expr(self) -> str:
        return f"self.get_parameter({self.target!r})"

    def is_param(self) -> bool:
        return True


@dataclass(frozen=True)
class BufferAOTInput(DifferentiableAOTInput):
    """A buffer of the traced module, by its fully qualified name."""

    target: str

    def expr(self) -> str:
        return f"self.get_buffer({self.target!r})"

    def is_buffer(self) -> bool:
        return True


@dataclass(frozen=True)
class TangentAOTInput(DifferentiableAOTInput):
    """The tangent (incoming gradient) of output `output`."""

    output: DifferentiableAOTOutput

    def expr(self) -> str:
        return f"__output_tangent({self.output.expr()})"

    def is_tangent(self) -> bool:
        return True


@dataclass(frozen=True)
class PlainAOTOutput(DifferentiableAOTOutput):
    """The returned value at position `idx`."""

    idx: int

    def expr(self) -> str:
        return f"output[{self.idx}]"


@dataclass(frozen=True)
class GradAOTOutput(DifferentiableAOTOutput):
    """The gradient of input `grad_of`."""

    grad_of: DifferentiableAOTInput

    def expr(self) -> str:
        return f"__grad({self.grad_of.expr()})"

    def is_grad(self) -> bool:
        return True


@dataclass(frozen=True)
class InputMutationAOTOutput(DifferentiableAOTOutput):
    """The new value of an input the traced code mutated in place (returned so that autograd sees it)."""

    mutated_input: AOTInput

    def expr(self) -> str:
        return f"__input_mutation({self.mutated_input.expr()})"


@dataclass(frozen=True)
class SavedForBackwardsAOTOutput(AOTOutput):
    """An activation a forward graph of `aot_function`'s partition returns for its backward graph."""

    idx: int

    def expr(self) -> str:
        return f"__saved_for_backwards_{self.idx}"


@dataclass(frozen=True)
class OtherAOTInput(AOTInput):
    """An input descriptor of a kind agdb has no class for (tokens, RNG seeds, subclass parts): torch's class
    name and its `expr()` text, kept as they were (tracer/sources/torch/fx.py makes these)."""

    kind: str
    text: str

    def expr(self) -> str:
        return self.text


@dataclass(frozen=True)
class OtherAOTOutput(AOTOutput):
    """An output descriptor of a kind agdb has no class for: torch's class name and `expr()` text."""

    kind: str
    text: str

    def expr(self) -> str:
        return self.text


_CLASSES = {c.__name__: c for c in (PlainAOTInput, ParamAOTInput, BufferAOTInput, TangentAOTInput, PlainAOTOutput,
                                    GradAOTOutput, InputMutationAOTOutput, SavedForBackwardsAOTOutput, OtherAOTInput,
                                    OtherAOTOutput)}


def _enc(v: Any) -> Any:
    return {"desc": v.to_data()} if isinstance(v, (AOTInput, AOTOutput)) else v


def descriptor_from_data(data: dict) -> AOTInput | AOTOutput:
    """A descriptor from its plain data. Raises ValueError for an unknown class."""
    cls = _CLASSES.get(data.get("class", ""))
    if cls is None:
        raise ValueError(f"unknown descriptor class {data.get('class')!r}")
    fields = {k: descriptor_from_data(v["desc"]) if isinstance(v, dict) and "desc" in v else v
              for k, v in data.items() if k != "class"}
    return cls(**fields)


_WRAPPERS = {"__output_tangent": TangentAOTInput, "__grad": GradAOTOutput, "__input_mutation": InputMutationAOTOutput}
_LEAVES = [(re.compile(r"args\[(\d+)\]"), lambda m: PlainAOTInput(int(m[1]))),
           (re.compile(r"output\[(\d+)\]"), lambda m: PlainAOTOutput(int(m[1]))),
           (re.compile(r"self\.get_parameter\((.+)\)"), lambda m: ParamAOTInput(ast.literal_eval(m[1]))),
           (re.compile(r"self\.get_buffer\((.+)\)"), lambda m: BufferAOTInput(ast.literal_eval(m[1]))),
           (re.compile(r"__saved_for_backwards_(\d+)"), lambda m: SavedForBackwardsAOTOutput(int(m[1])))]


def _parse_expr(text: str) -> AOTInput | AOTOutput | None:
    for name, cls in _WRAPPERS.items():
        if text.startswith(name + "(") and text.endswith(")"):
            inner = _parse_expr(text[len(name) + 1:-1])
            return None if inner is None else cls(inner)  # type: ignore[arg-type]
    for pattern, make in _LEAVES:
        m = pattern.fullmatch(text)
        if m:
            try:
                return make(m)
            except (ValueError, SyntaxError):
                return None
    return None


def descriptor_from_text(data: Any, output: bool) -> AOTInput | AOTOutput | None:
    """A descriptor from the `{"class", "expr"}` text agdb keeps of torch's (tracer/sources/torch/fx_run.py), or the
    descriptor itself when it is one already: `{"class": "GradAOTOutput", "expr": "__grad(args[1])"}` ->
    GradAOTOutput(PlainAOTInput(1)). A class agdb has no class for, or an expression it does not read, becomes
    OtherAOTInput/OtherAOTOutput (`output` says which); None stays None."""
    if data is None or isinstance(data, (AOTInput, AOTOutput)):
        return data
    kind, text = str(data.get("class")), str(data.get("expr"))
    parsed = _parse_expr(text)
    if parsed is not None and type(parsed).__name__ == kind:
        return parsed
    return OtherAOTOutput(kind, text) if output else OtherAOTInput(kind, text)
