"""What the line tracer reads from a code object's bytecode, once per code (NOTE [line culprits] in lines.py): each
line's names and in-place call, the lines that run with the mode, and the instruction each line entry's increments
are put on (NOTE [columns on lines]).

Imports torch's modules only as sys.modules has them; never textual or rich.
"""
from __future__ import annotations

import bisect
import dis
import sys
import weakref
from typing import Any, Callable, NamedTuple

_NAMES = frozenset(("STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF", "LOAD_FAST", "LOAD_NAME",
                    "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLOSURE"))
_METHODS = frozenset(("LOAD_METHOD", "LOAD_ATTR"))
_VIEW_OPS = frozenset((
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "ravel", "transpose", "t", "T", "mT", "H",
    "mH", "adjoint", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "squeeze", "unsqueeze", "expand",
    "expand_as", "broadcast_to", "narrow", "select", "split", "split_with_sizes", "tensor_split", "chunk",
    "unbind", "hsplit", "vsplit", "dsplit", "diagonal", "as_strided", "unfold", "real", "imag", "view_as_real",
    "view_as_complex", "detach", "alias", "indices", "values", "contiguous", "data", "__getitem__"))
"""Names of torch calls that may return a view (a line calling one is seen through the mode)."""
_MODE_OPS = frozenset(("BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR"))


class LineTable(NamedTuple):
    """A code object's lines, as the line tracer reads them."""

    starts: list  # the bytecode offsets where co_lines' ranges begin
    linenos: list  # their line numbers
    facts: dict  # line -> (names it stores or reads, the node its one in-place call hides, or "")
    culprit_at: dict  # offset -> the instruction its increments are put on (NOTE [columns on lines])
    mode_offsets: frozenset  # line starts that run with the mode (views, renumbering)
    opcode_offsets: frozenset  # offsets a line is entered at with several culprit instructions after
    last_culprits: frozenset  # each line's last culprit instruction: opcode events stop there
    renumber_offsets: frozenset  # line starts of lines that call _set_sequence_nr (NOTE [renumbered nodes])
    special_offsets: frozenset  # mode_offsets and opcode_offsets: a code with none is traced the plain way


