"""`agdb serve`: the TUI served to a browser by textual-serve, on localhost, guarded by a token.

The server runs as a real subprocess on a port the OS said was free; every wait polls for its condition, with a
deadline only as a hang guard. Each server gets a marker in its environment, which its tabs and every process
under them inherit: the tests find what a server started by walking /proc for that marker.
"""
from __future__ import annotations

import asyncio
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agdb.app.demo import record_example
from agdb.app.export import ExportError, ExportRule
from agdb.app.serve import MAX_HEIGHT, MAX_WIDTH, clamp_size
from agdb.tracer.store.tracefile import save

aiohttp = pytest.importorskip("aiohttp")  # textual-serve's web server: installed with it

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
"""Hang guard of every wait: generous, since the machine may be loaded."""
MARK = "AGDB_SERVE_TEST_MARK"
CONTROL = re.compile(rb"\x1b\[[0-9;?]*[a-zA-Z]")
"""A CSI sequence: a cursor move, a colour."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """An `agdb serve` subprocess, its marker and the address it printed."""

    def __init__(self, tmp_path: Path, *argv: str) -> None:
        self.mark = uuid.uuid4().hex
        self.port = _free_port()
        env = {**os.environ, MARK: self.mark}
        self.proc = subprocess.Popen([sys.executable, "-m", "agdb", "serve", *argv, "--port", str(self.port)],
                                     cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err = b""
        self.url = self._announced_url()
        self.token = self.url.rsplit("token=", 1)[1]
        self.base = f"http://localhost:{self.port}"

    def _announced_url(self) -> str:
        """The address in the "serving" line on stderr, read as it comes (the server keeps running)."""
        deadline = time.monotonic() + TIMEOUT
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stderr, selectors.EVENT_READ)
            while (found := re.search(rb"serving .* on (\S+) ", self.err)) is None:
                assert time.monotonic() < deadline and self.proc.poll() is None, self.err.decode()
                if selector.select(timeout=0.5):
                    self.err += os.read(self.proc.stderr.fileno(), 4096)
        return found.group(1).decode()

    def processes(self) -> list[int]:
        """The pids of the live processes carrying this server's marker, the server itself excepted."""
        return [pid for pid in _marked(self.mark) if pid != self.proc.pid]

    def stop(self, signum: int = signal.SIGINT) -> tuple[int, str]:
        """Signal the server, wait for it to exit; its status and all it wrote on stderr."""
        self.proc.send_signal(signum)
        _, rest = self.proc.communicate(timeout=TIMEOUT)
        return self.proc.returncode, (self.err + rest).decode()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        for pid in self.processes():  # never leave a test's processes behind, even when it failed
            os.kill(pid, signal.SIGKILL)


