"""app/run_script.py's run_recorded hands back the script's globals only when asked (`agdb fx --torch -o` reads its
`agdb_fx` mark there), and only when the script's code returned."""
from __future__ import annotations

from agdb.app.run_script import run_recorded


def test_the_scripts_globals_are_handed_back_when_asked(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("x = 41 + 1\nname = __name__\n")
    kept = run_recorded(str(script), [], keep_globals=True)
    assert kept.error is None and kept.scope is not None
    assert (kept.scope["x"], kept.scope["name"]) == (42, "__main__")
    assert run_recorded(str(script), []).scope is None  # dropped on the script's thread unless asked for


def test_a_script_that_raises_hands_back_no_globals(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("x = 1\nraise ValueError('no')\n")
    run = run_recorded(str(script), [], keep_globals=True)
    assert isinstance(run.error, ValueError) and run.scope is None
