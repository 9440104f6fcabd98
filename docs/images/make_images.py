"""Regenerate the README's pictures: `.venv/bin/python docs/images/make_images.py` from the repository root.

- tui-demo.svg: the TUI on the built-in example (`agdb demo`) at 120x40, at the first step where two tasks wait
  in the ready queue (the diamond's branches), the task pushed there selected: a Textual screenshot
  (`App.save_screenshot`) taken through a headless `run_test`.
- export-demo.svg: `agdb export demo.agdb -o docs/images/export-demo.svg --step STEP` of the same trace at the
  same step, run as a user runs it (Graphviz's `dot` must be installed).
- export-mlp.svg: docs/examples/train_mlp.py recorded on the engine and drawn folded
  (`agdb record` then `agdb export --collapse`).

The demo records on a fresh thread, so its seq_nrs and steps are the same in every run; what changes between
two runs of this script is only what agdb draws differently.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from agdb.app.app import AgdbApp
from agdb.app.demo import record_example
from agdb.tracer.store.events import TaskPushed
from agdb.tracer.store.tracefile import save

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SIZE = (120, 40)
"""Terminal size of the screenshot: every panel of the wide layout is on screen."""


def tie_push(trace) -> TaskPushed:
    """The first push that leaves two tasks in one ready queue: the diamond's branches, ordered by seq_nr."""
    return next(e for e in trace if isinstance(e, TaskPushed) and e.queue_length >= 2)


async def screenshot(trace, push: TaskPushed, path: Path) -> None:
    """Open the TUI on `trace` at the step of `push`, select the pushed node and save an SVG of the screen."""
    app = AgdbApp(trace=trace, title="built-in example")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.screen.step = push.step
        app.screen.selected_node = push.node  # every panel marks it, the inspector shows it
        await pilot.pause()
        app.save_screenshot(filename=path.name, path=str(path.parent))


def agdb(*args: str) -> None:
    """Run `python -m agdb ARGS` as a user would, from the repository root; stop on failure."""
    subprocess.run([sys.executable, "-m", "agdb", *args], cwd=ROOT, check=True)


def main() -> None:
    """Write the pictures into docs/images/."""
    trace = record_example()
    push = tie_push(trace)
    step = push.step
    asyncio.run(screenshot(trace, push, HERE / "tui-demo.svg"))
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo.agdb"
        save(trace, demo)
        agdb("export", str(demo), "-o", str(HERE / "export-demo.svg"), "--step", str(step))
        mlp = Path(tmp) / "train_mlp.agdb"
        agdb("record", "docs/examples/train_mlp.py", "-o", str(mlp))
        agdb("export", str(mlp), "-o", str(HERE / "export-mlp.svg"), "--collapse")
    print(f"wrote tui-demo.svg, export-demo.svg (step {step}) and export-mlp.svg in {HERE}")


if __name__ == "__main__":
    main()
