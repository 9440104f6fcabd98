"""Export a picture of a trace's graph: DOT text, the graph model as JSON, or SVG/PNG/PDF rendered by Graphviz.

The model comes from tracer/views/graph_model.py, its DOT text from tracer/views/dot.py and its JSON from
tracer/views/json_render.py (all pure); this module writes files and runs `dot` through the `graphviz` package.
`dot` can be slow and can be missing, so this says so plainly and refuses pictures too large to lay out unless
forced.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import graphviz
import numpy as np

from agdb.tracer.replay.replay import EngineState
from agdb.tracer.replay.search import find_nodes, is_number, nodes_with_seq
from agdb.tracer.store.atomic import refuse_read_only, write_atomically
from agdb.tracer.store.trace import Trace
from agdb.tracer.views.dot import View, ViewError
from agdb.tracer.views.dot import render as dot_text
from agdb.tracer.views.graph_model import graph_model
from agdb.tracer.views.json_render import to_json

FORMATS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png", ".pdf": "pdf", ".json": "json"}
"""File suffixes agdb writes, and the format of each: `dot` is the DOT text itself, `json` the graph model's
JSON (schema agdb.graph/1), the others Graphviz's rendering."""
FORMAT_NAMES = ("dot", "svg", "png", "pdf", "json")
"""The formats `--format` names."""
MAX_BOXES = 3000
"""Larger pictures take `dot` minutes or more to lay out; they are refused unless forced."""
LAYOUT_TIMEOUT_S = 600
"""How long a layout may take before the export gives up on it."""


class ExportError(Exception):
    """An export that cannot be done; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class Exported:
    """What an export wrote."""

    path: str
    num_boxes: int
    num_arrows: int


EXPORT_OFF = "export is off in this TUI (agdb serve writes files only when given --export-dir DIR)"


@dataclass(frozen=True, slots=True)
class ExportRule:
    """Where the TUI's export key may write: anywhere (the default), only inside `directory` (--export-dir), or
    nowhere (`is_off`: --no-export, which `agdb serve` gives its tabs unless it was given --export-dir)."""

    directory: str | None = None
    is_off: bool = False

    def target(self, path: str) -> str:
        """The file to write for `path`, as typed in the export prompt (relative to the directory, if any).

        Raises:
            ExportError: the rule forbids writing there; the message says what is allowed.
        """
        if self.is_off:
            raise ExportError(EXPORT_OFF)
        if self.directory is None:
            return path
        root = Path(self.directory).resolve()
        full = (root / path).resolve()  # `..` and symbolic links resolved before the check, not after
        if full == root or not full.is_relative_to(root):
            raise ExportError(f"{path}: exports go inside {root} (--export-dir); give a file name there")
        return str(full)


def resolve_focus(trace: Trace, text: str, flag: str = "--focus", order: np.ndarray | None = None) -> int:
    """A node from `12`, `node:12` (its index in the trace), `seq:5` / `seq 5` (its seq_nr), a name that only
    one node has, or a node's label as agdb prints it (`AccumulateGrad m[0].weight`, `MulBackward0 seq 3`).

    With `order` (each node's execution index at a step, -1 if it has not run: tracer.replay.node_states), a bare
    number is an execution index, the leading number of the TUI's graph rows; without it, a node index.

    Raises:
        ExportError: nothing or several nodes match; the message lists how to be precise.
    """
    text = text.strip()
    if text.lower().startswith("node:") and is_number(text[5:].strip()):
        return _node_index(trace, int(text[5:]))
    if is_number(text):
        if order is None:
            return _node_index(trace, int(text))
        ran = np.flatnonzero(order == int(text))
        if len(ran) == 1:
            return int(ran[0])
        count = int((order >= 0).sum())
        which = f"0..{count - 1}" if count else "none yet"
        raise ExportError(f"{flag} {text}: no node ran as number {text} by this step (the numbers the TUI shows "
                          f"before the nodes that ran: {which}); give node:N for the trace's node N, seq:N or a name")
    query = "seq " + text[4:] if text.lower().startswith("seq:") else text
    found = find_nodes(trace, query)
    if len(found) == 1:
        return int(found[0])
    named = labelled(trace, text)
    if len(named) == 1:  # the name as agdb prints it: `MulBackward0 seq 3`, `AccumulateGrad fc1.weight`
        return named[0]
    what = "no node" if not len(found) else f"{len(found)} nodes ({', '.join(map(str, found[:5].tolist()))}…)"
    raise ExportError(f"{flag} {text!r} matches {what}; give a node index (as the TUI shows it) or seq:N")


def labelled(trace: Trace, text: str) -> list[int]:
    """The nodes whose label (views/labels: what `agdb show`, the TUI and the pictures print) is `text`; only
    nodes that can carry such a label are labelled: those of the seq_nr it names, or the named leaves'."""
    from agdb.tracer.views.labels import NodeLabels

    words = text.split()
    if len(words) == 3 and words[1] == "seq" and is_number(words[2]):
        candidates = nodes_with_seq(trace, int(words[2])).tolist()
    elif len(words) >= 2:
        candidates = list(trace.index.leaf_labels)
    else:
        return []
    label = NodeLabels(trace).label
    return [int(n) for n in candidates if label(int(n)) == text]


def _node_index(trace: Trace, node: int) -> int:
    if node >= trace.num_nodes:
        raise ExportError(f"there is no node {node}: this trace has nodes 0..{trace.num_nodes - 1}")
    return node


def export_format(output: str, fmt: str | None = None) -> str:
    """The format to write `output` in: `fmt` when given (one of FORMAT_NAMES), else its suffix's.

    Raises:
        ExportError: an unknown format, or a suffix that names none.
    """
    if fmt is not None:
        if fmt not in FORMAT_NAMES:
            raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMAT_NAMES)}")
        return fmt
    suffix = Path(output).suffix.lower()
    if suffix not in FORMATS:
        raise ExportError(f"{output}: unknown format {suffix or '(none)'}; use one of {', '.join(FORMATS)}, "
                          "or name one with --format")
    return FORMATS[suffix]


