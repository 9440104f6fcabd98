"""`python -m tests.fuzz.findings`: run every repro of tests/fuzz/FINDINGS.md on engine and torch and print its
first difference, or "matches torch" once its class is fixed.

Imports the engine and, through interpret.compare's helpers, torch.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable

from tests.fuzz.interpret import Difference, first_difference, import_torch, run

FINDINGS = Path(__file__).with_name("FINDINGS.md")


def snippets(text: str) -> list[tuple[str, Callable[[Any, Any], None]]]:
    """Each ```python block of `text` that defines `program(t, p)`, with its first line, compiled."""
    found = []
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        namespace: dict[str, Any] = {}
        exec(compile(block, "<FINDINGS.md>", "exec"), namespace)  # noqa: S102
        found.append((block.splitlines()[0], namespace["program"]))
    return found


def differences(text: str) -> list[tuple[str, Difference | None]]:
    """Each snippet's first line and its first difference between engine and torch (None: they match)."""
    from agdb import engine

    torch = import_torch()
    return [(head, first_difference(run(engine, fn), run(torch, fn))) for head, fn in snippets(text)]


def main() -> int:
    """Print each snippet's difference; 1 when a snippet matches torch (FINDINGS.md needs updating)."""
    results = differences(FINDINGS.read_text())
    for head, diff in results:
        print(head)
        print(f"    {diff.field} in {diff.op}" if diff else "    matches torch")
    return 1 if any(diff is None for _, diff in results) else 0


if __name__ == "__main__":
    sys.exit(main())
