"""Benchmark: lining up two traces' seq_nrs for `agdb diff` (tracer.replay.diff.align) on repetitive rows.

Run it from the repository root:

    .venv/bin/python bench/diff_align.py

The rows are the keys of a training loop's bumps: three (name, source) keys repeated, with one row changed every
500 rows on side B, the worst case for a matcher that looks for the longest matching block (every key occurs a
third of the time). `align` (Myers' diff after the common head and tail) is timed against difflib's
SequenceMatcher (autojunk off), which agdb does not use, up to 5,000 rows (it grows with the square).
"""
from __future__ import annotations

import time
from difflib import SequenceMatcher

from agdb.tracer.replay.diff import align

KEYS = [("MulBackward0", "y = y * 2"), ("AddBackward0", "y = y + 1"), ("TanhBackward0", "y = y.tanh()")]


def rows(n: int) -> tuple[list, list]:
    xs = KEYS * (n // 3)
    ys = list(xs)
    for k in range(0, len(ys), 500):
        ys[k] = ("SinBackward0", "y = y.sin()")
    return xs, ys


def main() -> None:
    print(f"{'rows':>9}  {'align':>9}  {'common':>7}  {'difflib':>9}  {'common':>7}")
    for n in (2_000, 5_000, 20_000, 200_000):
        xs, ys = rows(n)
        start = time.perf_counter()
        pairs = align(xs, ys, key=lambda r: r)
        ours = time.perf_counter() - start
        common = sum(1 for i, j in pairs if i is not None and j is not None)
        theirs = "-"
        matched = "-"
        if n <= 5_000:
            start = time.perf_counter()
            blocks = SequenceMatcher(None, xs, ys, autojunk=False).get_matching_blocks()
            theirs = f"{time.perf_counter() - start:.3f} s"
            matched = str(sum(b.size for b in blocks))
        print(f"{len(xs):>9,}  {ours:>7.3f} s  {common:>7,}  {theirs:>9}  {matched:>7}")


if __name__ == "__main__":
    main()
