"""`agdb serve`: the TUI in a web browser, through the textual-serve package.

textual-serve runs a web server whose page opens a terminal in the browser; each tab that connects starts its
own process of a command, here `agdb open TRACE` or `agdb tui SCRIPT` with this Python, and relays the keys and
the screen. The TUI can do whatever agdb can (record a script, write an export), so the server guards it:

- a random token, printed in the address at start (as Jupyter does): the page and its websocket need it;
- the websocket's Origin must be the page's own (another site's page cannot drive a tab), and the Host must be
  a name of the address served (a rebound DNS name is refused);
- terminal sizes are clamped (each cell costs the tab memory), and at most --max-sessions tabs run at once;
- each tab runs in its own session (process group), and that whole group is killed when the tab closes or the
  server stops, by any signal it can catch; a tab whose server died anyway quits by itself (served_driver.py).

Imports aiohttp and textual-serve; the engine and tracer never import this module.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import secrets
import shlex
import signal
import socket
import sys
from urllib.parse import urlsplit

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

MAX_WIDTH = 500
"""Widest terminal a tab gets, in cells: a 4K screen at a small font is about 480 columns."""
MAX_HEIGHT = 200
"""Tallest terminal a tab gets, in cells."""
QUIT_GRACE_S = 2.0
"""How long a tab's app has to quit after it is told to, before its process group is killed."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that stop the server cleanly (its tabs' processes are ended first)."""
DRIVER = "agdb.app.served_driver:ServedDriver"
"""The Textual driver of each tab: textual's WebDriver, which quits when the server is gone."""
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
"""agdb's copy of textual-serve's page, whose web font comes from the server itself (textual-serve's links to a
font host on the internet, which an offline machine cannot reach)."""
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
"""Names of this machine that are always accepted in the Host header."""

log = logging.getLogger("textual-serve")


def clamp_size(width: object, height: object, default: tuple[int, int] = (80, 24)) -> tuple[int, int]:
    """A terminal size a tab may have: ints in 1..MAX_WIDTH and 1..MAX_HEIGHT (`default` for what is not a number)."""
    def one(value: object, fallback: int, most: int) -> int:
        try:
            number = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError, OverflowError):
            number = fallback
        return max(1, min(number, most))

    return one(width, default[0], MAX_WIDTH), one(height, default[1], MAX_HEIGHT)


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the process group `pgid` (none left is fine)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class Tab(AppService):
    """One browser tab's agdb: started in a session of its own, so that it and every process under it form one
    process group, which ends with the tab."""

    def __init__(self, argv: list[str], groups: set[int], **kwargs) -> None:  # noqa: ANN003 - AppService's
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = argv
        self.groups = groups  # the server's live process groups: this tab adds its own and removes it when ended
        self._ending: asyncio.Future[None] | None = None

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width, height)
        environment["TEXTUAL_DRIVER"] = DRIVER
        return environment

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        # exec, not the shell textual-serve uses: the shell would be the group's leader and the app its child.
        # start_new_session: the app leads a new session and process group, so killpg reaches all it started.
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self._build_environment(width, height), start_new_session=True)
        self.groups.add(process.pid)
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        """Tell the app to quit, give it QUIT_GRACE_S to do so, then kill whatever is left of its process group.
        Called by the tab's handler and by the server's shutdown, maybe both: the second waits for the first."""
        if self._ending is None:
            self._ending = asyncio.ensure_future(self._end())
        await asyncio.shield(self._ending)

    async def _end(self) -> None:
        process, task = self._process, self._task
        if process is None or task is None:
            return
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        if process.returncode is None:
            await self.send_meta({"type": "quit"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), QUIT_GRACE_S)
        kill_group(process.pid)  # what the app left behind, or the app itself when it did not quit in time
        await process.wait()
        await task  # ends now: every writer of the app's stdout is gone
        self.groups.discard(process.pid)


