"""The two tests every parity-program file runs, made once: each program runs on the engine alone, and its
description equals torch's (node names, next_functions, relative seq_nrs, order, errors, values)."""
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


def parity_tests(programs: dict[str, Callable]) -> tuple[Callable, Callable]:
    """(test_program_runs_on_engine, test_program_matches_torch) over `programs`, for a test module to bind."""

    @pytest.mark.parametrize("name", sorted(programs))
    def test_program_runs_on_engine(name: str) -> None:
        """The program runs on the engine and records events (no torch needed)."""
        assert _describe(engine, programs[name]), "the program recorded nothing"

    @pytest.mark.torch
    @pytest.mark.parametrize("name", sorted(programs))
    def test_program_matches_torch(name: str) -> None:
        """Node names, next_functions, relative seq_nrs, execution order, errors and values match torch."""
        torch = pytest.importorskip("torch")
        assert_same(_describe(engine, programs[name]), _describe(torch, programs[name]))

    return test_program_runs_on_engine, test_program_matches_torch