def _marked(mark: str) -> list[int]:
    """Pids of the processes whose environment holds MARK=mark (a zombie's environment reads empty)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:  # gone, or not ours
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
    return found


def _wait_until_gone(served: Served) -> None:
    """Poll until no process of the server is left (only the kernel's reaping is waited for)."""
    deadline = time.monotonic() + TIMEOUT
    while left := served.processes():
        assert time.monotonic() < deadline, f"left behind: {[_cmdline(pid) for pid in left]}"
        time.sleep(0.05)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"{pid} (gone)"


@pytest.fixture
def serving(tmp_path):
    """Start `agdb serve ...` in tmp_path; every server is ended, with its processes, after the test."""
    started: list[Served] = []

    def start(*argv: str) -> Served:
        started.append(Served(tmp_path, *argv))
        return started[-1]

    yield start
    for served in started:
        served.close()


@pytest.fixture
def demo_file(tmp_path) -> Path:
    path = tmp_path / "demo.agdb"
    save(record_example(), path)
    return path


def _run(coroutine):  # noqa: ANN001, ANN202
    """asyncio.run with a hang guard over the whole visit. Screen.until's deadline alone does not end a visit
    waiting for what never comes: with a title that never appeared, the visit was still waiting on the tab's
    websocket after 15 minutes, instead of failing. With this guard it fails with a TimeoutError."""
    return asyncio.run(asyncio.wait_for(coroutine, 3 * TIMEOUT))


class Screen:
    """What a tab's websocket has drawn so far."""

    def __init__(self, ws) -> None:  # noqa: ANN001 - aiohttp's ClientWebSocketResponse
        self.ws = ws
        self.data = b""  # drawn since the last keys sent

    async def until(self, text: bytes) -> None:
        """Read what the tab draws until `text` appears in what it drew since the last keys, terminal control
        sequences left out (they may split a line's words)."""
        deadline = time.monotonic() + TIMEOUT
        while text not in CONTROL.sub(b"", self.data):
            left = deadline - time.monotonic()
            assert left > 0, self.data[-500:]
            message = await self.ws.receive(timeout=left)
            assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message
            self.data += message.data if isinstance(message.data, bytes) else message.data.encode()

    async def keys(self, text: str) -> None:
        """Type `text`, one message per key as a browser sends them."""
        self.data = b""
        for key in text:
            await self.ws.send_json(["stdin", key])


def _ws_url(served: Served, token: str | None = None, size: str = "width=200&height=30") -> str:
    return f"ws://localhost:{served.port}/ws/{served.token if token is None else token}?{size}"


def _open_tab(session, served: Served, **kwargs):  # noqa: ANN001, ANN202 - aiohttp's
    return session.ws_connect(_ws_url(served), origin=served.base, **kwargs)


SCRIPT = "import agdb.engine as torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n"


@pytest.mark.parametrize("name, title", [("demo.agdb", "demo.agdb · 193 events"), ("model.py", "model.py · ")])
def test_serve_on_a_free_localhost_port(tmp_path, serving, name, title):
    """`agdb serve TRACE|SCRIPT --port P` prints its address with a token; the page there is textual-serve's,
    a tab gets the TUI (on the trace, or on the script recorded for that tab), and SIGINT stops the server with
    status 0."""
    target = tmp_path / name
    if name.endswith(".agdb"):
        save(record_example(), target)
    else:
        target.write_text(SCRIPT)
    served = serving(str(target))
    assert served.url == f"http://localhost:{served.port}/?token={served.token}" and len(served.token) >= 32

    async def visit() -> str:
        async with aiohttp.ClientSession() as session:
            async with session.get(served.url) as response:
                assert response.status == 200
                page = await response.text()
            async with _open_tab(session, served) as ws:
                await Screen(ws).until(title.encode())  # the title line of the step screen
        return page

    page = _run(visit())
    assert f'"ws://localhost:{served.port}/ws/{served.token}"' in page and f"agdb · {name}" in page
    status, err = served.stop(signal.SIGINT)
    assert status == 0, err
    assert "Traceback" not in err


def test_a_page_or_websocket_without_the_token_or_from_another_origin_is_refused(serving, demo_file):
    """No token, a wrong token, a foreign Origin or a foreign Host: refused (403) and no tab started; the right
    token from the page's own origin gets a tab."""
    served = serving(str(demo_file))
    other = "x" * len(served.token)

    async def refused() -> list[int]:
        statuses = []
        async with aiohttp.ClientSession() as session:
            for url, headers in [(served.base + "/", {}), (f"{served.base}/?token={other}", {}),
                                 (served.url, {"Host": f"attacker.example:{served.port}"})]:
                async with session.get(url, headers=headers) as response:
                    statuses.append(response.status)
            for url, headers in [(f"ws://localhost:{served.port}/ws?width=80&height=24", {}),  # textual-serve's
                                 (_ws_url(served, token=""), {}), (_ws_url(served, token=other), {}),
                                 (_ws_url(served), {"Origin": "http://attacker.example"}),
                                 (_ws_url(served), {"Origin": f"http://localhost:{served.port + 1}"}),
                                 (_ws_url(served), {"Host": f"attacker.example:{served.port}",
                                                    "Origin": f"http://attacker.example:{served.port}"})]:
                with pytest.raises(aiohttp.WSServerHandshakeError) as refusal:
                    async with session.ws_connect(url, headers=headers):
                        pass
                statuses.append(refusal.value.status)
        return statuses

    assert _run(refused()) == [403] * 4 + [404] + [403] * 4  # /ws/ with no token matches no route
    assert served.processes() == []  # refused before any tab was started

    async def accepted() -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as ws:
                await Screen(ws).until(b"step 0/")

    _run(accepted())
    status, err = served.stop()
    assert status == 0 and "refused a connection" in err


def _peak_rss_kb(pids: list[int]) -> int:
    """The largest peak resident set (VmHWM) among `pids`, in kB."""
    peaks = [0]
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]))
    return max(peaks)


