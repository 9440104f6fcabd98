"""Helpers for the Pilot tests of the TUI."""
from __future__ import annotations

from agdb.app.screens.step import StepScreen


async def opened(app, pilot) -> StepScreen:
    """The step screen, once the app has painted it."""
    await pilot.pause()
    assert isinstance(app.screen, StepScreen)
    return app.screen
