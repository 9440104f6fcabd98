"""Signals and the script's thread, for every command that records: real signals sent to a real `agdb` process.

SIGINT, SIGTERM and SIGHUP save what was recorded (marked partial) and agdb ends as `python SCRIPT` killed by that
signal would (the child's status is minus the signal); the script runs on the main thread, so `signal.signal`
works, its own handler wins over agdb's, and its non-daemon threads are waited for; a SIGINT ignored by the shell
stays ignored; `agdb fx` says when the script called os._exit. Each child gets the default dispositions back first
(`_as_at_a_terminal`): a suite started in the background by a shell inherits SIGINT ignored.
"""
from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import agdb.tracer
from agdb.app.signals import ScriptSignals, Terminated
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.tracefile import load

DEADLINE = 60.0
"""Seconds a child may take to reach a point or to end: a hang guard, never a measure."""

ENGINE_LOOP = textwrap.dedent("""\
    import sys
    import agdb.engine as torch
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    open(sys.argv[1], "w").close()
    while True:
        y = (w * 2).relu()
        (y * y).sum().backward()
""")
"""An endless recorded loop of forwards and backwards; the marker file comes after the first backward, so that
the trace holds events whenever the signal lands."""

TORCH_LOOP = ENGINE_LOOP.replace("import agdb.engine as torch", "import torch")


