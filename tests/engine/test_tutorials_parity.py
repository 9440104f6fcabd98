"""The tutorials' programs (parity_tutorials.py) on engine and on real PyTorch 2.13: graphs, seq_nrs, order,
errors and values agree."""
from __future__ import annotations

import warnings

import pytest

import engine
from tests.engine.parity import assert_same, describe
from tests.engine.parity_tutorials import PROGRAMS


def _describe(module, program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return describe(module, program)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_on_engine(name):
    """Every parity program runs on the engine and records events (no torch needed)."""
    events = _describe(engine, PROGRAMS[name])
    assert events, "the program recorded nothing"


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_torch(name):
    """Node names, next_functions, relative seq_nrs, execution order, errors and values match torch."""
    torch = pytest.importorskip("torch")
    theirs = _describe(torch, PROGRAMS[name])
    ours = _describe(engine, PROGRAMS[name])
    assert_same(ours, theirs)
