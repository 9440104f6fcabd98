"""Helpers for the Pilot tests of the TUI.

A test waits for the condition it needs, never for a fixed time: a script's thread or a worker may take a
second on a quiet machine and much longer on a loaded one. The deadline is only a guard against a hang.
"""
from __future__ import annotations

import re
import time
from typing import Callable

from textual.widgets import Static

from agdb.app.screens.step import StepScreen

HANG_GUARD_S = 60.0
"""How long a Pilot test waits for a condition before it fails: far beyond a healthy run on a busy machine."""


async def opened(app, pilot) -> StepScreen:
    """The step screen, once the app has painted it."""
    await pilot.pause()
    assert isinstance(app.screen, StepScreen)
    return app.screen


async def wait_for(pilot, condition: Callable[[], bool], what: str) -> None:
    """Let the app run until `condition()` holds; fail saying `what` did not happen after HANG_GUARD_S."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {HANG_GUARD_S:.0f} s"
        await pilot.pause(0.05)
    await pilot.pause()


async def recorded(app, pilot) -> StepScreen:
    """The step screen, once the script being recorded has ended and its trace is open."""
    # the script's thread is not a Textual worker (NOTE [the script's thread]): nothing to await but the screen
    await wait_for(pilot, lambda: isinstance(app.screen, StepScreen), "the script's trace was never opened")
    return app.screen


def status_text(app) -> str:
    """What the loading screen's status line says ("" once another screen is up)."""
    found = app.screen.query("#status").results(Static)
    return "".join(str(status.render()) for status in found)


async def recording_began(app, pilot) -> None:
    """Wait until the script under recording has recorded at least one event (the status line counts them)."""
    await wait_for(pilot, lambda: re.search(r"… [1-9][\d,]* events", status_text(app)) is not None,
                   "the script never reported a recorded event")
