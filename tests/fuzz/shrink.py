"""Reduce a program that differs to a minimal one with the same difference, and print it as a repro.

"The same difference" is the same signature: the first differing field and the op of the statement where
it shows (Difference.signature). The reduction cuts everything after that statement, then runs delta
debugging over statements (removing a statement removes what reads its outputs), then simplifies: grad-mode
and anomaly blocks off, a read replaced by an earlier variable of the same type (which frees the
statements in between), leaf values made plain; and repeats while anything shrinks.

Imports the standard library and the fuzz package only; the comparison is passed in.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from tests.fuzz.interpret import Difference
from tests.fuzz.program import Program, Stmt, render

Oracle = Callable[..., "Difference | None"]
"""compare(program, bare=frozenset()): the first difference of a program, or None."""


class _Budget:
    """Counts oracle calls; a shrink stops improving once it is spent."""

    def __init__(self, differs: Oracle, signature: tuple[str, str], calls: int) -> None:
        self.differs, self.signature, self.left = differs, signature, calls

    def keeps(self, program: Program) -> bool:
        """Whether `program` still shows the same difference."""
        if self.left <= 0:
            return False
        self.left -= 1
        d = self.differs(program)
        return d is not None and d.signature == self.signature


def shrink(program: Program, differs: Oracle, calls: int = 600) -> tuple[Program, Difference]:
    """The smallest program found that keeps `program`'s difference, and that difference."""
    first = differs(program)
    if first is None:
        raise ValueError("the program does not differ: nothing to shrink")
    budget = _Budget(differs, first.signature, calls)
    current = _truncate(program, first, budget)
    while True:
        size = _size(current)
        current = _ddmin(current, budget)
        current = _simplify(current, budget)
        if _size(current) >= size or budget.left <= 0:
            break
    current = renumber(current)
    final = differs(current)
    assert final is not None and final.signature == first.signature, "renaming changed the difference"
    return current, final


def _size(p: Program) -> tuple[int, int]:
    return len(p.stmts), len(render(p))


def _truncate(program: Program, first: Difference, budget: _Budget) -> Program:
    """Drop the statements after the one where the difference shows, and the end block if it is not there."""
    if first.stmt < 0:
        return program
    cut = replace(program, stmts=program.stmts[: first.stmt + 1], end=False)
    return cut if budget.keeps(cut) else program


def _ddmin(program: Program, budget: _Budget) -> Program:
    """Delta debugging: remove chunks of statements (and their readers) while the difference stays."""
    n = 2
    while len(program.stmts) >= 2 and budget.left > 0:
        chunks = _chunks(len(program.stmts), n)
        for chunk in chunks:
            candidate = program.without(set(chunk))
            if len(candidate.stmts) < len(program.stmts) and budget.keeps(candidate):
                program = candidate
                n = max(n - 1, 2)
                break
        else:
            if n >= len(program.stmts):
                break
            n = min(n * 2, len(program.stmts))
    return program


def _chunks(length: int, n: int) -> list[range]:
    size = -(-length // n)
    return [range(i, min(i + size, length)) for i in range(0, length, size)]


def _simplify(program: Program, budget: _Budget) -> Program:
    for step in (_plain_modes, _substitute_reads, _plain_data):
        program = step(program, budget)
    if program.end:
        candidate = replace(program, end=False)
        if budget.keeps(candidate):
            program = candidate
    return program


def _with_stmt(program: Program, i: int, stmt: Stmt) -> Program:
    return replace(program, stmts=program.stmts[:i] + (stmt,) + program.stmts[i + 1:])


def _plain_modes(program: Program, budget: _Budget) -> Program:
    """Statements out of their no_grad / inference_mode / anomaly blocks."""
    for i, s in enumerate(program.stmts):
        if s.mode or s.anomaly:
            candidate = _with_stmt(program, i, replace(s, mode=None, anomaly=False))
            if budget.keeps(candidate):
                program = candidate
    return program


def _substitute_reads(program: Program, budget: _Budget) -> Program:
    """Each read of a variable replaced by an earlier variable of the same type, leaves first."""
    for i in range(len(program.stmts)):
        s = program.stmts[i]
        for j, ref in enumerate(s.refs):
            for other in _same_type_before(program, i, ref):
                refs = s.refs[:j] + (other,) + s.refs[j + 1:]
                candidate = _with_stmt(program, i, replace(s, refs=refs))
                if budget.keeps(candidate):
                    program, s = candidate, candidate.stmts[i]
                    break
    return program


def _same_type_before(program: Program, i: int, ref: str) -> list[str]:
    types = {o: ty for s in program.stmts[:i] for o, ty in zip(s.outs, s.types, strict=True)}
    want = types.get(ref)
    if want is None or not want.startswith("f"):
        return []
    leaves = {s.outs[0] for s in program.stmts[:i] if s.kind == "leaf"}
    names = [o for o, ty in types.items() if ty == want and o != ref]
    return sorted(names, key=lambda o: (o not in leaves, list(types).index(o)))[:4]


def _plain_data(program: Program, budget: _Budget) -> Program:
    """Leaf values replaced by 1.0, 2.0, 3.0, ... (signs kept), else rounded to one decimal."""
    for i, s in enumerate(program.stmts):
        if s.kind != "leaf" or s.data is None:
            continue
        for simpler in (_counting(s.data), _rounded(s.data)):
            if simpler != s.data and budget.keeps(_with_stmt(program, i, replace(s, data=simpler))):
                program = _with_stmt(program, i, replace(s, data=simpler))
                break
    return program


def _counting(data, start: list | None = None):
    start = start if start is not None else [0]
    if isinstance(data, list):
        return [_counting(x, start) for x in data]
    start[0] += 1
    return float(start[0]) if data > 0 else -float(start[0])


def _rounded(data):
    if isinstance(data, list):
        return [_rounded(x) for x in data]
    return round(data, 1) or 0.5


def renumber(program: Program) -> Program:
    """Variables renamed in order of definition (v1, v2, ...; m, o, h keep their letter)."""
    names: dict[str, str] = {}
    stmts = []
    for s in program.stmts:
        refs = tuple(names.get(r, r) for r in s.refs)
        outs = []
        for o in s.outs:
            names[o] = f"{o[0]}{len(names) + 1}"
            outs.append(names[o])
        stmts.append(replace(s, refs=refs, outs=tuple(outs)))
    return replace(program, stmts=tuple(stmts))


def readable(program: Program, diff: Difference, differs: Oracle) -> frozenset[int]:
    """The statements that may go without their p.attempt block and still show the difference's field:
    all but the differing one, when that works."""
    bare = frozenset(i for i in range(len(program.stmts)) if i != diff.stmt)
    d = differs(program, bare=bare)
    return bare if d is not None and d.field == diff.field else frozenset()


def repro(program: Program, diff: Difference, bare: frozenset[int] = frozenset()) -> str:
    """The minimal program as a commented snippet to paste into a parity program file."""
    head = [f"# fuzz seed {program.seed}: {diff.field} differs in {diff.op} (s{diff.stmt})" if diff.stmt >= 0 else
            f"# fuzz seed {program.seed}: {diff.field} differs in the end block",
            f"#   engine: {_one_line(diff.engine)}", f"#   torch:  {_one_line(diff.torch)}"]
    helpers = [s.helper for s in program.stmts if s.helper]
    if helpers:
        head.append("# (the helper classes are defined inside the program so that `t` is the module under test)")
    return "\n".join(head) + "\n" + render(program, bare=set(bare))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) < 300 else text[:300] + "..."
