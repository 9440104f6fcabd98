"""No import circle anywhere in agdb outside engine/: every module of tracer/ (all its stage packages), app/ and
widgets/ is parsed, and every import counts (function-level ones, and those under `if TYPE_CHECKING:` too: a type
that has to come from above is a layering mistake as much as a call), so each module can be read, tested and
replaced on its own. The stage order itself (store, recording, replay, views; fx and sources above) is ruff's
banned-api rules in each stage's ruff.toml."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("tracer", "app", "widgets")


def modules(root: Path, folders: tuple[str, ...], prefix: str = "agdb") -> dict[str, Path]:
    """Dotted name (as installed, `agdb.tracer.store.schema`; a package by its own name) -> file, for every .py."""
    found = {}
    for folder in folders:
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` (file `path`) imports, anywhere in the file."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(module: str, names: list[str]) -> None:
        subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
        found.update(subs)
        if module in known and len(subs) < len(names):  # names that are not submodules come from the module itself
            found.add(module)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            add(module, [a.name for a in node.names])
    found.discard(name)
    return found


def graph(root: Path, folders: tuple[str, ...]) -> dict[str, set[str]]:
    found = modules(root, folders)
    return {name: imports(path, name, set(found)) for name, path in found.items()}


def cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import circle as a path of module names, or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for nxt in sorted(edges[name]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return []

    for name in sorted(edges):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return []


def test_the_cycle_finder_finds_a_planted_circle():
    """The checker itself: a -> b -> c -> a is reported, a chain is not."""
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_a_circle_planted_in_a_subpackage_is_found(tmp_path):
    """A circle two levels down, closed by a relative import under TYPE_CHECKING and a function-level absolute one,
    is found; without the planted import the tree is clean."""
    pkg = tmp_path / "tracer" / "store"
    pkg.mkdir(parents=True)
    for folder in (tmp_path / "tracer", pkg):
        (folder / "__init__.py").write_text("")
    (pkg / "trace.py").write_text("def index():\n    from agdb.tracer.store.indexes import TraceIndex\n")
    (pkg / "indexes.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .trace import T\n")
    assert cycle(graph(tmp_path, ("tracer",))) == ["agdb.tracer.store.indexes", "agdb.tracer.store.trace",
                                                   "agdb.tracer.store.indexes"]
    (pkg / "indexes.py").write_text("from typing import TYPE_CHECKING\n")
    assert cycle(graph(tmp_path, ("tracer",))) == []


def test_the_parser_sees_every_import_form(tmp_path):
    """Relative (one and two levels), absolute, package, submodule-as-name and function-level imports all count."""
    (tmp_path / "tracer" / "views").mkdir(parents=True)
    (tmp_path / "tracer" / "store").mkdir()
    names = ["tracer/__init__.py", "tracer/views/__init__.py", "tracer/views/dot.py", "tracer/views/labels.py",
             "tracer/store/__init__.py", "tracer/store/schema.py", "tracer/store/trace.py", "tracer/replay.py"]
    for n in names:
        (tmp_path / n).write_text("")
    (tmp_path / "tracer/views/dot.py").write_text(
        "from . import labels\nfrom ..store import schema\nfrom ..store.trace import Trace\nimport agdb.tracer.replay\n"
        "from agdb.tracer import Kind\ndef f():\n    from agdb.tracer.store import trace\n")
    edges = graph(tmp_path, ("tracer",))
    assert edges["agdb.tracer.views.dot"] == {"agdb.tracer.views.labels", "agdb.tracer.store.schema",
                                              "agdb.tracer.store.trace", "agdb.tracer.replay", "agdb.tracer"}


def test_agdb_has_no_import_circle_outside_the_engine():
    """No module of tracer/ (with every stage package), app/ or widgets/ imports, directly or through others, a
    module that imports it back."""
    edges = graph(ROOT, CHECKED)
    assert {"agdb.tracer.store.schema", "agdb.tracer.recording.builder", "agdb.tracer.replay.replay",
            "agdb.tracer.sources.torch.bridge", "agdb.tracer.views.joint", "agdb.app.cli"} <= set(edges)
    found = cycle(edges)
    assert found == [], " -> ".join(found)