class AgdbServer(Server):
    """textual-serve's server, guarded (the module's docstring says how), saying where it listens in agdb's
    words (on stderr, as agdb's notes go)."""

    def __init__(self, argv: list[str], host: str, port: int, title: str, max_sessions: int = 4) -> None:
        super().__init__(shlex.join(argv), host=host, port=port, title=title, templates_path=TEMPLATES)
        self.argv = argv
        self.max_sessions = max_sessions
        self.token = secrets.token_urlsafe(24)
        """The secret every page and websocket URL carries; only the person who started the server sees it."""
        self.tabs: set[Tab] = set()
        """The tabs connected now."""
        self.groups: set[int] = set()
        """The process group of every tab process not yet reaped: killed when the server stops."""

    # -- who may connect ------------------------------------------------------------------------------------
    def is_host_allowed(self, host_header: str) -> bool:
        """Whether the Host header names the address served: any name when listening on every interface (the
        token then guards alone), else the --host name or this machine's loopback names, with the port."""
        if _is_wildcard(self.host):
            return True
        names = {self.host.lower(), *LOCAL_NAMES}
        return any(host_header.lower() in (f"{name}:{self.port}", f"[{name}]:{self.port}") for name in names)

    def refusal(self, request: web.Request, token: str) -> str:
        """Why `request` may not open the TUI ("" when it may)."""
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return "no valid token: open the address `agdb serve` printed, token included"
        if not self.is_host_allowed(request.host):
            return f"Host {request.host!r} is not the address served"
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
            return f"Origin {origin!r} is not this server's"  # another site's page
        return ""

    # -- routes ---------------------------------------------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        # The websocket's path carries the token (the page's script appends `?width=..&height=..` to the URL it
        # is given, so a query would not survive). The unguarded route of textual-serve is left without handler.
        app.router.add_get("/ws/{token}", self.handle_tab, name="tab")
        return app

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's route without a token: refused."""
        return web.Response(status=403, text="agdb: no valid token: open the address `agdb serve` printed\n")

    async def handle_index(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        """The page, for a request with the token; it points its websocket at the Host it was asked by, so that
        its Origin matches."""
        why = self.refusal(request, request.query.get("token", ""))
        if why:
            return web.Response(status=403, text=f"agdb: {why}\n")
        base = f"http://{request.host}"
        context = {"font_size": max(6, min(_to_int(request.query.get("fontsize"), 16), 64)),
                   "app_websocket_url": f"ws://{request.host}{request.app.router['tab'].url_for(token=self.token)}",
                   "config": {"static": {"url": f"{base}/static/"}},
                   "application": {"name": self.title}}
        from aiohttp_jinja2 import render_template

        return render_template("app_index.html", request, context)

    async def handle_tab(self, request: web.Request) -> web.StreamResponse:
        """One tab's websocket: checked, then relayed to its own agdb process until either side closes."""
        why = self.refusal(request, request.match_info["token"])
        if why:
            log.warning("refused a connection: %s", why)
            return web.Response(status=403, text=f"agdb: {why}\n")
        if len(self.tabs) >= self.max_sessions:
            log.warning("refused a tab: %d %s open (--max-sessions %d)", len(self.tabs),
                        "is" if len(self.tabs) == 1 else "are", self.max_sessions)
            return web.Response(status=503, text=f"agdb: {len(self.tabs)} tabs are open, the most this server "
                                                 f"allows (--max-sessions {self.max_sessions}); close one\n")
        websocket = web.WebSocketResponse(heartbeat=15)
        width, height = clamp_size(request.query.get("width"), request.query.get("height"))
        await websocket.prepare(request)
        tab = Tab(self.argv, self.groups, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                  close=websocket.close, download_manager=self.download_manager, debug=self.debug)
        self.tabs.add(tab)
        try:
            await tab.start(width, height)
            await self._relay(websocket, tab)
        finally:
            self.tabs.discard(tab)
            await tab.stop()  # shielded: a cancelled handler (the server stopping) still ends its processes
            await websocket.close()
        return websocket

    async def _relay(self, websocket: web.WebSocketResponse, tab: Tab) -> None:
        """Pass the browser's messages to the tab; malformed ones are dropped, sizes clamped."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                kind, data = message.json()
            except (ValueError, TypeError):
                continue
            if kind == "stdin" and isinstance(data, str):
                await tab.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await tab.set_terminal_size(*clamp_size(data.get("width"), data.get("height")))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await tab.blur()
            elif kind == "focus":
                await tab.focus()

    # -- start and stop -------------------------------------------------------------------------------------
    def initialize_logging(self) -> None:
        """One plain line per note on stderr, as agdb's notes go (textual-serve's rich handler draws tracebacks)."""
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("agdb: %(message)s"))
        log.handlers[:] = [handler]
        log.setLevel(logging.WARNING)
        log.propagate = False

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: the address is announced once it is bound (`_run`)."""

    async def on_shutdown(self, app: web.Application) -> None:
        """End every tab (its app is told to quit, then its process group killed) before the server exits."""
        await asyncio.gather(*(tab.stop() for tab in list(self.tabs)), return_exceptions=True)

    def serve(self, debug: bool = False) -> None:
        """Serve until a stop signal; whatever happens, no tab's process outlives the server.

        Raises:
            OSError: the address cannot be listened on.
        """
        self.debug = debug
        self.initialize_logging()
        try:
            asyncio.run(self._run())
        finally:
            for pgid in list(self.groups):  # a tab whose stop was cut short
                kill_group(pgid)

    async def _run(self) -> None:
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in STOP_SIGNALS:
            loop.add_signal_handler(number, stopped.set)
        runner = web.AppRunner(await self._make_app(), handle_signals=False, shutdown_timeout=QUIT_GRACE_S + 1)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
            sys.stderr.write(f"agdb: serving {self.title.removeprefix('agdb · ')} on {self.public_url}/?token="
                             f"{self.token} (Ctrl-C stops)\n")
            sys.stderr.flush()
            await stopped.wait()
        finally:
            await runner.cleanup()  # calls on_shutdown, then ends the handlers


