"""`agdb torch --nproc` and `agdb ranks` on a real DDP run (gloo, world size 2, find_unused_parameters=True):
ddp_program.py's own post-accumulate-grad hooks are the truth each rank's report is held to; rank 1 skips a
submodule at step 1; a rank that kills itself leaves the other's trace whole and is named."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agdb.app.launch import failure_lines, rank_path
from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb

PROGRAM = Path(__file__).with_name("ddp_program.py")
LINES = PROGRAM.read_text().splitlines()
EXTRA = LINES.index("            x = self.extra(x)") + 1
HEAD = LINES.index("        return self.head(x)") + 1
RECV = LINES.index("                dist.recv(torch.zeros(1), src=0)") + 1
BACKWARD = LINES.index("        loss.backward()") + 1
TIMEOUTS = (30, 90)
"""--timeout of the hung launch, short first: both ranks reach the hang in about 15 s on a quiet machine and 20 on a
loaded one, and the launch then waits idle for the timeout while holding a test worker. Only when the ranks had not
both reached the hang (their `.hangs` files say so, each written just before the C++ call that blocks) is it
launched again with the longer one: a retry on the test's precondition, never on what it asserts."""
HANG_GUARD = 600
"""Seconds a launch may take before the test kills it (a normal one takes about 20 on a loaded machine)."""


def _launch(tmp: Path, *program_args: str, flags: tuple[str, ...] = (), interrupt: bool = False) -> tuple[int, str]:
    """`agdb torch --nproc 2 FLAGS ddp_program.py -o run.agdb -- truth ARGS` in its own process group; its status
    and stderr. `interrupt`: SIGINT to agdb alone (as a Ctrl-C it alone got) once both ranks said they hang."""
    argv = [sys.executable, "-m", "agdb", "torch", "--nproc", "2", *flags, str(PROGRAM), "-o", str(tmp / "run.agdb"),
            "--", str(tmp / "truth"), *program_args]
    proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        if interrupt:
            _when_hung(tmp, proc)
        _, err = proc.communicate(timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"agdb torch --nproc 2 did not end within {HANG_GUARD} s")
    return proc.returncode, err


def _when_hung(tmp: Path, proc: subprocess.Popen) -> None:
    """Send SIGINT to `proc` once both ranks wrote their `.hangs` file (rank 1 just before its recv, rank 0 in its
    backward's first final callback, just before DDP's reducer waits: only C++ runs between each mark and its wait)."""
    marks = [tmp / f"truth.rank{rank}.hangs" for rank in (0, 1)]
    deadline = threading.Event()
    for _ in range(HANG_GUARD * 20):
        if all(m.exists() for m in marks) or proc.poll() is not None:
            break
        deadline.wait(0.05)  # polls for the files, bounded by HANG_GUARD
    proc.send_signal(signal.SIGINT)


def _once(tmp_path_factory, name: str, *program_args: str, **how: Any) -> tuple[Path, int, str]:
    """`_launch` once per test session, shared by xdist's workers (their base temporary directories share a
    parent): the first to take the lock launches, the others read what it left."""
    pytest.importorskip("torch.distributed")
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    tmp, done = root / name, root / name / "launched.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            tmp.mkdir(exist_ok=True)
            code, err = _launch(tmp, *program_args, **how)
            done.write_text(json.dumps([code, err]))
    code, err = json.loads(done.read_text())
    return tmp, code, err


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _once(tmp_path_factory, "ddp_run")


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    return _once(tmp_path_factory, "ddp_killed", "2")


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    return _once(tmp_path_factory, "ddp_crashed", "2", "raise")


def _both_hung(tmp: Path) -> bool:
    return all((tmp / f"truth.rank{rank}.hangs").exists() for rank in (0, 1))


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    """The launch stopped by --timeout (the first of TIMEOUTS that both ranks reached the hang before), and the
    timeout."""
    for timeout in TIMEOUTS:
        tmp, code, err = _once(tmp_path_factory, f"ddp_hung{timeout}", "1", "hang", flags=("--timeout", str(timeout)))
        if _both_hung(tmp):
            break
    return tmp, code, err, timeout


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    return *_once(tmp_path_factory, "ddp_interrupted", "1", "hang", interrupt=True), None