def test_a_huge_resize_is_clamped(serving, demo_file):
    """A resize to 20000x20000 is clamped: the tab redraws (and steps) at the clamped size, and its process never
    held more than 300 MB."""
    served = serving(str(demo_file))

    async def resize() -> int:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as ws:
                screen = Screen(ws)
                await screen.until(b"step 0/")
                await ws.send_json(["resize", {"width": 20000, "height": 20000}])
                await screen.keys("l")  # handled after the resize: its redraw is at the new size
                await screen.until(b"step 1/")
                return _peak_rss_kb(served.processes())

    assert 0 < _run(resize()) < 300 * 1024


def test_clamp_size_bounds_what_a_browser_asks():
    """Sizes are ints within 1..MAX: too large, negative, fractional, non-numeric and missing values."""
    assert clamp_size(20000, 20000) == (MAX_WIDTH, MAX_HEIGHT)
    assert clamp_size(-5, 0) == (1, 1)
    assert clamp_size("120", 40.7) == (120, 40)
    assert clamp_size("wide", None) == (80, 24)
    assert clamp_size(float("inf"), [3]) == (80, 24)


def test_max_sessions_refuses_a_tab_past_the_limit(serving, demo_file):
    """With a limit of two tabs (--max-sessions=2), a third tab is refused (503) while two are open, and accepted
    once one closed."""
    served = serving(str(demo_file), "--max-sessions", "2")

    async def tabs() -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as first, _open_tab(session, served) as second:
                await Screen(first).until(b"step 0/")
                await Screen(second).until(b"step 0/")
                with pytest.raises(aiohttp.WSServerHandshakeError) as refusal:
                    async with _open_tab(session, served):
                        pass
                assert refusal.value.status == 503
            deadline = time.monotonic() + TIMEOUT  # the closed tabs end on the server's side, soon
            while True:
                try:
                    async with _open_tab(session, served) as third:
                        await Screen(third).until(b"step 0/")
                        return
                except aiohttp.WSServerHandshakeError as e:
                    assert e.status == 503 and time.monotonic() < deadline
                    await asyncio.sleep(0.05)

    _run(tabs())


SPAWNS = ("import subprocess, sys\n"
          "import agdb.engine as torch\n"
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])  # outlives the recording\n"
          "x = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_stopping_the_server_ends_every_process_of_its_tabs(tmp_path, serving, signum):
    """Two tabs open, each with a process its script started: after the server exits on SIGTERM (or SIGHUP), no
    process it started is left."""
    script = tmp_path / "spawns.py"
    script.write_text(SPAWNS)
    served = serving(str(script))

    async def two_tabs() -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as first, _open_tab(session, served) as second:
                await Screen(first).until(b"step 0/")
                await Screen(second).until(b"step 0/")
                assert len(served.processes()) == 4  # two tabs, and the sleeper of each
                status, err = served.stop(signum)
                assert status == 0, err

    _run(two_tabs())
    _wait_until_gone(served)


def test_closing_a_tab_ends_its_processes(tmp_path, serving):
    """A closed tab's agdb and the process its script started end; the server runs on."""
    script = tmp_path / "spawns.py"
    script.write_text(SPAWNS)
    served = serving(str(script))

    async def one_tab() -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as ws:
                await Screen(ws).until(b"step 0/")
                assert len(served.processes()) == 2

    _run(one_tab())
    _wait_until_gone(served)
    assert served.proc.poll() is None


def test_a_tab_whose_server_was_killed_quits(serving, demo_file):
    """SIGKILL to the server (no cleanup is possible): its tab's agdb sees its input end and quits."""
    served = serving(str(demo_file))

    async def orphan() -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as ws:
                await Screen(ws).until(b"step 0/")
                served.proc.kill()
                served.proc.wait()

    _run(orphan())
    _wait_until_gone(served)


