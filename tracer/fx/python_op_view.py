"""A custom autograd.Function in torch's compiled graphs, shown as one PythonOp and one PythonOpGrad (seed 002).

Under torch.compile, Dynamo inlines a custom Function (its forward's ops into the forward graph, its backward's into
the backward graph) and keeps no node for the Function itself. What the graphs still hold is where each op came
from: Dynamo's `stack_trace` names the call site (`Scale.apply(y, 3.0, True)`, with its line and carets) and the
Function's own `forward` or `backward` line, and `source_fn_stack` marks the op as inside an `autograd.function`.
`python_op_view(graph)` groups the ops of each call by that call site, and puts in their place one `PythonOp` node
(the forward's ops) or `PythonOpGrad` node (the backward's), as `capture_joint(..., custom_functions="python_op")`
does on agdb's engine: its args are the graph values flowing into the group, `kwargs["name"]` the Function's class,
and the non-tensor arguments are classified as ONNX Runtime's exporter does (tracer/fx/calls.py's rules).

Torch's graphs keep no non-tensor argument (3.0 is folded into the op it feeds; `True` is gone), so they are read
from the call site's source text: literal arguments are classified; a name is counted as a tensor when the group
has a graph input left for it, else as an object (`input_pointer_scalars`). Everything agdb derives so is under
`meta["agdb"]` (`inner`: the ops replaced; `call_site`; `arguments_from`); the node's `seq_nr` and
`partitioner_tag` are those of the first op it replaces, as torch set them.

Imports the standard library and tracer/fx only.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from agdb.tracer.fx.graph import Graph, Node, map_arg

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)\s*$')


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    code: str


def frames_of(stack_trace: str) -> list[Frame]:
    """The frames of a stack_trace text (`File "f.py", line 3, in fn` followed by the code line), outermost first."""
    lines = stack_trace.splitlines()
    out = []
    for i, text in enumerate(lines):
        m = _FRAME.match(text)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
            out.append(Frame(m["file"], int(m["line"]), m["function"], code))
    return out


@dataclass
class _Group:
    role: str  # "forward" or "backward"
    call: Frame
    nodes: list[Node] = field(default_factory=list)


def _group_key(n: Node) -> tuple[str, Frame] | None:
    """("forward" or "backward", the call site) of an op a custom Function's forward or backward ran, else None."""
    stack = n.meta.get("source_fn_stack") or ()
    if not any(isinstance(e, (list, tuple)) and e and e[0] == "autograd.function" for e in stack):
        return None
    frames = frames_of(n.meta.get("stack_trace") or "")
    for i, f in enumerate(frames):
        if f.function in ("forward", "backward") and i > 0:
            callers = [c for c in frames[:i] if ".apply(" in c.code]
            if callers:
                return f.function, callers[-1]
    return None


def python_op_view(graph: Graph) -> Graph:
    """A copy of `graph` with each custom Function call's ops replaced by one PythonOp (forward) or PythonOpGrad
    (backward) node (module docstring). A graph with no such ops comes back as an unchanged copy."""
    groups: dict[tuple[str, Frame], _Group] = {}
    group_of: dict[Node, _Group] = {}
    for n in graph.nodes:
        key = _group_key(n) if n.op == "call_function" else None
        if key is not None:
            g = groups.setdefault(key, _Group(key[0], key[1]))
            g.nodes.append(n)
            group_of[n] = g
    out = Graph()
    out.info = dict(graph.info)
    out.constants = dict(graph.constants)
    copies: dict[Node, Any] = {}
    made: dict[int, Node] = {}
    for n in graph.nodes:
        g = group_of.get(n)
        if g is None:
            copies[n] = out.create_node(n.op, n.target, map_arg(n.args, lambda a: copies[a]),
                                        map_arg(n.kwargs, lambda a: copies[a]), name=n.name, meta=dict(n.meta))
            continue
        if id(g) not in made:
            made[id(g)] = _python_op(out, g, copies)
        op = made[id(g)]
        outputs = op.meta["agdb"]["outputs"]
        if n.name in outputs:
            index = outputs.index(n.name)
            copies[n] = op if len(outputs) == 1 else out.create_node(
                "call_function", "getitem", (op, index), name=f"{op.name}_{index}", meta={"agdb": {"of": op.name}})
    return out


def _python_op(out: Graph, g: _Group, copies: dict[Node, Any]) -> Node:
    inside = set(g.nodes)
    inputs: list[Node] = []
    for n in g.nodes:
        for a in n.all_input_nodes:
            if a not in inside and a not in inputs:
                inputs.append(a)
    users_outside = [n for n in g.nodes if any(u not in inside for u in n.users)]
    first = g.nodes[0]
    attrs = {"name": _class_name(g.call.code), **_classified(g.call.code, len(inputs))} if g.role == "forward" \
        else {"name": _class_name(g.call.code)}
    meta = {k: first.meta[k] for k in ("seq_nr", "partitioner_tag") if k in first.meta}
    vals = [n.meta.get("val") for n in users_outside]
    if vals and all(v is not None for v in vals):
        meta["val"] = vals[0] if len(vals) == 1 else vals
    meta["agdb"] = {"inner": [n.name for n in g.nodes], "outputs": [n.name for n in users_outside],
                    "call_site": f"{g.call.file}:{g.call.line}", "arguments_from": "the call site's source text"}
    target = "PythonOp" if g.role == "forward" else "PythonOpGrad"
    return out.create_node("call_function", target, tuple(copies[a] for a in inputs), attrs, name=target, meta=meta)


def _call(code: str) -> ast.Call | None:
    """The `X.apply(...)` call in a line of source, or None when the line does not parse alone."""
    try:
        tree = ast.parse(code.strip().removeprefix("return ").strip(), mode="eval")
    except SyntaxError:
        try:
            tree = ast.parse(code.strip())
        except SyntaxError:
            return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply":
            return node
    return None


def _class_name(code: str) -> str:
    call = _call(code)
    if call is None:
        return "Function"
    try:
        return ast.unparse(call.func.value)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - an expression ast cannot unparse: keep a plain name
        return "Function"


def _classified(code: str, tensor_inputs: int) -> dict:
    """PythonOp's attributes for the call's non-tensor arguments, read from its source (module docstring)."""
    from agdb.tracer.fx.calls import classify_literals

    call = _call(code)
    if call is None:
        return {}
    values: list[Any] = []
    left = tensor_inputs
    for a in call.args:
        try:
            values.append(ast.literal_eval(a))
        except (ValueError, SyntaxError, TypeError):
            if left > 0:
                left -= 1
                values.append(_TENSOR)
            else:
                values.append(_Object(ast.unparse(a)))
    return classify_literals(values, lambda v: v is _TENSOR)


class _Object:
    """An argument that is neither a literal nor one of the graph's inputs: an object, as ONNX Runtime keeps it."""

    def __init__(self, text: str) -> None:
        self.text = text


_TENSOR = object()
