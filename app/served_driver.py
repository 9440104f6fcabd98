"""The Textual driver of a tab that `agdb serve` started: textual's WebDriver, which quits when its server is gone.

textual's WebDriver reads keys and resizes from stdin, a pipe from the server. When the server dies without
telling the app to quit (SIGKILL, a crash), stdin ends, WebDriver's input thread returns, and the app runs on with
no one to talk to, redrawing into a broken pipe. This driver quits the app as `q` would, instead.

Loaded by name in the tab's process (TEXTUAL_DRIVER, set by app/serve.py), so it imports textual only: not
aiohttp or textual-serve, which the tab does not need.
"""
from __future__ import annotations

import asyncio

from textual.drivers.web_driver import WebDriver


class ServedDriver(WebDriver):
    """WebDriver whose app quits when its input ends before the app asked it to stop."""

    _loop: asyncio.AbstractEventLoop | None = None

    def start_application_mode(self) -> None:
        self._loop = asyncio.get_running_loop()  # the app's loop, for the input thread to reach
        super().start_application_mode()

    def run_input_thread(self) -> None:
        super().run_input_thread()
        # exit_event is set by stop_application_mode: the app is stopping anyway. Otherwise stdin has ended (or its
        # reader failed): the server is gone, so the app quits the way `q` quits it.
        if self.exit_event.is_set() or self._loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._app.run_action("quit"), self._loop)
        except RuntimeError:  # the loop closed meanwhile: the app has ended
            pass
