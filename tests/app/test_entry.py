"""Ctrl-C while the `agdb` command is still importing itself ends it as Python killed by SIGINT, with no traceback
of agdb's imports (agdb's own handlers are not armed yet)."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from tests.app.pilot import HANG_GUARD_S

# A Ctrl-C that lands while agdb.app.cli is being imported, made certain: an import hook raises it there.
_CHILD = textwrap.dedent("""\
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever the suite inherited

    class CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == "agdb.app.cli":
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    sys.argv = ["agdb", "--help"]
    from agdb._entry import main
    sys.exit(main())
""")


def test_ctrl_c_while_agdb_imports_itself_ends_it_by_sigint_without_a_traceback():
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == -signal.SIGINT, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""  # --help never ran


def test_the_command_and_python_m_agdb_go_through_the_entry_point():
    """The installed `agdb` script and `python -m agdb` both start at agdb._entry.main (else the guard above
    would cover neither)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"agdb": "agdb._entry:main"}
    assert "from agdb._entry import main" in (root / "app" / "_agdb" / "__main__.py").read_text()
