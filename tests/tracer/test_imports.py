"""The tracer's modules import one another without a circle (parsed from the source, function-level imports
included), so each can be read, tested and replaced on its own."""
from __future__ import annotations

import ast
from pathlib import Path

TRACER = Path(__file__).resolve().parents[2] / "tracer"


def _imports(path: Path) -> set[str]:
    """The tracer modules `path` imports, anywhere in the file except under `if TYPE_CHECKING:` (never run)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in node.body:
                inner.__dict__["skip"] = True  # ast.walk yields children after their parent
        if getattr(node, "skip", False):
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:  # from . import x, y
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("tracer."):
                found.add(node.module.split(".")[1])
            elif node.level == 0 and node.module == "tracer":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("tracer."))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in TRACER.glob("*.py")}
    return {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle as a path of module names, or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for nxt in sorted(graph[name]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return []

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return []


def test_the_cycle_finder_finds_a_planted_circle():
    """The checker itself: a -> b -> c -> a is reported, a chain is not."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_parser_sees_every_import_form(tmp_path):
    """Relative, absolute, package and function-level imports all count; type-checking ones do not."""
    src = tmp_path / "m.py"
    src.write_text("from . import events, schema\nfrom .trace import Trace\nimport tracer.replay\n"
                   "from tracer import builder\ndef f():\n    from tracer.indexes import TraceIndex\n"
                   "if TYPE_CHECKING:\n    from .culprits import Culprit\n")
    assert _imports(src) == {"events", "schema", "trace", "replay", "builder", "indexes"}


def test_tracer_has_no_import_circle():
    """No module of tracer/ imports, directly or through others, a module that imports it back."""
    graph = _graph()
    assert {"schema", "builder", "trace", "replay", "recorder"} <= set(graph)
    assert _cycle(graph) == [], " -> ".join(_cycle(graph))