def test_export_is_off_in_a_served_tab_unless_export_dir(tmp_path, serving, demo_file):
    """Without --export-dir the export key says export is off; with it, a name leaving the directory is refused
    and a name inside it is written there."""
    served = serving(str(demo_file))
    outside = tmp_path / "escaped.dot"
    exports = tmp_path / "exports"
    exports.mkdir()

    async def press(served: Served, *steps: tuple[str, bytes]) -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as ws:
                screen = Screen(ws)
                await screen.until(b"step 0/")
                for keys, shown in steps:
                    await screen.keys(keys)
                    await screen.until(shown)

    _run(press(served, ("e", b"export is off")))
    confined = serving(str(demo_file), "--export-dir", str(exports))
    # The prompt opens with its suggested name selected: what is typed replaces it. The screen is redrawn by
    # changed cells, so what is typed is not waited for, only the notifications.
    _run(press(confined, ("e", b"agdb-step0."), ("../escaped.dot\r", b"export failed"),
                      ("e", b"agdb-step0."), ("graph.dot\r", b"wrote ")))
    assert not outside.exists()
    assert (exports / "graph.dot").read_text().startswith("digraph")  # "wrote" is notified once it is written


def test_export_rule_confines_names_to_its_directory(tmp_path):
    """ExportRule: relative names land inside the directory; `..`, absolute paths elsewhere and symbolic links out
    are refused; off refuses everything; the default allows any path."""
    inside = ExportRule(directory=str(tmp_path))
    assert inside.target("a.svg") == str(tmp_path.resolve() / "a.svg")
    assert inside.target(str(tmp_path / "sub" / "b.dot")) == str(tmp_path.resolve() / "sub" / "b.dot")
    (tmp_path / "link").symlink_to("/tmp")
    for bad in ("../a.svg", "/etc/a.dot", "link/a.dot", "."):
        with pytest.raises(ExportError, match="exports go inside"):
            inside.target(bad)
    with pytest.raises(ExportError, match="export is off"):
        ExportRule(is_off=True).target("a.svg")
    assert ExportRule().target("/anywhere/a.svg") == "/anywhere/a.svg"


def test_serve_of_a_script_with_torch_records_real_torch(tmp_path, serving):
    """`agdb serve SCRIPT --torch`: a tab records the script on real torch through the bridge."""
    pytest.importorskip("torch")
    script = tmp_path / "real.py"
    script.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n")
    served = serving(str(script), "--torch")

    async def visit() -> None:
        async with aiohttp.ClientSession() as session:
            async with _open_tab(session, served) as ws:
                await Screen(ws).until(b"step 0/")

    _run(visit())
    status, err = served.stop()
    assert status == 0 and "Traceback" not in err and "KeyError" not in err, err


def test_serve_on_another_host_warns(tmp_path, demo_file):
    """--host other than localhost: a warning says the TUI is on the network, before the address."""
    proc = subprocess.Popen([sys.executable, "-m", "agdb", "serve", str(demo_file), "--host", "0.0.0.0", "--port",
                             str(_free_port())], cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        line = proc.stderr.readline().decode()
        # stopped once it serves (its handlers armed): a SIGINT before that is lost where the suite runs in the
        # background, which starts its children with SIGINT ignored
        serving = proc.stderr.readline().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=TIMEOUT)
        finally:
            proc.kill()  # a server that did not stop must not outlive the test
            proc.wait()
    assert line.startswith("agdb: warning: --host 0.0.0.0 puts the TUI on the network")
    assert serving.startswith("agdb: serving "), serving


def test_serve_of_a_bad_trace_fails_before_serving(tmp_path):
    """`agdb serve BAD.agdb` says why and exits 1 without listening."""
    bad = tmp_path / "bad.agdb"
    bad.write_text("garbage\n")
    proc = subprocess.run([sys.executable, "-m", "agdb", "serve", str(bad), "--port", str(_free_port())],
                          cwd=tmp_path, capture_output=True, timeout=TIMEOUT)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith("agdb: ") and "not an agdb trace" in err
    assert "serving" not in err


def test_serve_on_a_taken_port_says_so_before_announcing(tmp_path, demo_file):
    """`agdb serve --port P` with P already listened on: one line saying so, exit 1, no "serving" line."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "agdb", "serve", str(demo_file), "--port", str(port)],
                              cwd=tmp_path, capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 1
    assert proc.stderr.decode() == f"agdb: cannot serve on localhost:{port}: Address already in use\n"
