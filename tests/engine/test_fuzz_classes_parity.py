"""The classes of the later fuzz campaigns on engine and on real PyTorch 2.13: graphs, seq_nrs, order, errors,
values and versions, each on both of the engine's paths."""
from __future__ import annotations

import functools

import pytest

from agdb import engine
from tests.engine import parity_fuzz_classes, parity_rare_classes
from tests.engine.parity_suite import _describe, assert_engine_matches_torch
from tests.fuzz.interpret import ONE_WAY_FLAGS

PROGRAMS = {**parity_fuzz_classes.PROGRAMS, **parity_rare_classes.PROGRAMS}


@functools.cache
def _torch_events(name: str) -> list:
    """torch's run of PROGRAMS[name], made once per process: the engine's two paths are both compared with it."""
    import torch

    return _describe(torch, PROGRAMS[name])


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("flags", [False, True], ids=["fresh process", "one-way flags on"])
def test_program_matches_torch_on_both_paths(name: str, flags: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a process has used inference_mode, saved-tensor hooks or detach_(), engine/_state's one-way flags
    switch the engine to slower paths for good; which one a program takes must not depend on what ran before it
    in the test process, and both must match torch."""
    for flag in ONE_WAY_FLAGS:
        monkeypatch.setattr(engine._state, flag, flags)
    assert_engine_matches_torch(PROGRAMS[name], lambda: _torch_events(name))


@pytest.mark.torch
@pytest.mark.xfail(strict=True, reason="a known gap (tests/fuzz/FINDINGS.md): when it passes, move it to PROGRAMS")
@pytest.mark.parametrize("name", sorted(parity_rare_classes.KNOWN_GAPS))
def test_known_gap_still_differs(name: str) -> None:
    """Each known gap's program still differs from torch; an unexpected pass fails the test (strict)."""
    pytest.importorskip("torch")
    assert_engine_matches_torch(parity_rare_classes.KNOWN_GAPS[name])
