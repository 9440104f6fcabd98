"""Ctrl-C during a CPU backward leaves the engine usable (NOTE [interrupts in the engine] in engine/_ready_queue.py).

A child process runs CPU backwards in a loop while this process sends it SIGINT many times, each after a
seeded random delay. The child's handler raises KeyboardInterrupt, as Python's does, while a forward or
backward runs (one that lands in the loop's own bookkeeping is only counted). The child acknowledges each
interrupt; then it must finish a fresh backward whose gradient is checked against a hand derivation. Every
wait has a timeout, so a deadlock (`mark_gone` waiting for a ready-queue lock its own thread still
holds) fails the test instead of hanging it.
"""
from __future__ import annotations

import pathlib
import random
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HANG_GUARD_S = 60.0
"""How long to wait for the child's next line before calling it a deadlock: each takes milliseconds when healthy,
and seconds at worst on a loaded machine."""

CHILD = textwrap.dedent("""\
    import faulthandler, signal, sys
    from agdb import engine as torch

    faulthandler.register(signal.SIGUSR2, all_threads=True)  # the parent asks for stacks on a timeout
    stop = False
    armed = False  # SIGINT raises KeyboardInterrupt only inside the forward and backward below
    interrupts = 0

    def on_usr1(*_):
        global stop
        stop = True

    def on_int(*_):
        global interrupts
        if armed:
            raise KeyboardInterrupt
        interrupts += 1  # landed in this loop's own bookkeeping: counted, not raised

    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGINT, on_int)
    x = torch.linspace(-1.0, 1.0, 16, requires_grad=True)
    acked = 0
    print("READY", flush=True)
    while not stop:
        try:
            armed = True
            y = x
            for _ in range(40):
                y = (y * 1.01).sin() + y
            y.sum().backward()
            armed = False
        except KeyboardInterrupt:
            armed = False
            interrupts += 1
        while acked < interrupts:
            acked += 1
            print("INT", flush=True)
    x.grad = None
    (x * x * 3.0).sum().backward()  # d/dx sum(3 x^2) = 6 x
    ok = bool(((x.grad - x.detach() * 6.0).abs() < 1e-6).all())
    print("DONE", interrupts, ok, flush=True)
""")


def _line(proc: subprocess.Popen, deadline: float) -> str:
    """The child's next line of output, or "" when none came before `deadline`."""
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    return proc.stdout.readline().strip() if ready else ""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
@pytest.mark.parametrize("seed", [0, 1])
def test_sigint_during_cpu_backward_never_deadlocks(seed):
    """Ctrl-C 120 times during CPU backwards: every interrupt is raised, and a fresh backward then gives 6x."""
    rng = random.Random(seed)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _line(proc, time.monotonic() + HANG_GUARD_S) == "READY"
        for i in range(120):
            time.sleep(rng.uniform(0.001, 0.012))
            proc.send_signal(signal.SIGINT)
            line = _line(proc, time.monotonic() + HANG_GUARD_S)
            if line != "INT":
                proc.send_signal(signal.SIGUSR2)
                time.sleep(0.5)
                proc.kill()
                pytest.fail(f"interrupt {i}: the child did not come back ({line!r}):\n{proc.communicate()[1]}")
        proc.send_signal(signal.SIGUSR1)
        done = _line(proc, time.monotonic() + HANG_GUARD_S)
        if not done.startswith("DONE"):
            proc.send_signal(signal.SIGUSR2)
            time.sleep(0.5)
            proc.kill()
            pytest.fail(f"the backward after the interrupts did not finish ({done!r}):\n{proc.communicate()[1]}")
        assert done == "DONE 120 True"
        assert proc.wait(timeout=HANG_GUARD_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
