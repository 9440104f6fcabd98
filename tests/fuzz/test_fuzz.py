"""The differential fuzzer: its generator, comparison and shrinker, and a fixed batch of programs against torch."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agdb import engine
from tests.fuzz import campaign as cli
from tests.fuzz.generator import ABSENT, KIND_WEIGHTS, KNOWN_GAPS, generate
from tests.fuzz.interpret import compare, compile_program, first_difference, run
from tests.fuzz.program import render
from tests.fuzz.shrink import readable, repro, shrink

SEEDS = range(600)  # enough for the rarest statement (sgd_update: ~1 program in 125) to be drawn
"""The seeds of the unit tests and of the fixed batch."""

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def programs():
    return [generate(s) for s in SEEDS]


# -- the generator --------------------------------------------------------------------------------------
def test_same_seed_same_program() -> None:
    """A seed always gives the same program, and different seeds different ones."""
    assert [generate(s) for s in range(20)] == [generate(s) for s in range(20)]
    assert len({render(generate(s)) for s in range(20)}) == 20


def test_same_program_in_another_process() -> None:
    """The program of a seed does not depend on the process (hash randomisation, id order)."""
    code = "from tests.fuzz.generator import generate; from tests.fuzz.program import render; " \
           "print(''.join(render(generate(s)) for s in range(5)))"
    outs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": h, "PATH": ""}).stdout for h in ("1", "2")]
    assert outs[0] == outs[1] == "".join(render(generate(s)) for s in range(5)) + "\n"


def test_every_kind_and_op_is_drawn(programs) -> None:
    """Over the seeds, every statement kind, grad mode, anomaly mode and custom Function appears."""
    stmts = [s for p in programs for s in p.stmts]
    assert {s.kind for s in stmts} >= set(KIND_WEIGHTS) | {"leaf"}
    assert {s.mode for s in stmts} >= {None, "no_grad", "inference_mode"}
    assert any(s.anomaly for s in stmts)
    assert {s.helper for s in stmts} >= {"ScaleMul", "Clip", "Cube", "OnceExp"}
    ops = {s.op for s in stmts}
    wanted = {"add", "mul", "div", "pow", "sum", "mean", "max", "var", "logsumexp", "norm", "view", "reshape",
              "transpose", "permute", "select", "getitem", "unsqueeze", "expand", "expand_as", "unbind", "split",
              "chunk", "index", "mask", "gather", "where", "mm", "dot", "mv", "vecmat", "bmm", "addmm", "linear",
              "cat", "stack", "add_", "mul_", "copy_", "setitem", "setitem_mask", "index_put_", "sgd_update",
              "backward", "grad", "read_grad", "grad_none", "tensor", "retain_grad", "node_post", "node_pre",
              "post_accumulate", "remove", "requires_grad_", "detach_", "Linear", "Sequential", "LayerNorm",
              "Embedding", "call", "softmax", "mse_loss", "cross_entropy", "optimizer", "step", "zero_grad", "loss"}
    assert wanted <= ops, sorted(wanted - ops)
    texts = "".join(s.text for s in stmts)
    for form in ("inputs=[", "t.autograd.backward([", "create_graph=True", "retain_graph=True", "allow_unused=True",
                 "register_prehook", "2 / {0}", "{0} ** ({1} * 0.5)", "t.where({0}, {0}"):
        assert form in texts, form


def test_known_gaps_switch_leaves_the_constructs_out(programs) -> None:
    """With known_gaps=False no program notes a KNOWN_GAPS construct; with it, every one is drawn."""
    assert set().union(*(p.notes for p in programs)) >= set(KNOWN_GAPS)
    for s in SEEDS[:150]:
        assert not set(generate(s, known_gaps=False).notes) & (set(KNOWN_GAPS) | set(ABSENT))


def test_every_program_runs_on_the_engine(programs) -> None:
    """Each program compiles and runs to its end on the engine (statements may raise; nothing escapes)."""
    for p in programs[:150]:
        events = run(engine, compile_program(p))
        assert events and events[-1][0] != "crashed", (p.seed, events[-1])


# -- the comparison ------------------------------------------------------------------------------------
def _tensor(version: int, values: float = 1.0) -> tuple:
    import numpy as np
    return ("tensor", (1,), "torch.float64", np.array([values]), True, "MulBackward0", version, False, 3, False)


def test_first_difference_names_field_and_statement() -> None:
    """The first differing event gives its field (inside a tensor or node) and the running statement."""
    same = [("made", "s1", (_tensor(0),)), ("ok", "s1 exp")]
    assert first_difference(same, list(same)) is None
    d = first_difference(same + [("made", "s2", (_tensor(0), _tensor(1))), ("ok", "s2 add_")],
                         same + [("made", "s2", (_tensor(0), _tensor(2))), ("ok", "s2 add_")])
    assert (d.field, d.op, d.stmt, d.tag) == ("_version", "add_", 2, "s2")
    d = first_difference([("raised", "s4 view", "RuntimeError", "a")], [("raised", "s4 view", "RuntimeError", "b")])
    assert d.signature == ("error message", "view")
    d = first_difference([("ok", "s1 exp")], [("raised", "s1 exp", "RuntimeError", "b")])
    assert d.signature == ("raised on one side", "exp")
    node = (0, "MulBackward0", 0, ((None, 0),), None)
    d = first_difference([("s3 graph", (node,))], [("s3 graph", (node[:1] + ("AddBackward0",) + node[2:],))])
    assert d.field == "graph node name"
    assert first_difference([("made", "end", (_tensor(0, 1.0),))],
                            [("made", "end", (_tensor(0, 1.0 + 1e-9),))]) is None  # parity's tolerance


# -- the shrinker ----------------------------------------------------------------------------------------
def _planted(monkeypatch: pytest.MonkeyPatch):
    """An oracle comparing the engine with itself, where the second run names ExpBackward0 wrongly."""
    def differs(program, bare=frozenset()):
        fn = compile_program(program, bare)
        ours = run(engine, fn)
        with monkeypatch.context() as m:
            m.setattr(engine._functions.ExpBackward0, "name", lambda self: "WrongBackward0")
            theirs = run(engine, fn)
        return first_difference(ours, theirs)
    return differs


def test_shrinker_reduces_a_planted_divergence(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program with an exp deep inside shrinks to a few statements that still show the wrong name, none of
    which can go (1-minimal: without any one of them the difference is gone)."""
    differs = _planted(monkeypatch)
    seed = next(s for s in SEEDS if (d := differs(generate(s))) is not None and d.stmt > 12)
    big = generate(seed)
    small, diff = shrink(big, differs)
    assert len(small.stmts) <= 5 < len(big.stmts)
    for i in range(len(small.stmts)):
        rest = differs(small.without({i}))
        assert rest is None or rest.signature != diff.signature, f"statement {i} could go"
    assert diff.signature == differs(generate(seed)).signature
    assert "WrongBackward0" in diff.torch
    snippet = repro(small, diff, readable(small, diff, differs))
    assert ".exp()" in snippet or "t.exp(" in snippet
    namespace: dict = {}
    exec(snippet, namespace)  # noqa: S102 - the repro is runnable Python defining `program`
    assert callable(namespace["program"])


