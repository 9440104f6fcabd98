"""`agdb serve` (issue 16, item 8): the TUI served to a browser by textual-serve, on localhost.

The server runs as a real subprocess on a port the OS said was free; every wait polls with a deadline.
"""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agdb.app.demo import record_example
from agdb.tracer.store.tracefile import save

aiohttp = pytest.importorskip("aiohttp")  # textual-serve's web server: installed with it

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path: Path, *argv: str) -> subprocess.Popen:
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-m", "agdb", "serve", *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def _fetch_page_and_screen(url: str, proc: subprocess.Popen) -> tuple[str, bytes]:
    """The page at `url` once the server answers (polled), then what the served TUI draws on its websocket
    until its status line appears."""
    deadline = time.monotonic() + TIMEOUT
    async with aiohttp.ClientSession() as session:
        while True:
            assert proc.poll() is None, proc.communicate()[1].decode()
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        page = await response.text()
                        break
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, "the server never answered"
            await asyncio.sleep(0.05)
        screen = b""
        async with session.ws_connect(f"{url}ws?width=200&height=30") as ws:
            while b"step 0/" not in screen:
                left = deadline - time.monotonic()
                assert left > 0, screen[-500:]
                message = await ws.receive(timeout=left)
                assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message
                screen += message.data if isinstance(message.data, bytes) else message.data.encode()
    return page, screen


SCRIPT = "import agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n"


@pytest.mark.parametrize("name, title", [("demo.agdb", "demo.agdb · 193 events"), ("model.py", "model.py · ")])
def test_serve_on_a_free_localhost_port(tmp_path, name, title):
    """`agdb serve TRACE|SCRIPT --port P` answers on localhost:P with textual-serve's page, a tab gets the TUI
    (on the trace, or on the script recorded for that tab), and SIGINT stops the server with status 0."""
    target = tmp_path / name
    if name.endswith(".agdb"):
        save(record_example(), target)
    else:
        target.write_text(SCRIPT)
    port = _free_port()
    proc = _serve(tmp_path, str(target), "--port", str(port))
    try:
        page, screen = asyncio.run(_fetch_page_and_screen(f"http://localhost:{port}/", proc))
        assert f"ws://localhost:{port}/ws" in page and f"agdb · {name}" in page
        assert title.encode() in screen  # the title line of the step screen
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert f"agdb: serving {name} on http://localhost:{port}" in err.decode()
    assert "Traceback" not in err.decode()


def test_serve_of_a_bad_trace_fails_before_serving(tmp_path):
    """`agdb serve BAD.agdb` says why and exits 1 without listening."""
    bad = tmp_path / "bad.agdb"
    bad.write_text("garbage\n")
    proc = _serve(tmp_path, str(bad), "--port", str(_free_port()))
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1 and err.decode().startswith("agdb: ") and "not an agdb trace" in err.decode()
    assert "serving" not in err.decode()


def test_serve_on_a_taken_port_says_so_before_announcing(tmp_path):
    """`agdb serve --port P` with P already listened on: one line saying so, exit 1, no "serving" line."""
    trace = tmp_path / "demo.agdb"
    save(record_example(), trace)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve(tmp_path, str(trace), "--port", str(port))
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1
    assert err.decode() == f"agdb: cannot serve on localhost:{port}: Address already in use\n"
