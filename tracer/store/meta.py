"""What a trace's `meta` may hold: every key a view reads, checked on load so that no view trips on it.

Never imports the engine, textual or rich. docs/trace-format.md (sections 1 and 4) says what each key means;
`problem` says, for a decoded header's `meta`, what is wrong with it (None when nothing is). A key no view reads
(a tool's own) is left alone; the joint graph (`fx_joint`) is read by `tracer.views.joint`, which turns any fault
of its own into a ViewError.
"""
from __future__ import annotations

import re
from typing import Any

from agdb.tracer.store.schema import Kind

PROVENANCES = ("observed", "reconstructed")
DIVERGENCE_KINDS = ("order", "graph_task", "running_node", "witness")
"""A bridge divergence's `kind` (absent: `order`, the only kind of older bridge traces)."""
_DIVERGENCE_FIELDS = {
    "order": {"expected": "node", "observed": "node"},
    "graph_task": {"node": "node", "expected_id": "int", "observed_id": "int"},
    "running_node": {"node": "node", "running_seq_nr": "int"},
    "witness": {"against": ("model", "observed"), "index": "int", "expected": "node", "observed": "node"},
}
"""The fields each kind of divergence has beside `step` and `graph_task`, and what each holds: a node row (-1 or
None: no node), an integer, or one of a few strings."""
_KINDS = frozenset(k.name.lower() for k in Kind)
SIGNAL_NAME = re.compile(r"SIG[A-Z0-9]{1,10}")
"""What `partial` holds: the name of the signal that cut the recording short (views print it as it is)."""


def problem(meta: Any, num_nodes: int) -> str | None:
    """What is wrong with `meta` (a phrase that follows "the header's "), or None; `num_nodes` bounds node rows."""
    if not isinstance(meta, dict):
        return "meta is not a JSON object"
    for key, check in _CHECKS.items():
        if key in meta:
            found = check(meta[key], num_nodes)
            if found:
                return f"meta.{key}{'' if found.startswith('[') else ' '}{found}"
    return None


def _is_int(value: object) -> bool:
    return type(value) is int  # not bool, not float


def _string(value: Any, num_nodes: int) -> str | None:
    return None if isinstance(value, str) else "is not a string"


def _signal_name(value: Any, num_nodes: int) -> str | None:
    return None if isinstance(value, str) and SIGNAL_NAME.fullmatch(value) else "is not a signal's name (SIGINT)"


def _provenance(value: Any, num_nodes: int) -> str | None:
    if isinstance(value, dict) and all(k in _KINDS and v in PROVENANCES for k, v in value.items()):
        return None
    return "is not a map of event kinds to observed or reconstructed"


def _omitted(value: Any, num_nodes: int) -> str | None:
    if isinstance(value, dict) and all(_is_int(value.get(k)) and value[k] >= 0 for k in ("graph_tasks", "events")):
        return None
    return "is not {graph_tasks: N, events: M} with counts N and M"


def _divergences(value: Any, num_nodes: int) -> str | None:
    if not isinstance(value, list):
        return "is not a list"
    for i, d in enumerate(value):
        found = _divergence(d, num_nodes)
        if found:
            return f"[{i}] {found}"
    return None


def _divergence(d: Any, num_nodes: int) -> str | None:
    if not isinstance(d, dict):
        return "is not an object"
    kind = d.get("kind", "order")
    if kind not in DIVERGENCE_KINDS:
        return f"has an unknown kind (one of {', '.join(DIVERGENCE_KINDS)})"
    for field, want in {"step": "int", "graph_task": "int", **_DIVERGENCE_FIELDS[kind]}.items():
        value = d.get(field)
        if want == "node":
            ok = value is None or (_is_int(value) and -1 <= value < num_nodes)
        elif want == "int":
            ok = _is_int(value)
        else:
            ok = value in want
        if not ok:
            return f"({kind}) has no valid {field}"
    return None


def _graph_tasks(value: Any, num_nodes: int) -> str | None:
    if not isinstance(value, list):
        return "is not a list"
    for i, t in enumerate(value):
        if not isinstance(t, dict) or not _is_int(t.get("graph_task")):
            return f"[{i}] is not an object with an integer graph_task"
        order = t.get("execution_order")
        if order is not None and not (isinstance(order, dict) and "model" in order and "observed" in order):
            return f"[{i}].execution_order is not an object with model and observed"
    return None


COMPILE_TIME_KINDS = ("backward", "grad")
"""A compile-time backward call's `kind`: Tensor.backward / autograd.backward, or autograd.grad."""


def _compile_time_calls(value: Any, num_nodes: int) -> str | None:
    if _is_int(value) and value >= 0:  # older bridge traces: only a count
        return None
    if not isinstance(value, list):
        return "is not a list (or a count)"
    for i, e in enumerate(value):
        found = _compile_time_call(e)
        if found:
            return f"[{i}] {found}"
    return None


