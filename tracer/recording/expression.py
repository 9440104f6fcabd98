"""Which part of a source line made a node: the column range Python recorded, and the part of it to point at.

Never imports the engine, textual or rich. The trace stores, per frame, the range of the line's stripped text
that was running when a node took its seq_nr (tracer.recording.frames.columns): for `z = (y.sin() * w).sum()` that is
`y.sin()` for SinBackward0, `y.sin() * w` for MulBackward0 and `(y.sin() * w).sum()` for SumBackward0. The
ranges nest, so each is drawn with `~` and the part that is the op itself with `^`: the method call of an
expression (`.sum()`), the operator and its right operand (`* w`), the subscript (`[0]`).
"""
from __future__ import annotations

import ast


def anchor(source: str, col: int, end_col: int) -> tuple[int, int]:
    """The op's own part of `source[col:end_col]`, as a range of `source`; the whole range when no narrower
    part applies (a plain call `torch.exp(x)`, a method of a name `y.sin()`, an expression cut at its line)."""
    segment = source[col:end_col]
    if "\n" in segment:
        return (col, end_col)
    try:
        tree = ast.parse(f"(\n{segment}\n)", mode="eval")  # parenthesised: a segment may start with spaces
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return (col, end_col)
    node = tree.body
    raw = segment.encode("utf-8")

    def char(offset: int) -> int:  # ast's columns count UTF-8 bytes
        return len(raw[:offset].decode("utf-8", errors="replace"))

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not isinstance(
            node.func.value, ast.Name):
        dot = segment.find(".", char(node.func.value.end_col_offset))
        return (col + dot, end_col) if dot >= 0 else (col, end_col)
    if isinstance(node, ast.BinOp):
        op = _first_non_space(segment, char(node.left.end_col_offset), ")")
        return (col + op, end_col)
    if isinstance(node, ast.Subscript):
        bracket = segment.find("[", char(node.value.end_col_offset))
        return (col + bracket, end_col) if bracket >= 0 else (col, end_col)
    return (col, end_col)


def _first_non_space(text: str, start: int, skip: str) -> int:
    """The first character at or after `start` that is neither a space nor one of `skip` (closing
    parentheses of the left operand)."""
    i = start
    while i < len(text) and (text[i].isspace() or text[i] in skip):
        i += 1
    return i


def carets(source: str, col: int, end_col: int) -> str:
    """The line to print under `source`: `~` under the range that ran, `^` under the op's own part, e.g.
    `     ~~~~~~~~^^^` under `z = (y.sin() * w).sum()` for the multiplication; "" when the range is unknown."""
    if not 0 <= col < end_col <= len(source):
        return ""
    start, end = anchor(source, col, end_col)
    marks = "".join("^" if start <= i < end else "~" for i in range(col, end_col))
    return " " * col + marks
