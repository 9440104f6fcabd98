"""`agdb serve` in a real browser: headless Chromium opens the page, the TUI draws, a key moves it, and no request
leaves the machine.

Chromium comes from the system's packages (`make test` installs it where it can, as `make demo` installs
Graphviz); Playwright drives it through that binary and downloads no browser of its own. Every wait polls for its
condition, with a deadline only as a hang guard.
"""
from __future__ import annotations

import shutil
import time
from urllib.parse import urlsplit

import pytest

from tests.app.test_serve import TIMEOUT, demo_file, serving  # noqa: F401 - fixtures

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e '.[dev]')")
CHROMIUM = next((path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))),
                None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _settled(page, clip: dict) -> bytes:
    """A screenshot of `clip` once two in a row are the same: the TUI has finished drawing."""
    deadline = time.monotonic() + TIMEOUT
    last = page.screenshot(clip=clip)
    while True:
        page.wait_for_timeout(200)  # the browser's own clock: lets the page draw between two looks
        shot = page.screenshot(clip=clip)
        if shot == last:
            return shot
        assert time.monotonic() < deadline, "the page never stopped drawing"
        last = shot


def test_served_tui_in_chromium_answers_a_key_offline(tmp_path, serving, demo_file):  # noqa: F811 - fixtures
    """The page opens in headless Chromium, the TUI draws, `l` changes the screen (the status line's step), a
    screenshot is written, and every request the page made went to this machine."""
    served = serving(str(demo_file))
    requested: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.on("request", lambda request: requested.append(request.url))
            # a request for another machine is noted above and never sent
            page.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in LOCAL_HOSTS
                       else route.abort())
            page.on("websocket", lambda socket: requested.append(socket.url))
            page.goto(served.url)
            page.wait_for_selector("body.-first-byte", timeout=TIMEOUT * 1000)  # the tab's first output arrived
            page.click("#terminal")  # keys go to the terminal once it has the focus, as for a person
            whole = {"x": 0, "y": 0, "width": 1200, "height": 800}
            before = _settled(page, whole)
            page.keyboard.press("l")
            deadline = time.monotonic() + TIMEOUT
            while page.screenshot(clip=whole) == before:
                assert time.monotonic() < deadline, "the screen did not change after `l`"
                page.wait_for_timeout(100)
            shot = tmp_path / "served.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and shot.stat().st_size > 10_000
    assert requested and any(url.startswith("ws") for url in requested)
    away = [url for url in requested if urlsplit(url).hostname not in LOCAL_HOSTS]
    assert away == [], away
