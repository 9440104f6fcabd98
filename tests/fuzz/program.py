"""A fuzz program as plain data (statements of op name, references, constants and flags) and its Python source.

A statement's `text` is Python with `{0}`, `{1}`... for the variables it reads and `{out0}`, ... for those it
defines; rendering substitutes the names, wraps the statement in its grad-mode block and in `p.attempt`
(so an exception is recorded, not raised), and records what it made with `p.made`. The rendered source is
what runs (interpret.py executes it), so the snippet a developer reads is exactly the program that differed.

Imports only the standard library.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

INDENT = "    "


@dataclass(frozen=True)
class Stmt:
    """One statement: `kind` is its family (unary, view, backward...), `op` the op it exercises."""

    kind: str
    op: str
    text: str
    refs: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    """The type of each output as the generator believed it ("f64[2, 3]"), for the shrinker's substitutions."""
    made: tuple[str, ...] = ()
    """What `p.made` records after the statement (its tensor outputs, or the tensor it modified), written
    like the text ("{out0}", "{0}")."""
    quiet: tuple[str, ...] = ()
    """Tensors recorded by `p.value` instead of `p.made` (their `_version` and seq_nr not compared): only
    when the generator leaves out a known gap about them. Written like `made`."""
    grad_of: tuple[str, ...] = ()
    """Tensors whose `.grad` every later backward records (a leaf that requires grad, a module's
    parameters, a tensor that retains its grad), written like the text."""
    data: Any = None
    """A leaf's values (nested lists); `{data}` in the text."""
    mode: str | None = None
    """A grad-mode block around the statement: "no_grad", "inference_mode" or "enable_grad"."""
    anomaly: bool = False
    """Run the statement under `autograd.detect_anomaly()`."""
    helper: str | None = None
    """A helper class (custom Function, Module) the statement uses; its definition opens the program."""


@dataclass(frozen=True)
class Program:
    """A seeded program: its statements, and whether it ends by recording every variable and leaf grad."""

    seed: int
    stmts: tuple[Stmt, ...]
    end: bool = True
    notes: tuple[str, ...] = field(default=())
    """The known-gap constructs (KNOWN_GAPS keys) the program uses."""

    def without(self, drop: set[int]) -> Program:
        """The program minus statements `drop` and every statement that reads what they defined."""
        gone: set[str] = set()
        kept = []
        for i, s in enumerate(self.stmts):
            if i in drop or gone.intersection(s.refs):
                gone.update(s.outs)
                continue
            kept.append(s)
        return replace(self, stmts=tuple(kept))


def grad_holders(stmts: tuple[Stmt, ...] | list[Stmt]) -> list[str]:
    """The expressions whose `.grad` a backward records, in the order the statements declared them."""
    names = [_fill(g, s) for s in stmts for g in s.grad_of]
    return list(dict.fromkeys(names))


def _fill(template: str, s: Stmt, **extra: str) -> str:
    return template.format(*s.refs, **{f"out{k}": o for k, o in enumerate(s.outs)}, **extra)


def render(program: Program, bare: set[int] | None = None, name: str = "program") -> str:
    """The program as the source of `def name(t, p)`; statements in `bare` are not wrapped in p.attempt."""
    bare = bare or set()
    lines = [f"def {name}(t, p):"]
    helpers = list(dict.fromkeys(s.helper for s in program.stmts if s.helper))
    for h in helpers:
        lines += [INDENT + line for line in HELPERS[h].splitlines()]
    for i, s in enumerate(program.stmts):
        lines += _stmt_lines(s, i, program.stmts[:i], i in bare)
    if program.end:
        lines += _end_lines(program)
    if len(lines) == 1:
        lines.append(INDENT + "pass")
    return "\n".join(lines) + "\n"


def _stmt_lines(s: Stmt, i: int, before: tuple[Stmt, ...], bare: bool) -> list[str]:
    grads = "(" + "".join(f"{g}.grad, " for g in grad_holders(before)) + ")"
    body = _fill(s.text, s, grads=grads, data=_literal(s.data), tag=f"s{i}").splitlines()
    if s.made:
        body.append(f'p.made("s{i}", {", ".join(_fill(m, s) for m in s.made)})')
    if s.quiet:
        body.append(f'p.value("s{i}", ({"".join(_fill(m, s) + ", " for m in s.quiet)}))')
    if s.kind != "leaf" and not bare:
        body = [f'with p.attempt("s{i} {s.op}"):'] + [INDENT + line for line in body]
    if s.anomaly:
        body = ["with t.autograd.detect_anomaly():"] + [INDENT + line for line in body]
    if s.mode:
        body = [f"with t.{s.mode}():"] + [INDENT + line for line in body]
    return [INDENT + line for line in body]


def _end_lines(program: Program) -> list[str]:
    quiet = {_fill(m, s) for s in program.stmts for m in s.quiet}
    tensors = [o for s in program.stmts for o, ty in zip(s.outs, s.types, strict=True)
               if ty.startswith(("f", "i", "b"))]
    grads = grad_holders(program.stmts)
    body = []
    if [o for o in tensors if o not in quiet]:
        body.append(f'p.made("end", {", ".join(o for o in tensors if o not in quiet)})')
    if [o for o in tensors if o in quiet]:
        body.append(f'p.value("end quiet", ({"".join(o + ", " for o in tensors if o in quiet)}))')
    if grads:
        body.append(f'p.value("end grads", ({"".join(f"{g}.grad, " for g in grads)}))')
    if not body:
        return []
    return [INDENT + 'with p.attempt("end"):'] + [INDENT * 2 + line for line in body]


def _literal(data: Any) -> str:
    if isinstance(data, float):
        return repr(round(data, 4))
    if isinstance(data, list):
        return "[" + ", ".join(_literal(x) for x in data) + "]"
    return repr(data)


HELPERS: dict[str, str] = {
    "ScaleMul": '''class ScaleMul(t.autograd.Function):
    """Two outputs (x * alpha + y, x * y) and two non-tensor arguments."""
    @staticmethod
    def forward(ctx, x, y, alpha, square):
        ctx.save_for_backward(x, y)
        ctx.alpha, ctx.square = alpha, square
        prod = x * y
        return x * alpha + y, (prod * prod if square else prod)

    @staticmethod
    def backward(ctx, g_lin, g_prod):
        x, y = ctx.saved_tensors
        factor = 2 * x * y if ctx.square else 1
        return g_lin * ctx.alpha + g_prod * factor * y, g_lin + g_prod * factor * x, None, None''',
    "Clip": '''class Clip(t.autograd.Function):
    """A straight-through clamp with a non-tensor bound; its second output is non-differentiable."""
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        mask = x.abs() > bound
        ctx.mark_non_differentiable(mask)
        return x.clamp(-bound, bound), mask

    @staticmethod
    def backward(ctx, grad, grad_mask):
        return grad * 0.5, None''',
    "Cube": '''class Cube(t.autograd.Function):
    """x ** 3 with setup_context and a double-differentiable backward written in ops."""
    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * 3 * x ** 2''',
    "OnceExp": '''class OnceExp(t.autograd.Function):
    """exp with a once_differentiable backward."""
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @t.autograd.function.once_differentiable
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * y''',
}
"""Definitions a program opens with, by name: each is written once and used by any number of statements."""
