"""README.md answers what a newcomer asked before running anything: which `agdb` to type, how long the two make
commands take, and how much memory the largest tests need; and it stays within its 300 lines."""
from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_says_how_to_run_agdb_and_what_the_make_commands_cost():
    assert ".venv/bin/agdb" in README and "source .venv/bin/activate" in README
    assert re.search(r"first `make demo` takes about [^.]*minute", README)
    assert re.search(r"`make test`\s+takes [^.]*minutes", README)
    assert re.search(r"deepest test.{0,200}?GB of memory", README, re.S)


def test_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300
