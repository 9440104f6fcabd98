"""Saved tensors on engine and on real PyTorch 2.13: the programs of parity_saved.py, and every program of the other
parity files run under logging saved_tensors_hooks and with every watched node's saved attributes recorded."""
from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

import engine
from tests.engine.parity import assert_same, describe
from tests.engine.parity_saved import PROGRAMS, under_saved_tensor_hooks, with_saved_attributes
from tests.engine.parity_suite import parity_tests

test_program_runs_on_engine, test_program_matches_torch = parity_tests(PROGRAMS)


def _parity_modules() -> list:
    """Every parity program file of tests/engine (a parity_*.py with a PROGRAMS dict) but this sweep's own."""
    modules = [importlib.import_module(f"tests.engine.{path.stem}")
               for path in sorted(Path(__file__).parent.glob("parity_*.py")) if path.stem != "parity_saved"]
    return [m for m in modules if isinstance(getattr(m, "PROGRAMS", None), dict)]


OTHER_PROGRAMS: dict[str, Callable] = {
    f"{module.__name__.rsplit('.', 1)[-1]}:{name}": fn
    for module in _parity_modules()
    for name, fn in module.PROGRAMS.items()
}

_PACKED_BEFORE_THE_KERNEL = ("torch packs an op's inputs before its kernel checks them; the engine checks shapes "
                             "first, so a failing op packs nothing")
_LAYER_NORM_ORDER = ("NativeLayerNormBackward0 (engine/_ops/nn_extra.py, owned elsewhere) lists its saved tensors "
                     "input, weight, bias, where torch saves (and packs) bias, input, weight")
HOOK_GAPS = {
    "parity_programs:bad_input": _PACKED_BEFORE_THE_KERNEL,
    "parity_programs:failing_ops_take_seq_nrs": _PACKED_BEFORE_THE_KERNEL,
    "parity_surface:surface_errors": _PACKED_BEFORE_THE_KERNEL,
    "parity_nn:nn_errors": _PACKED_BEFORE_THE_KERNEL,
    **{f"parity_nn:{name}": _LAYER_NORM_ORDER for name in (
        "nn_layer_norm", "nn_layer_norm_3d_affine", "nn_layer_norm_input_only", "nn_layer_norm_weight_no_input",
        "nn_module_chain")},
}
"""Programs whose pack/unpack log differs from torch's, and why (strict: fixing one makes its test fail)."""

_NN_EXTRA_VALUES = ("the nodes of engine/_ops/nn_extra.py (owned elsewhere) do not declare their non-tensor saved "
                    "values (_saved_reduction, _saved_approximate, ...) nor the tensors torch saves as None "
                    "(_saved_weight) yet")
NODES_WITHOUT_SAVED_VALUES = frozenset({
    "GeluBackward0", "GeluBackwardBackward0", "NativeLayerNormBackward0", "NativeLayerNormBackwardBackward0",
    "EmbeddingBackward0", "EmbeddingDenseBackwardBackward0", "NllLossBackward0", "NllLossBackwardBackward0",
    "BinaryCrossEntropyWithLogitsBackward0"})
"""Node names whose saved attributes differ from torch's for that reason (_NN_EXTRA_VALUES)."""


def _describe(module: Any, program: Callable) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return describe(module, program)


def _with_gaps(names: list[str], gaps: dict[str, str]) -> list:
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=gaps[n])) if n in gaps else n
            for n in names]


@pytest.mark.torch
@pytest.mark.parametrize("name", _with_gaps(sorted(OTHER_PROGRAMS), HOOK_GAPS))
def test_program_matches_torch_under_saved_tensor_hooks(name: str) -> None:
    """Every parity program under logging saved_tensors_hooks: the same pack and unpack calls, in the same order,
    with the same tensors and grad mode, and otherwise the same events as torch."""
    torch = pytest.importorskip("torch")
    program = under_saved_tensor_hooks(OTHER_PROGRAMS[name])
    assert_same(_describe(engine, program), _describe(torch, program))


def _known_gaps_removed(events: list) -> list:
    return [e for e in events if not (e[0] == "saved" and e[2] in NODES_WITHOUT_SAVED_VALUES)]


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(OTHER_PROGRAMS))
def test_program_nodes_save_what_torch_saves(name: str) -> None:
    """Every node a parity program watches has torch's `_saved_*` / `_raw_saved_*` attributes (dir()), reading the
    same values, types and errors (saved tensors by shape, dtype and history)."""
    torch = pytest.importorskip("torch")
    program = with_saved_attributes(OTHER_PROGRAMS[name])
    assert_same(_known_gaps_removed(_describe(engine, program)), _known_gaps_removed(_describe(torch, program)))


@pytest.mark.torch
@pytest.mark.xfail(strict=True, reason=_NN_EXTRA_VALUES)
def test_nn_extra_nodes_save_what_torch_saves() -> None:
    """The nodes left out above, on programs that make each of them: still different from torch."""
    torch = pytest.importorskip("torch")
    for name in ("parity_nn:nn_gelu", "parity_nn:nn_layer_norm", "parity_nn:nn_embedding", "parity_nn:nn_nll_loss",
                 "parity_nn:nn_bce_logits"):
        program = with_saved_attributes(OTHER_PROGRAMS[name])
        assert_same(_describe(engine, program), _describe(torch, program))
