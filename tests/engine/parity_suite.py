"""The test every parity-program file runs, made once: each program runs once on the engine and once on torch,
and the two descriptions are equal (node names, next_functions, relative seq_nrs, order, errors, values)."""
from __future__ import annotations

import warnings
from typing import Any, Callable

import pytest

from agdb import engine
from tests.engine.parity import assert_same, describe


def _describe(module: Any, program: Callable) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return describe(module, program)


def assert_engine_matches_torch(program: Callable, torch_events: Callable[[], list] | None = None) -> None:
    """Run `program` on the engine, then compare with torch's run (`torch_events()` when given, for a caller that
    keeps torch's run of a program it compares more than once). Without torch, the engine's run alone is checked
    (it raises nothing the program does not catch, and records events) and the comparison is skipped."""
    ours = _describe(engine, program)
    assert ours, "the program recorded nothing"
    torch = pytest.importorskip("torch", reason="torch is not installed: the program ran on the engine only")
    assert_same(ours, torch_events() if torch_events is not None else _describe(torch, program))


def parity_tests(programs: dict[str, Callable]) -> Callable:
    """test_program_matches_torch over `programs`, for a test module to bind."""

    @pytest.mark.torch
    @pytest.mark.parametrize("name", sorted(programs))
    def test_program_matches_torch(name: str) -> None:
        """The program runs on the engine, and node names, next_functions, relative seq_nrs, execution order,
        errors and values match torch."""
        assert_engine_matches_torch(programs[name])

    return test_program_matches_torch
