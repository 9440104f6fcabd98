"""Reading `agdb show`'s text back in tests: the tables it prints under a heading, as rows of cells."""
from __future__ import annotations


def table(out: str, heading: str) -> list[list[str]]:
    """The rows of the table printed right under the line `heading` (its cells stripped); [] when there is none."""
    lines = out.splitlines()
    if heading not in lines:
        return []
    rows = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip().strip("│").split("│")])
        elif not line.startswith(("┏", "┃", "┡", "├")):
            break
    return rows