def _as_at_a_terminal() -> None:
    """In the child before it runs: SIGINT, SIGTERM and SIGHUP back to their default dispositions."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _start(tmp_path: Path, argv: list[str], preexec=_as_at_a_terminal, new_session: bool = False
           ) -> subprocess.Popen:
    """`agdb ARGV` in tmp_path; with `new_session`, in a session (and process group) of its own, which _finish's
    hang guard kills whole: processes the script started hold the child's pipes open."""
    return subprocess.Popen([sys.executable, "-m", "agdb", *map(str, argv)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec, start_new_session=new_session)


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Wait until the child's script made `path` (a hang guard only)."""
    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the script never started: {proc.communicate()[1][-2000:]}")
        time.sleep(0.01)


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            if os.getpgid(proc.pid) == proc.pid:  # started in a group of its own (_start's new_session)
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.communicate()


def _kept(err: str, what: str) -> int:
    """The N of agdb's `WHAT: kept N events` line."""
    line = next(x for x in err.splitlines() if x.startswith(f"agdb: {what}: kept "))
    return int(line.split("kept ")[1].split(" events")[0].replace(",", ""))


def _interrupt_at_random_moments(tmp_path: Path, command: list[str], script: str, runs: int, at_once: int,
                                 seed: int) -> None:
    """Start `runs` agdb children (`at_once` at a time); SIGINT each at a moment a seeded RNG picks after its script
    made its marker; every one must keep a loadable, partial trace of the events it says, and die of SIGINT."""
    rng = random.Random(seed)
    path = tmp_path / "loop.py"
    path.write_text(script)
    for first in range(0, runs, at_once):
        batch = []
        for i in range(first, min(runs, first + at_once)):
            out, started = tmp_path / f"run{i}.agdb", tmp_path / f"started{i}"
            argv = [a if a != "OUT" else out for a in command]
            batch.append((_start(tmp_path, [*argv, path, "--", started]), out, started, rng.uniform(0.0, 0.4)))
        for proc, _, started, delay in batch:
            _wait_for(started, proc)
            time.sleep(delay)  # the random moment, not a wait for anything
            proc.send_signal(signal.SIGINT)
        for proc, out, _, _ in batch:
            _, err = _finish(proc)
            assert proc.returncode == -signal.SIGINT, err[-3000:]
            assert "Traceback" not in err and "terminate called" not in err, err[-3000:]
            trace = load(out)
            assert len(trace) == _kept(err, "interrupted") > 0
            assert trace.meta["partial"] == "SIGINT"


def test_ctrl_c_at_random_moments_keeps_every_record_trace(tmp_path):
    """SIGINT at 20 random moments of `agdb record`'s loop: 20 loadable traces, each of the events agdb says it kept,
    marked partial, and agdb dies of SIGINT as python would."""
    _interrupt_at_random_moments(tmp_path, ["record", "-o", "OUT"], ENGINE_LOOP, runs=20, at_once=4, seed=32)


def test_ctrl_c_at_random_moments_keeps_every_torch_trace(tmp_path):
    """SIGINT at 6 random moments of `agdb torch`'s loop on real PyTorch: 6 loadable partial traces."""
    pytest.importorskip("torch")
    _interrupt_at_random_moments(tmp_path, ["torch", "-o", "OUT"], TORCH_LOOP, runs=6, at_once=2, seed=33)


def test_ctrl_c_during_culprits_torch_prints_the_table(tmp_path):
    """SIGINT at 2 random moments of `agdb culprits --torch`: each time the increments recorded so far are printed,
    and agdb dies of SIGINT."""
    pytest.importorskip("torch")
    rng = random.Random(35)
    path = tmp_path / "loop.py"
    path.write_text(TORCH_LOOP)
    for i in range(2):
        started = tmp_path / f"started{i}"
        proc = _start(tmp_path, ["culprits", "--torch", path, "--", started])
        _wait_for(started, proc)
        time.sleep(rng.uniform(0.0, 0.4))  # the random moment, not a wait for anything
        proc.send_signal(signal.SIGINT)
        out, err = _finish(proc)
        assert proc.returncode == -signal.SIGINT, err[-3000:]
        assert "sequence-number increments" in out and "MulBackward0" in out, err[-3000:]


@pytest.mark.parametrize("command", ["record", "torch"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_save_what_was_recorded(tmp_path, command, signum):
    """SIGTERM or SIGHUP (`timeout`, a job scheduler, a closed terminal): the trace so far is saved, marked partial,
    and agdb dies of that signal."""
    if command == "torch":
        pytest.importorskip("torch")
    path, started, out = tmp_path / "loop.py", tmp_path / "started", tmp_path / "run.agdb"
    path.write_text(TORCH_LOOP if command == "torch" else ENGINE_LOOP)
    proc = _start(tmp_path, [command, path, "-o", out, "--", started])
    _wait_for(started, proc)
    proc.send_signal(signum)
    _, err = _finish(proc)
    name = signal.Signals(signum).name
    assert proc.returncode == -signum, err[-3000:]
    trace = load(out)
    assert len(trace) == _kept(err, name) > 0
    assert trace.meta["partial"] == name


THREADS = textwrap.dedent("""\
    import threading
    import torch

    def work():
        w = torch.ones(3, requires_grad=True)
        for _ in range(200):
            (w * 2).sum().backward()
        print("worker finished", threading.current_thread().daemon, flush=True)

    x = torch.ones(1, requires_grad=True)
    h = x
    for _ in range(200_000):
        h = h.neg()
        h.grad_fn.next_functions
    del h
    print("freed on main", threading.current_thread() is threading.main_thread(), flush=True)
    threading.Thread(target=work, name="worker").start()
    print("main", threading.current_thread() is threading.main_thread(), flush=True)
""")
"""The main thread frees a 200k-deep graph whose nodes Python touched (the 8 MiB main-thread stack `python` starts
with crashes at about 50k: SIGSEGV at 100k and 200k), then starts a thread that runs 200 backward calls and ends at
once, leaving agdb to wait for that thread."""


def test_the_scripts_threads_are_not_daemons_and_the_main_stack_frees_a_deep_graph(tmp_path):
    """Under `agdb torch` the script is on the main thread and a thread it starts is no daemon: agdb waits for it, as
    python does, and records its backward calls (200 graph tasks); that main thread's stack is big enough for torch
    to free a deep graph recursively. One child for both: each is a whole run of `agdb torch` ending well."""
    pytest.importorskip("torch")
    path, out = tmp_path / "threads.py", tmp_path / "run.agdb"
    path.write_text(THREADS)
    proc = _start(tmp_path, ["torch", path, "-o", out])
    stdout, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "main True" in stdout and "worker finished False" in stdout
    assert "freed on main True" in stdout
    assert len(load(out).meta["graph_tasks"]) == 200


KEPT_POOL = textwrap.dedent("""\
    import functools
    from concurrent.futures import {executor}
    import {module} as torch


    def step(i):
        w = torch.ones(3, requires_grad=True)
        (w * i).sum().backward()
        return f"step {{i}} grad {{float(w.grad.sum())}}"


    @functools.lru_cache(None)
    def pool():
        return {executor}(1)  # kept past the script's end, as torch.compile's inductor keeps its compile workers


    if __name__ == "__main__":
        print(pool().submit(step, 1).result(), flush=True)
        print("script done", flush=True)
        pool().submit(print, "queued work done", flush=True)  # not waited for: it runs before the process ends
""")
"""A script that leaves an executor alive in a module-level cache, with work queued and not waited for."""


@pytest.mark.parametrize(("command", "module", "executor"), [
    ("record", "agdb.engine", "ThreadPoolExecutor"), ("torch", "torch", "ThreadPoolExecutor"),
    ("torch", "torch", "ProcessPoolExecutor")])
def test_an_executor_the_script_keeps_does_not_keep_agdb_waiting(tmp_path, command, module, executor):
    """`python SCRIPT` ends once the script's code returns even when an executor it made is still alive (Python's exit
    tells every executor's threads to stop after the work queued): agdb ends too, with the script's output, the queued
    work done, and the backward calls on the pool's thread recorded. Before, agdb joined the pool's idle worker
    forever (`agdb torch` on any program torch.compile compiled with inductor's compile workers)."""
    if module == "torch":
        pytest.importorskip("torch")
    path, out = tmp_path / "pool.py", tmp_path / "run.agdb"
    path.write_text(KEPT_POOL.format(module=module, executor=executor))
    plain = subprocess.run([sys.executable, path], cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE)
    assert plain.returncode == 0, plain.stderr[-3000:]
    proc = _start(tmp_path, [command, path, "-o", out], new_session=True)  # a hung agdb's pool processes die too
    stdout, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    assert stdout == plain.stdout == "step 1 grad 3.0\nscript done\nqueued work done\n"
    if executor == "ThreadPoolExecutor":  # a process pool's work runs in its own process, unrecorded
        assert len(load(out).steps_of(Kind.GRAPH_TASK_STARTED)) == 1


OWN_HANDLER = textwrap.dedent("""\
    import signal, sys
    import {module} as torch

    stop = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    open(sys.argv[1], "w").close()
    while not stop:
        (w * 2).sum().backward()
    print("checkpoint saved", flush=True)
""")


@pytest.mark.parametrize("command", ["record", "torch"])
def test_the_scripts_own_sigterm_handler_wins(tmp_path, command):
    """A script's `signal.signal(SIGTERM, handler)` works under agdb and wins over agdb's: the handler runs, the
    script ends as it chooses (status 0), and the whole trace is saved, not partial."""
    if command == "torch":
        pytest.importorskip("torch")
    path, started, out = tmp_path / "own.py", tmp_path / "started", tmp_path / "run.agdb"
    path.write_text(OWN_HANDLER.format(module="torch" if command == "torch" else "agdb.engine"))
    proc = _start(tmp_path, [command, path, "-o", out, "--", started])
    _wait_for(started, proc)
    proc.send_signal(signal.SIGTERM)
    stdout, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "checkpoint saved" in stdout
    trace = load(out)
    assert len(trace) > 0 and "partial" not in trace.meta


IGNORED = textwrap.dedent("""\
    import os, signal, sys, time
    import agdb.engine as torch
    print("ignored", signal.getsignal(signal.SIGINT) is signal.SIG_IGN, flush=True)
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    open(sys.argv[1], "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        (w * 2).sum().backward()
""")


def test_a_sigint_the_shell_ignores_stays_ignored(tmp_path):
    """agdb started with SIGINT ignored (a background job) keeps it ignored: the script sees SIG_IGN and a SIGINT does
    not stop it."""
    path, started, go, out = tmp_path / "bg.py", tmp_path / "started", tmp_path / "go", tmp_path / "run.agdb"
    path.write_text(IGNORED)

    def ignore_sigint() -> None:
        _as_at_a_terminal()
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = _start(tmp_path, ["record", path, "-o", out, "--", started, go], preexec=ignore_sigint)
    _wait_for(started, proc)
    proc.send_signal(signal.SIGINT)
    go.touch()
    stdout, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    assert "ignored True" in stdout
    assert "partial" not in load(out).meta


def test_fx_says_when_the_script_calls_os_exit(tmp_path):
    """`agdb fx` on a script calling os._exit(9): one line saying so, status 1, as for sys.exit."""
    path = tmp_path / "exits.py"
    path.write_text("import os\nos._exit(9)\n")
    proc = _start(tmp_path, ["fx", path])
    _, err = _finish(proc)
    assert proc.returncode == 1
    assert err == f"agdb: {path} called os._exit(9) before agdb could capture it\n"


def test_a_signal_that_lands_in_the_recorder_waits_for_the_scripts_code():
    """A signal whose handler runs while agdb's tracer code is on the stack is held until the script's own code runs:
    the recorder's code finishes, and the script is stopped just after (in-process, with SIGTERM)."""
    tracer_dir = Path(agdb.tracer.__file__).resolve().parent
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    reached: list[str] = []
    try:
        with ScriptSignals() as signals:
            signals.arm()
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # else the signal below would end pytest
            signals.script_started()
            hook = compile("raise_signal(SIGTERM)\nreached.append('the hook ran to its end')",
                           str(tracer_dir / "hook.py"), "exec")
            with pytest.raises(Terminated):
                exec(hook, {"raise_signal": signal.raise_signal, "SIGTERM": signal.SIGTERM, "reached": reached})
                deadline = time.monotonic() + DEADLINE
                while time.monotonic() < deadline:  # the script's code: the held signal is raised here
                    reached.append("the script ran on")
            signals.script_ended()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert reached[0] == "the hook ran to its end" and set(reached[1:]) <= {"the script ran on"}


@pytest.mark.parametrize("torch_flag", [[], ["--torch"]], ids=["engine", "torch"])
def test_ctrl_c_during_fx_ends_agdb_by_sigint(tmp_path, torch_flag):
    """SIGINT while `agdb fx` runs the script: one line, and agdb dies of SIGINT as python would."""
    if torch_flag:
        pytest.importorskip("torch")
    path, started = tmp_path / "loop.py", tmp_path / "started"
    path.write_text(f"import time\nopen({str(started)!r}, 'w').close()\nwhile True:\n    time.sleep(0.01)\n")
    proc = _start(tmp_path, ["fx", path, *torch_flag])
    _wait_for(started, proc)
    proc.send_signal(signal.SIGINT)
    _, err = _finish(proc)
    assert proc.returncode == -signal.SIGINT, err[-3000:]
    assert err == "agdb: interrupted\n"


WORKER_LOOP = textwrap.dedent("""\
    import sys, threading
    import torch

    def work():
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()
        open(sys.argv[1], "w").close()
        while True:
            y = (w * 2).relu()
            (y * y).sum().backward()

    threading.Thread(target=work, name="worker").start()
""")


def test_ctrl_c_while_agdb_waits_for_the_scripts_thread(tmp_path):
    """SIGINT while the script's code has ended and agdb waits for its thread, which runs backward calls: the trace so
    far is saved, partial, and agdb dies of SIGINT (no abort from a thread torch was still running)."""
    pytest.importorskip("torch")
    path, started, out = tmp_path / "worker.py", tmp_path / "started", tmp_path / "run.agdb"
    path.write_text(WORKER_LOOP)
    proc = _start(tmp_path, ["torch", path, "-o", out, "--", started])
    _wait_for(started, proc)
    time.sleep(random.Random(34).uniform(0.0, 0.4))  # a random moment, not a wait for anything
    proc.send_signal(signal.SIGINT)
    _, err = _finish(proc)
    assert proc.returncode == -signal.SIGINT, err[-3000:]
    assert "terminate called" not in err and "Traceback" not in err, err[-3000:]
    trace = load(out)
    assert len(trace) == _kept(err, "interrupted") > 0 and trace.meta["partial"] == "SIGINT"


def test_a_hard_stack_limit_below_the_big_stack_is_said(tmp_path):
    """Under a hard stack limit of 64 MiB, `agdb torch` raises the soft limit to it, says in one line that deep graphs
    may crash, and records."""
    pytest.importorskip("torch")
    path, out = tmp_path / "limit.py", tmp_path / "run.agdb"
    path.write_text("import resource, torch\nprint(resource.getrlimit(resource.RLIMIT_STACK)[0] >> 20)\n"
                    "(torch.ones(2, requires_grad=True) * 2).sum().backward()\n")

    def small_stack() -> None:
        _as_at_a_terminal()
        resource.setrlimit(resource.RLIMIT_STACK, (16 << 20, 64 << 20))

    proc = _start(tmp_path, ["torch", path, "-o", out], preexec=small_stack)
    stdout, err = _finish(proc)
    assert proc.returncode == 0, err[-3000:]
    assert stdout == "64\n"
    assert err.splitlines()[0] == ("agdb: the stack limit is 64 MiB (ulimit -s) and the hard limit allows no more, so "
                                   "torch may crash freeing a deep graph (a 1M-deep chain needs 1024 MiB)")
    assert len(load(out)) > 0