def _is_wildcard(host: str) -> bool:
    """Whether `host` means every interface (0.0.0.0, ::, or empty)."""
    try:
        return host == "" or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _to_int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def is_local(host: str) -> bool:
    """Whether `host` names only this machine's loopback (where `agdb serve` listens unless told otherwise)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def command_for(argv: list[str]) -> list[str]:
    """The command each browser tab runs: `python -m agdb ARGV` with this Python (which has agdb installed)."""
    return [sys.executable, "-m", "agdb", *argv]


def bind_error(host: str, port: int) -> str:
    """Why `host`:`port` cannot be listened on ("" when it can): checked before serving, because the server
    announces itself before it binds."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        return f"cannot serve on {host}:{port}: {getattr(e, 'strerror', None) or e}"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            try:
                s.bind(address)
            except OSError as e:
                return f"cannot serve on {host}:{port}: {e.strerror or e}"
    return ""


def serve(argv: list[str], host: str, port: int, title: str, max_sessions: int = 4) -> int:
    """Serve `agdb ARGV` until stopped; returns the exit status."""
    why = bind_error(host, port)
    if why:
        sys.stderr.write(f"agdb: {why}\n")
        return 1
    if not is_local(host):
        sys.stderr.write(f"agdb: warning: --host {host} puts the TUI on the network: anyone who can reach it and "
                         f"has the token can run agdb (and the script) as you\n")
    server = AgdbServer(command_for(argv), host=host, port=port, title=title, max_sessions=max_sessions)
    try:
        server.serve()
    except OSError as e:  # the port is taken, or the host is not ours
        sys.stderr.write(f"agdb: cannot serve on {host}:{port}: {e.strerror or e}\n")
        return 1
    return 0
