"""The `?` help lists every key the TUI answers to: the step screen's, the app's (`o`, ctrl+c) and the panels'
(`v`, `<`, `>`, the cursor keys), read from the BINDINGS themselves so that the help cannot drift from them."""
from __future__ import annotations

from rich.console import Console

from agdb.app.app import AgdbApp
from agdb.app.screens.help import HelpScreen, keys_text
from agdb.app.screens.step import StepScreen
from agdb.widgets.graph_canvas import GraphCanvas
from agdb.widgets.lazy_list import LazyList
from tests.app.pilot import opened


def _every_binding():
    seen = []
    for owner in (StepScreen, AgdbApp, GraphCanvas, LazyList):
        for b in owner.BINDINGS:
            if not b.action.startswith("app.") or owner is AgdbApp:
                seen.append(b)
    return seen


def _help_text(screen: HelpScreen) -> str:
    console = Console(width=200, color_system=None, record=True)
    for static in screen.query("Static"):
        console.print(static.content)
    return " ".join(console.export_text().split())


async def test_help_lists_every_binding(demo_trace):
    """Each binding of the step screen, the app, the graph panel and the list panels is in the help, with its
    keys as typed and its description."""
    app = AgdbApp(trace=demo_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = _help_text(app.screen)
        for b in _every_binding():
            words = " ".join((b.tooltip or b.description).split())
            assert f"{keys_text(b)} {words}" in text, (keys_text(b), words)
        for typed in ("v", "<", ">", "o"):
            assert f" {typed}" in text


def test_readme_and_tui_doc_count_the_panels():
    """README.md and docs/tui.md give the panels' digit keys as `1` … `N` for the N panels there are, and
    docs/tui.md names every panel's key in its table."""
    from pathlib import Path

    from agdb.app.screens.panels import PANELS

    root = Path(__file__).resolve().parents[2]
    n = len(PANELS)
    numbers = {9: "Nine", 8: "Eight", 10: "Ten"}
    for doc in (root / "README.md", root / "docs" / "tui.md"):
        text = doc.read_text()
        assert f"`1` … `{n}`" in text, doc
        assert f"`1` … `{n - 1}`" not in text, doc
    assert f"{numbers[n]} panels" in (root / "docs" / "tui.md").read_text()
    tui = (root / "docs" / "tui.md").read_text()
    for key in ("`v`", "`<` / `>`", "`o`", "`z`", "ctrl+p"):
        assert key in tui