def _truth(tmp: Path, rank: int) -> dict:
    return json.loads((tmp / f"truth.rank{rank}.json").read_text())


@pytest.mark.long
def test_each_rank_writes_its_trace_with_its_rank_and_world_size(run):
    tmp, code, err = run
    assert code == 0, err
    for rank in (0, 1):
        trace = load(tmp / f"run.rank{rank}.agdb")
        assert (trace.meta["rank"], trace.meta["world_size"]) == (rank, 2)
        assert trace.meta["divergences"] == [] and not trace.meta.get("bridge_errors")
        assert trace.meta["ddp"][0]["parameters"] == ["body.weight", "body.bias", "extra.0.weight", "extra.0.bias",
                                                      "head.weight", "head.bias"]  # no `module.` prefix


@pytest.mark.long
def test_recording_changes_nothing_ddp_does(run):
    """The same program launched by torch's launcher without agdb: the same grads seen by its hooks, and the same
    parameters after its 3 steps of allreduced SGD on both ranks."""
    tmp, code, err = run
    assert code == 0, err
    plain = tmp / "plain"
    plain.mkdir()
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(PROGRAM),
            str(plain / "truth")]
    done = subprocess.run(argv, cwd=plain, capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    for rank in (0, 1):
        assert _truth(plain, rank) == _truth(tmp, rank)


@pytest.mark.long
def test_ranks_reports_what_the_programs_own_post_accumulate_grad_hooks_saw(run, capsys):
    tmp, code, err = run
    assert code == 0, err
    code, out, _ = agdb(["ranks", tmp / "run.rank0.agdb", tmp / "run.rank1.agdb", "--json"], capsys)
    report = json.loads(out)
    assert code == 1  # the ranks differ
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    for rank in (0, 1):
        assert report["ranks"][rank]["steps"] == _truth(tmp, rank)["steps"]  # the order too
    assert report["ranks"][1]["steps"][1]["unused_params"] == ["extra.0.weight", "extra.0.bias"]  # the skip
    first = report["first_difference"]
    assert set(first) == {"step", "ranks", "message"}
    assert (first["step"], first["ranks"]) == (1, [0, 1])
    assert "extra.0.weight" in first["message"] and "extra.0.bias" in first["message"]
    assert f"ddp_program.py:{EXTRA} `x = self.extra(x)`" in first["message"]  # the line that used them on rank 0


@pytest.mark.long
def test_ranks_text_names_the_unused_parameters_and_the_difference(run, capsys):
    tmp, _, _ = run
    code, out, _ = agdb(["ranks", tmp / "run.rank1.agdb", tmp / "run.rank0.agdb"], capsys)
    assert code == 1
    assert "unused: extra.0.weight, extra.0.bias" in out
    assert "first difference: ranks 0 and 1 at step 1: rank 1 gave no grad to extra.0.bias, extra.0.weight" in out


@pytest.mark.long
def test_two_traces_of_one_rank_are_refused(run, capsys):
    tmp, _, _ = run
    code, _, err = agdb(["ranks", tmp / "run.rank0.agdb", tmp / "run.rank0.agdb"], capsys)
    assert code == 1 and "two traces are rank 0" in err


@pytest.mark.long
async def test_diff_tui_opens_two_ranks_side_by_side(run):
    from textual.widgets import DataTable

    from agdb.app.diff_app import DiffApp
    from agdb.tracer.replay.diff import compare, side_of
    from agdb.tracer.views.labels import NodeLabels

    tmp, _, _ = run
    traces = [load(tmp / f"run.rank{rank}.agdb") for rank in (0, 1)]
    a, b = (side_of(t, f"rank {rank}", NodeLabels(t)) for rank, t in enumerate(traces))
    app = DiffApp(a, b, compare(a, b))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        bumps = app.query_one("#bumps", DataTable)
        # at step 1 rank 0's next numbers go to `x = self.extra(x)` (a Linear and a tanh), which rank 1 skips:
        # lined up as a diff tool would, those are the only rows that differ, rank 1's side empty (columns:
        # thread, then seq_nr, node, line of A, then of B), and the head's rows after them pair up again
        rows = [[str(cell) for cell in bumps.get_row_at(r)] for r in app.differences["bumps"]]
        assert [row[2:] for row in rows] == [[name, f"ddp_program.py:{EXTRA}", "", "", "", "≠"]
                                             for name in ("TBackward0", "AddmmBackward0", "TanhBackward0")]
        heads = [[str(c) for c in bumps.get_row_at(r)] for r in range(app.differences["bumps"][-1] + 1,
                                                                     bumps.row_count)]
        assert ["TBackward0", f"ddp_program.py:{HEAD}"] in [row[5:7] for row in heads]
        await pilot.press("q")


@pytest.mark.long
def test_a_rank_killed_mid_run_is_named_and_the_others_trace_loads(killed, run, capsys):
    tmp, code, err = killed
    assert code == 1
    assert "rank 1 failed: killed by SIGKILL" in err
    assert "no trace from rank 1" in err
    assert not (tmp / "run.rank1.agdb").exists()
    trace = load(tmp / "run.rank0.agdb")
    assert trace.meta["rank"] == 0
    code, out, _ = agdb(["ranks", tmp / "run.rank0.agdb", "--json"], capsys)
    steps = json.loads(out)["ranks"][0]["steps"]
    assert steps[:2] == _truth(run[0], 0)["steps"][:2]  # the steps before the kill, as the whole run's hooks saw
    code, out, _ = agdb(["ranks", tmp / "run.rank0.agdb"], capsys)
    assert code == 1 and "rank 1: no trace given" in out


@pytest.mark.long
def test_a_rank_that_raises_keeps_its_trace_and_is_named(crashed, run, capsys):
    tmp, code, err = crashed
    assert code == 1
    assert "rank 1 failed: exit code 1" in err and "RuntimeError: rank 1 fails at step 2" in err
    code, out, _ = agdb(["ranks", tmp / "run.rank0.agdb", tmp / "run.rank1.agdb", "--json"], capsys)
    report = json.loads(out)
    assert report["ranks"][1]["steps"] == _truth(run[0], 1)["steps"][:2]  # rank 1 raised before step 2's backward
    assert report["first_difference"]["step"] == 1


def test_the_ranks_torchs_launcher_stopped_are_not_blamed():
    lines = failure_lines({0: -signal.SIGTERM, 1: -signal.SIGKILL})
    assert lines == ["rank 0 was stopped (SIGTERM) by torch's launcher once rank 1 had failed",
                     "rank 1 failed: killed by SIGKILL"]
    assert failure_lines({2: 3}) == ["rank 2 failed: exit code 3"]


def test_rank_trace_names():
    assert rank_path(Path("/x/run.agdb"), 1) == Path("/x/run.rank1.agdb")
    assert rank_path(Path("/x/run"), 0) == Path("/x/run.rank0.agdb")


def test_a_rank_with_fewer_backward_calls_differs_where_its_trace_ends():
    from agdb.tracer.views.ranks import Rank, Step, first_difference

    same = Step(0, ("w", "b"), ())
    a = Rank(0, 2, (same, Step(1, ("w", "b"), ())), trace=None)
    b = Rank(1, 2, (same,), trace=None, partial="SIGTERM")
    assert first_difference([b, a]) == {
        "step": 1, "ranks": [0, 1],
        "message": "step 1: rank 1 has none, its trace ends after 1 backward call(s), cut short by SIGTERM; "
                   "rank 0 made it"}
    c = Rank(2, 3, (Step(0, ("b", "w"), (), {"b": 1, "w": 2}),), trace=None)
    a = Rank(0, 3, (Step(0, ("w", "b"), (), {"w": 2, "b": 1}),), trace=None)
    assert first_difference([a, c])["message"] == ("step 0: the ranks accumulated the same parameters in another "
                                                   "order: at position 0 rank 0 w, rank 2 b")


def _stuck(signame: str) -> list[str]:
    """What agdb says of the hung ranks: rank 0 entered step 1's backward, whose allreduce waits for rank 1; rank 1
    waits in `dist.recv` after step 0 (where ddp_program.py's `.hangs` files say each got to)."""
    return [f"rank 0 was stuck in backward call 2 (step 1) at ddp_program.py:{BACKWARD} `loss.backward()`, blocked "
            f"in C++ when {signame} came",
            f"rank 1 was stuck after backward call 1 (step 0) at ddp_program.py:{RECV} "
            f"`dist.recv(torch.zeros(1), src=0)`, blocked in C++ when {signame} came"]


@pytest.mark.long
@pytest.mark.parametrize("launch", ["hung", "interrupted"])
def test_ranks_blocked_in_a_collective_keep_their_traces_and_say_where(launch, run, capsys, request):
    """Both ranks blocked in gloo (holding no GIL, so no Python handler runs): --timeout, or SIGINT to agdb, stops
    them; each rank's trace is saved all the same, marked partial, and agdb says where each was stuck."""
    tmp, code, err, timeout = request.getfixturevalue(launch)
    signame = "SIGTERM" if launch == "hung" else "SIGINT"
    assert _both_hung(tmp), err  # both reached the hang
    if launch == "hung":
        assert code == 1 and f"agdb: --timeout {timeout} s passed: the ranks still running were stopped" in err
    else:
        assert code == -signal.SIGINT and "agdb: SIGINT came: the ranks still running were stopped" in err
    assert [line[len("agdb: "):] for line in err.splitlines() if " was stuck " in line] == _stuck(signame), err
    for rank in (0, 1):
        trace = load(tmp / f"run.rank{rank}.agdb")
        assert (trace.meta["rank"], trace.meta["partial"]) == (rank, signame)
        assert trace.meta["divergences"] == [] and not trace.meta.get("bridge_errors")
    code, out, _ = agdb(["ranks", tmp / "run.rank0.agdb", tmp / "run.rank1.agdb", "--json"], capsys)
    report = json.loads(out)
    for rank, line in enumerate(_stuck(signame)):
        got = report["ranks"][rank]
        assert got["steps"] == _truth(run[0], rank)["steps"][:1]  # step 0, as the whole run's hooks saw it
        assert (got["partial"], got["stopped"]) == (signame, line.partition(" was ")[2])
    code, out, _ = agdb(["ranks", tmp / "run.rank0.agdb", tmp / "run.rank1.agdb"], capsys)
    assert f"partial: {_stuck(signame)[1].partition(' was ')[2]})" in out
    assert "the ranks agree at every step recorded (ranks 0, 1 cut short)" in out


def test_where_a_partial_rank_stopped_is_said_from_its_trace():
    from agdb.tracer.views.ranks import Rank, Step, stopped_text

    step = Step(0, ("w",), ())
    line = {"filename": "/x/train.py", "lineno": 9, "name": "main", "source": "loss.backward()"}
    assert stopped_text(Rank(0, 2, (step,), trace=None)) == ""  # ended of itself
    # blocked before the bridge recorded the call's start: the call after the recorded ones
    assert stopped_text(Rank(0, 2, (step,), trace=None, partial="SIGTERM", blocked={**line, "in_backward": True})) \
        == "stuck in backward call 2 (step 1) at train.py:9 `loss.backward()`, blocked in C++ when SIGTERM came"
    assert stopped_text(Rank(1, 2, (step,), trace=None, partial="SIGINT", unfinished=True)) \
        == "stopped by SIGINT in backward call 1 (step 0)"
    assert stopped_text(Rank(1, 2, (), trace=None, partial="SIGHUP")) \
        == "stopped by SIGHUP before its first backward call"
