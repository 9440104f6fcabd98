"""One namespace: agdb installs as the single package `agdb` (the top-level folders mapped into it), so a user's
own `engine`, `app`, `tracer` or `widgets` module never meets agdb's; a wheel builds and works in a fresh venv."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("app", "engine", "tracer", "widgets")

# A training repository's layout: modules named like agdb's old top-level packages beside the script.
NEIGHBOURS = {
    "engine.py": "def train_one_epoch(model, x):\n    loss = (model(x) ** 2).sum()\n    loss.backward()\n"
                 "    return loss\n",
    "app.py": "NAME = 'the user app'\n",
    "tracer.py": "def trace(x):\n    return x\n",
    "widgets.py": "WIDGETS = 3\n",
}
MAIN = textwrap.dedent("""\
    import torch
    from engine import train_one_epoch
    from app import NAME
    from tracer import trace
    from widgets import WIDGETS

    model = torch.nn.Linear(3, 2)
    loss = train_one_epoch(model, trace(torch.ones(4, 3)))
    print(NAME, WIDGETS, "loss", round(float(loss), 3) > 0)
""")


def _user_repository(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in NEIGHBOURS.items():
        (folder / name).write_text(text)
    (folder / "main.py").write_text(MAIN)
    return folder / "main.py"


def _agdb(python: str, folder: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([python, "-m", "agdb", *argv], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _node_names(path: Path) -> list[str]:
    from agdb.tracer.store.tracefile import load

    trace = load(path)
    return [trace.node(i).name for i in range(trace.num_nodes)]


def test_every_package_folder_is_listed_in_pyproject():
    """pyproject.toml lists each folder with an __init__.py under its `agdb.` name, and maps the four folders:
    a package left out would be missing from the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {config["package-dir"][f"agdb.{f}"] for f in FOLDERS} == set(FOLDERS)
    found = {"agdb"} | {"agdb." + ".".join(p.parent.relative_to(ROOT).parts)
                        for f in FOLDERS for p in (ROOT / f).rglob("__init__.py") if "_agdb" not in p.parts}
    assert found == set(config["packages"])


def test_no_module_imports_a_bare_top_level_name():
    """No code of agdb, its tests or benchmarks imports `engine`, `tracer`, `app` or `widgets` bare: those names are
    the user's, and agdb's are `agdb.engine` and so on (relative imports inside a package are fine)."""
    bare = []
    for folder in (*FOLDERS, "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                bare += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in FOLDERS]
    assert bare == []


def test_record_a_script_beside_its_own_engine_app_tracer_and_widgets(tmp_path):
    """`agdb record main.py` on a script whose folder has its own engine.py, app.py, tracer.py and widgets.py: the
    script imports its own modules (and agdb's engine as torch), runs, and is recorded."""
    main = _user_repository(tmp_path / "repo")
    done = _agdb(sys.executable, main.parent, "record", "main.py", "-o", "run.agdb")
    assert done.returncode == 0, done.stderr
    assert "the user app 3 loss True" in done.stdout + done.stderr
    assert {"AddmmBackward0", "PowBackward0", "SumBackward0"} <= set(_node_names(main.parent / "run.agdb"))


def test_torch_on_a_script_beside_its_own_engine_app_tracer_and_widgets(tmp_path):
    """`agdb torch main.py` on the same script: real torch runs it, and the bridge records it."""
    pytest.importorskip("torch")
    main = _user_repository(tmp_path / "repo")
    done = _agdb(sys.executable, main.parent, "torch", "main.py", "-o", "run.agdb")
    assert done.returncode == 0, done.stderr
    assert "the user app 3 loss True" in done.stdout + done.stderr
    assert {"AddmmBackward0", "PowBackward0", "SumBackward0"} <= set(_node_names(main.parent / "run.agdb"))


def _site_packages(python: str) -> str:
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_wheel_installs_into_a_fresh_venv_and_runs(tmp_path):
    """A wheel built from the source installs into a fresh venv that already has agdb's dependencies and torch
    (this venv's site-packages, made visible by a .pth file, so nothing is downloaded), resolving them there;
    `agdb --help`, `python -m agdb --help` and `agdb torch` then run from it, importing agdb from the venv."""
    pytest.importorskip("torch")
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info",
                                                               "build", "dist", ".hypothesis", "fuzz-out"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("agdb-*.whl"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    # every site directory this interpreter reads (a venv may reach its packages through a .pth of its own)
    sites = [p for p in sys.path if p.endswith("site-packages")]
    Path(_site_packages(python), "dependencies.pth").write_text("\n".join(sites) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "-q",
                              str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr

    where = subprocess.run([python, "-c", "import agdb, agdb.engine; print(agdb.__file__, agdb.engine.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert where.split() == [str(Path(_site_packages(python), "agdb", "__init__.py")),
                             str(Path(_site_packages(python), "agdb", "engine", "__init__.py"))]
    # agdb serve's page (its web font served locally) is package data
    assert Path(_site_packages(python), "agdb", "app", "templates", "app_index.html").is_file()
    command = subprocess.run([str(venv / "bin" / "agdb"), "--help"], capture_output=True, text=True, timeout=300)
    assert command.returncode == 0 and "usage: agdb" in command.stdout, command.stderr
    assert "usage: agdb" in _agdb(python, tmp_path, "--help").stdout

    main = _user_repository(tmp_path / "repo")
    done = subprocess.run([str(venv / "bin" / "agdb"), "torch", "main.py", "-o", "run.agdb"], cwd=main.parent,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert {"AddmmBackward0", "PowBackward0", "SumBackward0"} <= set(_node_names(main.parent / "run.agdb"))
