"""SIGTERM, SIGHUP or SIGINT sent to the TUI (a closed terminal, `timeout`, `kill`) quit it as `q` does: the terminal
is given back as it was (the alternate screen left, the cursor shown), and agdb then ends by the signal."""
from __future__ import annotations

import os
import select
import signal
import sys
import time

import pytest

from agdb import engine, tracer
from agdb.tracer.store.tracefile import save
from tests.app.pilot import HANG_GUARD_S

LEAVE_ALTERNATE_SCREEN = b"\x1b[?1049l"


def _open_in_a_terminal(path) -> tuple[int, int]:
    """`agdb open PATH` in a pseudo-terminal: (pid, the terminal's fd)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes agdb, with the signals' default dispositions (a background suite ignores SIGINT)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        os.environ.update(TERM="xterm-256color")
        os.execv(sys.executable, [sys.executable, "-m", "agdb", "open", str(path)])
    return pid, fd


def _read_until(fd: int, pid: int, screen: bytearray, condition) -> int | None:
    """Read the terminal until `condition()` holds or the child exits (its wait status then); HANG_GUARD_S guards."""
    end = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                screen.extend(os.read(fd, 65536))
            except OSError:
                pass
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if condition():
            return None
    raise AssertionError(f"the TUI neither showed its trace nor exited: {bytes(screen[-2000:])!r}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="drives a Linux pseudo-terminal")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_quits_the_tui_and_gives_the_terminal_back(tmp_path, signum):
    with tracer.record() as rec:
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
    path = tmp_path / "small.agdb"
    save(rec.trace, path, durable=False)
    pid, fd = _open_in_a_terminal(path)
    screen = bytearray()
    status = None
    try:
        status = _read_until(fd, pid, screen, lambda: b"step 0/" in screen)
        assert status is None, f"agdb exited before showing the trace: {bytes(screen[-2000:])!r}"
        shown = len(screen)
        os.kill(pid, signum)
        status = _read_until(fd, pid, screen, lambda: False)
    finally:
        if status is None:  # never leave the child behind
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signum, status
    assert LEAVE_ALTERNATE_SCREEN in screen[shown:], bytes(screen[-500:])
