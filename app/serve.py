"""`agdb serve`: the TUI in a web browser, through the textual-serve package.

textual-serve runs a web server whose page opens a terminal in the browser; each page it serves starts its
own process of a command, here `agdb open TRACE` or `agdb tui SCRIPT` with this Python, and relays the
keys and the screen. The server binds to localhost by default: the TUI can do whatever agdb can, so it is
not put on the network unless the user asks (--host).
"""
from __future__ import annotations

import shlex
import socket
import sys

from textual_serve.server import Server


class AgdbServer(Server):
    """textual-serve's server, saying where it listens in agdb's words (on stderr, as agdb's notes go)."""

    async def on_startup(self, app) -> None:  # noqa: ANN001 - aiohttp's Application
        sys.stderr.write(f"agdb: serving {self.title.removeprefix('agdb · ')} on {self.public_url} "
                         f"(Ctrl-C stops)\n")
        sys.stderr.flush()


def command_for(argv: list[str]) -> str:
    """The shell command each browser tab runs: `python -m agdb ARGV` with this Python (which has agdb installed),
    quoted."""
    return shlex.join([sys.executable, "-m", "agdb", *argv])


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


def serve(argv: list[str], host: str, port: int, title: str) -> int:
    """Serve `agdb ARGV` until interrupted; returns the exit status."""
    why = bind_error(host, port)
    if why:
        sys.stderr.write(f"agdb: {why}\n")
        return 1
    server = AgdbServer(command_for(argv), host=host, port=port, title=title)
    try:
        server.serve()
    except OSError as e:  # the port is taken, or the host is not ours
        sys.stderr.write(f"agdb: cannot serve on {host}:{port}: {e.strerror or e}\n")
        return 1
    return 0
