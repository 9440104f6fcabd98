"""What `agdb fx` shares between agdb's engine (fx_cli.py) and real PyTorch (fx_torch.py): finding the target a
script marks, and reporting a joint graph (text or JSON)."""
from __future__ import annotations

import os
import runpy
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .run_script import OsExitCalled, os_exit_stopping_here

HOW_TO_MARK = ("mark what to capture with a module-level `agdb_fx = (fn_or_module, (arg, ...))` in the script, "
               "or a function `def agdb_fx(): return fn_or_module, (arg, ...)` (docs/fx.md)")


class FxError(Exception):
    """What went wrong, said in one line for the user."""


@contextmanager
def marked(script: str) -> Iterator[tuple[Any, tuple]]:
    """Run `script` (as `__agdb_fx__`) and give its `agdb_fx` mark as (target, args); the script's folder stays on
    sys.path until the block ends (the capture may import from it).

    Raises:
        FxError: the script is missing, raised, or marks nothing usable.
    """
    path = Path(script)
    if not path.is_file():
        raise FxError(f"{script}: no such file")
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        try:
            scope = _run_stopping_at_os_exit(path)
        except SystemExit:
            raise FxError(f"{script} called sys.exit before agdb could capture it") from None
        except OsExitCalled as e:
            raise FxError(f"{script} called os._exit({e.status}) before agdb could capture it") from None
        except Exception as e:  # noqa: BLE001 - the user's script: say what it raised, in one line
            raise FxError(f"{script} raised {type(e).__name__}: {e}") from None
        yield mark_of(scope, script)
    finally:
        sys.path.remove(folder)


def mark_of(scope: dict[str, Any], script: str) -> tuple[Any, tuple]:
    """The `agdb_fx` mark in a script's globals, as (target, args).

    Raises:
        FxError: the script marks nothing usable.
    """
    mark = scope.get("agdb_fx")
    if mark is None:
        raise FxError(f"{script} marks nothing: {HOW_TO_MARK}")
    if callable(mark) and not isinstance(mark, tuple):
        try:
            mark = mark()
        except Exception as e:  # noqa: BLE001 - the user's function
            raise FxError(f"{script}'s agdb_fx() raised {type(e).__name__}: {e}") from None
    if not (isinstance(mark, tuple) and len(mark) == 2 and callable(mark[0])):
        raise FxError(f"{script}: agdb_fx must be (fn_or_module, args); {HOW_TO_MARK}")
    target, args = mark
    return target, args if isinstance(args, tuple) else (args,)


def run_as_main(script: str, args: list[str]) -> tuple[dict[str, Any], str | None]:
    """Run `script` as `python SCRIPT ARGS...` would (as `__main__`, its folder first on sys.path, sys.argv set);
    returns its globals and, when it did not end cleanly, one line saying how it ended.

    Raises:
        FxError: there is no such script.
    """
    path = Path(script)
    if not path.is_file():
        raise FxError(f"{script}: no such file")
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args]
    sys.path.insert(0, str(path.resolve().parent))
    scope: dict[str, Any] = {}
    try:
        scope = _run_stopping_at_os_exit(path, "__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            return scope, f"{script} exited with sys.exit({e.code!r})"
    except OsExitCalled as e:
        return scope, f"{script} called os._exit({e.status}), where agdb stopped it"
    except Exception as e:  # noqa: BLE001 - the user's script: say what it raised, in one line
        text = str(e).strip().splitlines()
        return scope, f"{script} raised {type(e).__name__}: {text[0] if text else ''}".rstrip(": ")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return scope, None


def _run_stopping_at_os_exit(path: Path, run_name: str = "__agdb_fx__") -> dict[str, Any]:
    """Run the script; its os._exit raises OsExitCalled instead of ending agdb without a word (a forked child's
    exits)."""
    real_exit = os._exit
    os._exit = os_exit_stopping_here(real_exit)
    try:
        return runpy.run_path(str(path), run_name=run_name)
    finally:
        os._exit = real_exit


def report_json(graph: Any) -> dict:
    """The graph, the map (forward node -> backward nodes) and the anomalies, as plain data."""
    from agdb.tracer.fx import to_data
    from agdb.tracer.fx.seq_map import anomalies, seq_map

    m = seq_map(graph)
    return {"format": "agdb.fx-report/1", "graph": to_data(graph),
            "map": {f.name: [b.name for b in bs] for f, bs in m.backward_of.items()},
            "anomalies": [a.to_json() for a in anomalies(graph)]}


def print_report(graph: Any) -> None:
    """The graph as code, the descriptors, the map and the anomalies, for a terminal."""
    from agdb.tracer.fx.seq_map import anomalies, seq_map

    out = sys.stdout
    out.write(graph.print_readable(meta_keys=("seq_nr", "partitioner_tag")))
    out.write("\ndescriptors:\n")
    for n in graph.nodes:
        if n.op == "placeholder":
            out.write(f"  {n.name}: {n.meta['desc']!r}  {n.meta['desc'].expr()}\n")
    for v, d in zip(graph.output_node.args[0], graph.output_node.meta["desc"], strict=True):
        if d is not None:
            out.write(f"  output {getattr(v, 'name', v)}: {d!r}  {d.expr()}\n")
    out.write("\nforward -> backward (by seq_nr):\n")
    for f, bs in seq_map(graph).backward_of.items():
        out.write(f"  {f.meta['seq_nr']:>4}  {f.name} -> {', '.join(b.name for b in bs) or '(none)'}\n")
    found = anomalies(graph)
    out.write(f"\nanomalies: {len(found) or 'none'}\n")
    for a in found:
        out.write(f"  [{a.kind}] {a.message}\n")
        for file, line, fn, node in a.culprits:
            out.write(f"      culprit: {os.path.basename(file)}:{line} in {fn} (made {node})\n")
