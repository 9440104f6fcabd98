"""`agdb show`'s long lists (NOTE [show's long lists] in app/show.py): a table of many rows and a long line are laid
out by agdb exactly as Rich lays them out (Rich itself is the reference here), and a list of many rows prints whole."""
from __future__ import annotations

import io
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agdb.app import show
from agdb.app.show import print_line, print_table

NAMES = ["MulBackward0 seq 12", "AccumulateGrad fc1.weight", "x", "", "[x.]", "[bold]not markup[/]", "名前の長いノード",
         "a" * 150, "SumBackward0 seq 123456789", "  spaced  ", "… 3 more"]


def _console(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)


def _rich_table(headers, rows, caption, width: int) -> str:
    out = _console(width)
    table = Table()
    for h in headers:
        table.add_column(h)
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    table.caption = caption
    out.print(table)
    return out.file.getvalue()


def _ours(draw, width: int) -> str:
    out = _console(width)
    draw(out)
    return out.file.getvalue()


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.tuples(*[st.sampled_from(NAMES)] * 3), min_size=1, max_size=12),
       st.sampled_from([None, "… 1,234 more", "head first: largest depth, then largest seq_nr; … 7 more"]),
       st.integers(min_value=0, max_value=3), st.sampled_from([60, 120, 400]))
def test_a_long_table_is_drawn_as_rich_draws_it(cells, caption, pad, width):
    """A table past FAST_ROWS rows, laid out by agdb, is the text Rich's Table gives for the same cells, caption
    included, whenever that fits the console; a wider one keeps each row on one line where Rich wraps cells."""
    headers = ("node", "to go", "id" + " " * pad)
    rows = [tuple(r) for r in cells]
    expected = _rich_table(headers, rows, caption, width)
    fast = show.FAST_ROWS
    show.FAST_ROWS = 0  # every table takes agdb's own path
    try:
        got = _ours(lambda out: print_table(out, headers, rows, caption), width)
    finally:
        show.FAST_ROWS = fast
    natural = max(map(len, _rich_table(headers, rows, None, 10_000).splitlines()))
    if natural <= width:
        assert got == expected
    else:
        body = [line for line in got.splitlines() if line.startswith("│")]
        assert len(body) == len(rows) and all(len(line) == natural for line in body if line.isascii())


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(NAMES), min_size=1, max_size=60), st.sampled_from([20, 40, 80, 97, 200]),
       st.sampled_from([" → ", " ", "  ", "→"]))
def test_a_long_line_is_wrapped_as_rich_wraps_it(names, width, sep):
    """A long line of names, wrapped by agdb, is the text Rich's Console gives for it at the same width: words
    moved whole to the next line, names wider than the console folded, spaces at a line's end as Rich keeps them."""
    text = "  graph task 1: " + sep.join(names)
    expected = _ours(lambda out: out.print(Text(text)), width)
    fast = show.FAST_LINE
    show.FAST_LINE = 0
    try:
        got = _ours(lambda out: print_line(out, text), width)
    finally:
        show.FAST_LINE = fast
    assert got == expected


def test_long_lists_print_whole():
    """A table of 300,000 rows and a line of 200,000 names are printed whole, each row on its line and no line past
    the width (their speed, minutes with Rich before, is bench/show.py's)."""
    rng = random.Random(0)
    rows = [(f"MulBackward0 seq {i}", str(rng.randrange(5)), f"{i}") for i in range(300_000)]
    out = _console(80)
    print_table(out, ("node", "to go", "id"), rows, "… 5 more")
    text = out.file.getvalue()
    assert text.count("\n") == 300_000 + 5 and "│ MulBackward0 seq 299999 │" in text
    names = [f"SinBackward0 seq {i}" for i in range(200_000)]
    out = _console(80)
    print_line(out, " → ".join(names))
    lines = out.file.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and " ".join(lines).count("SinBackward0") == 200_000