def test_shrinker_refuses_a_program_that_does_not_differ() -> None:
    """Shrinking needs a difference to keep."""
    with pytest.raises(ValueError):
        shrink(generate(0), lambda program, bare=frozenset(): None)


# -- against torch ---------------------------------------------------------------------------------------
@pytest.mark.long
@pytest.mark.torch
def test_fixed_batch_matches_torch() -> None:
    """The fixed batch (known gaps left out) matches torch event for event; a failure shows its minimal repro."""
    pytest.importorskip("torch")
    for s in SEEDS:
        program = generate(s, known_gaps=False)
        if compare(program) is not None:
            small, diff = shrink(program, compare)
            pytest.fail(f"seed {s} differs from torch; minimal repro:\n{repro(small, diff)}")


@pytest.mark.torch
def test_command_line_reports_and_writes_repros(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`python -m tests.fuzz` prints a summary and exits 0 when nothing differs, 1 with repro files when
    something does."""
    pytest.importorskip("torch")
    status = cli.main(["--seed", "5", "-n", "6", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "6 programs from seed 5" in out
    assert status == (1 if list(tmp_path.glob("*.py")) else 0)


def test_command_line_without_torch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Without torch the command says what to install and exits 2."""
    def missing():
        raise SystemExit("tests.fuzz compares with PyTorch, which is not installed")
    monkeypatch.setattr(cli, "import_torch", missing)
    assert cli.main(["-n", "1"]) == 2
    assert "not installed" in capsys.readouterr().err


def test_findings_snippets_run_on_the_engine() -> None:
    """Every repro in FINDINGS.md compiles to `program(t, p)` and runs to its end on the engine."""
    from tests.fuzz.findings import FINDINGS, snippets

    found = snippets(FINDINGS.read_text())
    assert len(found) >= 30
    for head, fn in found:
        events = run(engine, fn)
        assert events and events[-1][0] != "crashed", (head, events[-1])


def _dies_on_seven(task):
    """A stand-in for a program that kills its worker (torch has segfaulted on random programs)."""
    if task[0] == 7:
        os._exit(3)
    if task[0] in (3, 8):  # likely running in the other worker when 7 dies, and stopped with the pool
        time.sleep(0.5)
    return task[0], None


@pytest.mark.long
def test_a_worker_that_dies_is_reported_not_waited_for():
    """Only the task whose worker died comes back as a crash; the rest run, those the broken pool stopped again."""
    from tests.fuzz import campaign

    results = list(campaign._mapped(2, _dies_on_seven, [(i, False) for i in range(12)]))
    assert sorted(r[0] for r in results) == list(range(12))
    crashed = [r for r in results if r[0] == 7]
    assert len(crashed) == 1 and crashed[0][-1].field == "process crashed"
    assert all(r[1] is None for r in results if r[0] != 7)