def _compile_time_call(e: Any) -> str | None:
    if not isinstance(e, dict):
        return "is not an object"
    if e.get("kind") not in COMPILE_TIME_KINDS:
        return "has no kind (backward or grad)"
    for field in ("compile_id", "function", "file"):
        if not (e.get(field) is None or isinstance(e[field], str)):
            return f"has a {field} that is not a string"
    if not (e.get("line") is None or _is_int(e["line"])):
        return "has a line that is not an integer"
    for names, count in (("roots", "num_roots"), ("inputs", "num_inputs")):
        listed = e.get(names)
        if not (isinstance(listed, list) and all(isinstance(n, str) for n in listed)):
            return f"has {names} that are not a list of node names"
        if not (_is_int(e.get(count)) and e[count] >= len(listed)):
            return f"has no {count} of at least {len(listed)}"
    return None


def _compiled_functions(value: Any, num_nodes: int) -> str | None:
    if not isinstance(value, list):
        return "is not a list"
    for i, e in enumerate(value):
        if not (isinstance(e, dict) and _is_int(e.get("node")) and 0 <= e["node"] < num_nodes
                and _is_int(e.get("aot_id"))):
            return f"[{i}] is not an object with a node row and an integer aot_id"
    return None


def _compile_time_seq_nrs(value: Any, num_nodes: int) -> str | None:
    if isinstance(value, list) and all(isinstance(r, list) and len(r) == 3 and all(_is_int(x) and x >= 0 for x in r)
                                       and r[1] <= r[2] for r in value):
        return None
    return "is not a list of [thread row, start, stop] with start <= stop"


def _compiles(value: Any, num_nodes: int) -> str | None:
    if not isinstance(value, list):
        return "is not a list"
    for i, c in enumerate(value):
        if not (isinstance(c, dict) and _is_int(c.get("index"))):
            return f"[{i}] is not an object with an integer index"
        for field in ("compile_id", "function", "file"):
            if not (c.get(field) is None or isinstance(c[field], str)):
                return f"[{i}] has a {field} that is not a string"
        for field in ("line", "aot_id"):
            if not (c.get(field) is None or _is_int(c[field])):
                return f"[{i}] has a {field} that is not an integer"
        if not (isinstance(c.get("graphs", []), list) and all(isinstance(g, str) for g in c.get("graphs", []))):
            return f"[{i}] has graphs that are not a list of graph ids"
        # a joint graph's object, or "fx_joint" (the trace's own); the joint view reads the graph, saying what fails
        if not (isinstance(c.get("joint", {}), dict) or c["joint"] == "fx_joint"):
            return f"[{i}] has a joint that is neither a graph's object nor \"fx_joint\""
    return None


def compile_time_calls(meta: dict) -> tuple[int, list[dict]]:
    """How many backward calls torch.compile made while it traced, and their entries (none in older traces, which
    kept only the count); docs/trace-format.md, `compile_time_calls`."""
    value = meta.get("compile_time_calls")
    if isinstance(value, list):
        return len(value), value
    return (value if _is_int(value) else 0), []


def _bridge_errors(value: Any, num_nodes: int) -> str | None:
    return None if isinstance(value, list) and all(isinstance(e, str) for e in value) else "is not a list of strings"


def _count(value: Any, num_nodes: int) -> str | None:
    return None if _is_int(value) and value >= 0 else "is not a count (an integer, 0 or more)"


def _ddp(value: Any, num_nodes: int) -> str | None:
    """Each DDP model's parameter names and its AccumulateGrads' [node row, index in parameters] (ddp.py)."""
    if not isinstance(value, list):
        return "is not a list"
    for i, model in enumerate(value):
        names = model.get("parameters") if isinstance(model, dict) else None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return f"[{i}] is not an object with a list of parameter names"
        pairs = model.get("accumulate_grads")
        if not isinstance(pairs, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(_is_int(x) for x in p)
                and 0 <= p[0] < num_nodes and 0 <= p[1] < len(names) for p in pairs):
            return f"[{i}].accumulate_grads is not a list of [node row, parameter index]"
    return None


_CHECKS = {"source": _string, "partial": _signal_name, "provenance": _provenance, "omitted": _omitted,
           "divergences": _divergences, "graph_tasks": _graph_tasks, "bridge_errors": _bridge_errors,
           "rank": _count, "world_size": _count, "ddp": _ddp,
           "compile_time_calls": _compile_time_calls, "compiled_functions": _compiled_functions,
           "compiles": _compiles, "compile_time_seq_nrs": _compile_time_seq_nrs}
"""The keys a view reads, and the check of each (`parameter_names` is read entry by entry, skipping bad ones)."""