class CodeLines:
    """Each code object's table and lines, once per code, shared by every thread's line tracer.

    NOTE [code keys]
    Hashing a code object hashes its bytecode and constants (~1 µs for a large function), so the caches are keyed by
    id(code), and every code object keyed is held in `_codes` so that no id is reused."""

    def __init__(self, frame_row: Callable[[Any, int, int], int]) -> None:
        self._frame_row = frame_row  # Forward.frame_row: the frame row of (code, culprit offset, line)
        self._codes: list = []
        self._tables: dict[int, LineTable] = {}
        # id(code) -> (bytecode offset -> (frame row, names, in-place op), whether its frames' locals are a snapshot)
        self.by_code: dict[int, tuple[dict[int, tuple], bool]] = {}

    def table(self, code: Any) -> LineTable:
        table = self._tables.get(id(code))
        if table is None:
            table = _TABLES.get(code)
            if table is None:
                table = _TABLES[code] = code_table(code)
            self._tables[id(code)] = table
            self._codes.append(code)
        return table

    def lines_of(self, code: Any) -> tuple[dict[int, tuple], bool]:
        """`code`'s lines as `line` fills them, and whether its frames' locals are a snapshot (a function's: NOTE
        [stale locals] in lines.py); the same objects on every call (NOTE [per-code tracers] in lines.py)."""
        got = self.by_code.get(id(code))
        if got is None:
            self.table(code)
            got = self.by_code[id(code)] = ({}, bool(code.co_flags & _CO_OPTIMIZED))
        return got

    def line(self, code: Any, lasti: int) -> tuple:
        """(frame row, names the line stores or reads, the hidden node's name for its in-place call or "") of the line
        that holds bytecode offset `lasti`, once per offset."""
        offsets = self.lines_of(code)[0]
        got = offsets.get(lasti)
        if got is None:
            starts, linenos, facts, culprit_at = self.table(code)[:4]
            i = bisect.bisect_right(starts, lasti) - 1
            lineno = linenos[i] if i >= 0 else code.co_firstlineno
            stored, inplace = facts.get(lineno, ((), ""))
            got = offsets[lasti] = (self._frame_row(code, culprit_at.get(lasti, -1), lineno), stored, inplace)
        return got


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Code object -> its LineTable, across recordings: reading the bytecode of the bench's five-line chain function
takes ~0.27 ms, what its plain forward spends on about 150 nodes. A table depends on the code's content only (equal
code objects get equal tables) and is never changed."""
NO_LINES: tuple[dict, bool] = ({}, False)
"""The lines of no frame (the line tracer's `where` before any user frame ran); never filled."""
_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, whose f_locals is a snapshot


def code_table(code: Any) -> LineTable:
    """What the line tracer needs to know of a code object's lines, read from its bytecode once."""
    starts, linenos = [], []
    for begin, _end, lineno in code.co_lines():
        if lineno is not None:
            starts.append(begin)
            linenos.append(lineno)
    renumbering: set[int] = set()
    stores: dict[int, list[str]] = {}
    methods: dict[int, set[str]] = {}
    viewing: set[int] = set()
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        if ins.positions is not None and ins.positions.lineno is not None:
            line = ins.positions.lineno
        if ins.opname in _NAMES and isinstance(ins.argval, str):
            stores.setdefault(line, []).append(ins.argval)
        if ins.opname in _MODE_OPS or (ins.opname == "BINARY_OP" and ins.argrepr.endswith("=")):
            viewing.add(line)
        elif (ins.opname in _METHODS or ins.opname == "LOAD_GLOBAL") and isinstance(ins.argval, str):
            op = ins.argval
            if op == "_set_sequence_nr":  # NOTE [renumbered nodes] in renumbered.py
                renumbering.add(line)
                viewing.add(line)
            elif op in _VIEW_OPS:
                viewing.add(line)
            elif op.endswith("_") and not op.startswith("_"):
                methods.setdefault(line, set()).add(op)
                viewing.add(line)
    if _made_by_dynamo(code):  # NOTE [compile time]: its subscripts are Dynamo's, and the mode must not
        viewing.clear()        # come and go on the stack while Dynamo compiles what this code calls
    culprit_at, ambiguous, last = _culprit_instructions(code, starts, linenos)
    facts = {}
    for line in set(stores) | set(methods):
        ops = methods.get(line, set())
        facts[line] = (tuple(dict.fromkeys(stores.get(line, ()))),
                       _hidden_name(next(iter(ops))) if len(ops) == 1 else "")
    mode_offsets = frozenset(b for b, ln in zip(starts, linenos, strict=True) if ln in viewing)
    return LineTable(starts, linenos, facts, culprit_at, mode_offsets, ambiguous, last,
                     frozenset(b for b, ln in zip(starts, linenos, strict=True) if ln in renumbering),
                     mode_offsets | ambiguous)
_CULPRITS = frozenset((
    "CALL", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR", "STORE_SUBSCR", "DELETE_SUBSCR", "COMPARE_OP",
    "CONTAINS_OP", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT", "LOAD_ATTR", "STORE_ATTR",
    "GET_ITER", "FOR_ITER", "UNPACK_SEQUENCE", "UNPACK_EX", "LIST_EXTEND", "BEFORE_WITH", "DICT_MERGE"))
"""Instructions that may run a torch op (a call, an operator, a property such as `.T`, iterating a tensor)."""


def _culprit_instructions(code: Any, starts: list, linenos: list) -> tuple[dict[int, int], frozenset, frozenset]:
    """NOTE [columns on lines]
    The engine puts on a node the column range of the bytecode its user frame ran when the node took its number
    (`co_positions`, tracer.recording.frames.columns); the line tracer sees an increment only at the next event,
    when the frame has moved on. So each offset a line is entered at (its first instruction, or a loop's jump
    target) is mapped to the one instruction that may run a torch op between it and the line's end, when there is
    one (`h = h.tanh()`: its call; a `for` header entered again at FOR_ITER). Where there are several
    (`(x.sin() * w).sum()`), the line is entered with opcode events on (`f_trace_opcodes`), whose every event
    moves `where` to the instruction about to run: an increment seen at the next event is that instruction's; they
    are turned off at the line's last such instruction, whose numbers the next event sees. Returns (offset -> the
    culprit instruction's offset, for the offsets with one or whose own instruction is one; the offsets that need
    opcode events; each line's last culprit instruction)."""
    instructions = [(ins.offset, ins.opname) for ins in dis.get_instructions(code)]
    culprit_at: dict[int, int] = {}
    ambiguous = set()
    line_of = [linenos[bisect.bisect_right(starts, offset) - 1] if offset >= starts[0] else -1
               for offset, _ in instructions] if starts else [-1] * len(instructions)
    last = set()
    nearest, count, line = -1, 0, None
    for i in range(len(instructions) - 1, -1, -1):  # backwards: what follows each offset within its line
        offset, name = instructions[i]
        if line_of[i] != line:
            nearest, count, line = -1, 0, line_of[i]
        if name in _CULPRITS:
            if not count:
                last.add(offset)
            nearest, count = offset, count + 1
        if count == 1 or name in _CULPRITS:
            culprit_at[offset] = nearest if count == 1 else offset
        if count > 1:
            ambiguous.add(offset)
    return culprit_at, frozenset(ambiguous), frozenset(last)


def _made_by_dynamo(code: Any) -> bool:
    """Whether `code` is bytecode Dynamo wrote (a compiled frame's, a resume function's): it keeps the user's file
    and line numbers, so its lines still take the user's increments, but its instructions are Dynamo's."""
    codes = getattr(sys.modules.get("torch._dynamo.convert_frame"), "output_codes", None)  # None: not imported yet
    return codes is not None and code in codes


def _hidden_name(op: str) -> str:
    """The node an in-place op on a view makes and hides inside CopySlices: `mul_` -> MulBackward0."""
    return "".join(part.capitalize() for part in op.strip("_").split("_")) + "Backward0"
