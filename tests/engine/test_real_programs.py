"""Real public programs (tests/engine/real_programs/, each with its source, commit, licence and edits) run
unchanged on agdb's engine and on torch 2.13, and every backward call matches: the graph's node names, edges and
relative seq_nrs, the order the nodes run, the root's value and every leaf's grad; also each random draw and how
the program ended. See real_programs/harness.py for how they are run and why random values come from the
harness."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.engine.parity import _diff
from tests.engine.real_programs.harness import describe

ROOT = Path(__file__).parent / "real_programs"
CONFIGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "word_language_model_transformer": ("word_language_model", ("--model", "Transformer")),
    "minGPT_adder": ("minGPT_adder", ("--data.ndigit=1", "--model.model_type=None", "--model.n_layer=2",
                                      "--model.n_head=2", "--model.n_embd=8", "--trainer.batch_size=4",
                                      "--trainer.num_workers=0", "--trainer.max_iters=2")),
    "nanoGPT": ("nanoGPT", ("--device=cpu", "--dtype=float32", "--compile=False", "--n_layer=2", "--n_head=2",
                            "--n_embd=8", "--block_size=8", "--batch_size=2", "--gradient_accumulation_steps=2",
                            "--max_iters=2", "--eval_iters=1", "--warmup_iters=1", "--lr_decay_iters=2")),
    # on CPU train.py's dtype picks only its GradScaler (enabled for float16: disabled with a warning on CPU)
    **{f"nanoGPT_{kind}": ("nanoGPT", ("--device=cpu", f"--dtype={kind}", "--compile=False", "--n_layer=1",
                                       "--n_head=2", "--n_embd=8", "--block_size=8", "--batch_size=2",
                                       "--gradient_accumulation_steps=1", "--max_iters=1", "--eval_iters=1",
                                       "--warmup_iters=1", "--lr_decay_iters=2")) for kind in ("bfloat16", "float16")},
    **{f"makemore_{kind}": ("makemore", ("--type", kind)) for kind in ("bigram", "mlp", "rnn", "gru", "bow")},
    "dcgan": ("dcgan", ("--dataset", "fake")),
}
"""Runs of a program with command-line options that pick another of its models: name -> (directory, argv)."""
RUNS = {d.name: (d.name, ()) for d in ROOT.iterdir() if (d / "main.py").is_file()} | CONFIGS
PROGRAMS = sorted(RUNS)

RTOL = 1e-3
"""float32 programs train for a few steps: numpy's and torch's kernels sum in different orders, and an optimizer
step (Adam's m / sqrt(v) above all) magnifies those last-bit differences where a grad is near zero."""
SCALED_ATOL = 1e-3
"""Absolute tolerance as a fraction of the array's largest magnitude (at least 1), for the same reason."""

KNOWN_GAPS: dict[str, str] = {}
"""Programs that do not yet run on the engine as on torch, and why (each xfails strictly)."""


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return False
        scale = max(1.0, float(np.nanmax(np.abs(b), initial=0.0)))
        return bool(np.allclose(a, b, rtol=RTOL, atol=SCALED_ATOL * scale, equal_nan=True))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _params() -> list:
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[name]))
            if name in KNOWN_GAPS else name for name in PROGRAMS]


@pytest.mark.torch
@pytest.mark.long
@pytest.mark.parametrize("name", _params())
def test_real_program_matches_torch(name: str) -> None:
    """The program runs on the engine as on torch: same backward calls, graphs, seq_nrs, order, values, grads."""
    pytest.importorskip("torch")
    directory, argv = RUNS[name]
    ours, _ = describe(ROOT / directory, "engine", argv)
    theirs, _ = describe(ROOT / directory, "torch", argv)
    assert not [e for e in theirs if e[0] == "raised"], f"the program fails on torch itself: {theirs[-1]}"
    assert any(e[0].startswith("backward") for e in theirs), "the program made no backward call"
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else None
        b = theirs[i] if i < len(theirs) else None
        assert _same(a, b), f"event {i} differs\n" + _diff(ours[max(0, i - 3):i + 3], theirs[max(0, i - 3):i + 3])