def export(trace: Trace, output: str, *, step: int | None = None, view: View = "backward", focus: int | None = None,
           radius: int = 2, collapse: bool = False, force: bool = False,
           state: EngineState | None = None, fmt: str | None = None) -> Exported:
    """Write the picture to `output` in format `fmt`, by default the one its suffix picks (.dot, .gv, .svg, .png,
    .pdf, .json).

    Raises:
        ExportError: an unknown format, a view that cannot be drawn, a picture too large to lay out or a
            read-only file at `output` (unless `force`), Graphviz missing, or `dot` failing.
    """
    fmt = export_format(output, fmt)
    if not force:  # before drawing: a layout can take minutes
        try:
            refuse_read_only(output)
        except PermissionError:
            raise ExportError(f"{output}: the file is read-only, so agdb leaves it as it is: make it writable, "
                              "remove it first, or add --force to replace it") from None
    try:
        model = graph_model(trace, step, view, focus, radius, collapse, state)
    except ViewError as e:
        raise ExportError(str(e)) from None
    done = Exported(output, model.num_boxes, model.num_arrows)
    if fmt == "json":  # a program lays it out: no limit on its size
        _write_atomically(output, json.dumps(to_json(model), ensure_ascii=False).encode("utf-8"))
        return done
    if fmt != "dot" and model.num_boxes > MAX_BOXES and not force:  # refused before any text is made
        raise ExportError(f"{model.num_boxes:,} boxes are too many for dot to lay out in reasonable time; draw "
                          "fewer with --collapse (folds repeated blocks and linear chains) or --focus NODE "
                          "--radius R, write .dot or .json instead, or add --force to try anyway")
    text = dot_text(model)
    if fmt == "dot":
        _write_atomically(output, text.encode("utf-8"))
        return done
    _write_atomically(output, render(text, fmt))
    return done


def render(dot_text: str, fmt: str, timeout_s: float = LAYOUT_TIMEOUT_S) -> bytes:
    """Lay out and render DOT text with Graphviz's `dot`, through the `graphviz` package.

    The package's pipe has no timeout, so it runs in a daemon thread that is waited for at most `timeout_s`:
    past that the export fails (and agdb can exit) while `dot` finishes on its own.

    Raises:
        ExportError: `dot` is not installed, fails, or takes longer than `timeout_s`.
    """
    done: list[bytes | BaseException] = []

    def lay_out() -> None:
        try:
            done.append(graphviz.pipe("dot", fmt, dot_text.encode("utf-8"), quiet=True))
        except BaseException as e:  # handed to the caller's thread
            done.append(e)

    worker = threading.Thread(target=lay_out, name="agdb-dot", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not done:
        raise ExportError(f"dot did not finish laying out in {timeout_s:g} s; draw fewer boxes with "
                          "--collapse or --focus")
    result = done[0]
    if isinstance(result, graphviz.ExecutableNotFound):
        raise ExportError("Graphviz's dot program is not installed, so agdb cannot render "
                          f"{fmt.upper()}: install it (Debian/Ubuntu: apt-get install graphviz; macOS: brew "
                          "install graphviz), or export .dot text, which needs nothing")
    if isinstance(result, graphviz.CalledProcessError):
        detail = (result.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise ExportError(f"dot failed (exit {result.returncode}): {detail[-1] if detail else 'no message'}")
    if isinstance(result, BaseException):
        raise result
    return result


def _write_atomically(path: str, data: bytes) -> None:
    """Write via a temporary file in the same folder, so a failure never leaves half a file (tracer.store.atomic: the
    user's umask, symlinks written through, killed writes' temporaries removed). A read-only file is replaced: export
    refused it before drawing, unless `force`."""
    write_atomically(path, [data], durable=False, replace_read_only=True)
