"""An FX-like graph: `Graph` and `Node` with PyTorch FX's fields (op, target, args, kwargs, meta, users).

Plain data: node arguments are other Nodes, Python scalars, tuples and lists of them, strings, None, and
small constants. `to_data`/`from_data` turn a graph into JSON-ready data and back (a trace carries it in its
`meta`, docs/fx.md); `print_readable` prints it the way `GraphModule.print_readable` does.

Imports the standard library only; never the engine, textual or rich.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

Op = Literal["placeholder", "call_function", "get_attr", "output"]
"""FX's node kinds that a joint graph uses (call_module and call_method never appear after AOT tracing)."""


@dataclass(eq=False, slots=True)
class Node:
    """One node: `name` is unique in its graph; `args`/`kwargs` hold other Nodes where data flows in."""

    graph: Graph = field(repr=False)
    name: str
    op: Op
    target: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    @property
    def users(self) -> dict[Node, None]:
        """The nodes that take this one as an argument, in graph order (as FX keeps them, a dict)."""
        return self.graph._users_of(self)

    @property
    def all_input_nodes(self) -> list[Node]:
        """The Nodes among args and kwargs, each once, in order of appearance."""
        seen: dict[Node, None] = {}
        for a in _flat((self.args, tuple(self.kwargs.values()))):
            if isinstance(a, Node):
                seen[a] = None
        return list(seen)

    @property
    def stack_trace(self) -> str | None:
        """The user's Python line(s) that made this node, as `meta["stack_trace"]`."""
        return self.meta.get("stack_trace")

    def __repr__(self) -> str:
        return self.name

    def format_node(self) -> str:
        """One line in FX's style: `%name : [num_users=N] = call_function[target=t](args = (...), kwargs = {...})`."""
        if self.op == "placeholder":
            return f"%{self.name} : [num_users={len(self.users)}] = placeholder[target={self.target}]"
        if self.op == "output":
            return f"return {_fmt(self.args[0] if len(self.args) == 1 else self.args)}"
        return (f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={self.target}]"
                f"(args = {_fmt(self.args)}, kwargs = {_fmt(self.kwargs)})")


def _flat(value: Any) -> Iterator[Any]:
    """Every leaf of nested tuples, lists and dict values (iteratively: arguments may nest deeply)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        else:
            yield v


def map_arg(value: Any, fn: Callable[[Node], Any]) -> Any:
    """`value` with every Node in it replaced by `fn(node)` (tuples stay tuples, lists lists)."""
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_arg(v, fn) for v in value)
    if isinstance(value, list):
        return [map_arg(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_arg(v, fn) for k, v in value.items()}
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, Node):
        return f"%{value.name}"
    if isinstance(value, tuple):
        inner = ", ".join(_fmt(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _code(value: Any) -> str:
    """How print_readable shows an argument: nodes by bare name."""
    if isinstance(value, Node):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(_code(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_code(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_code(v)}" for k, v in value.items()) + "}"
    return repr(value)


class Graph:
    """Nodes in execution order; names unique (`mul`, `mul_1`, ... as FX names them)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._names: dict[str, int] = {}
        self._by_name: dict[str, Node] = {}
        self._users: dict[Node, dict[Node, None]] | None = None
        self.constants: dict[str, Any] = {}
        """Values of `get_attr` nodes, by target (tensors the traced code used but did not make)."""
        self.info: dict = {}
        """What the capture saw besides nodes (plain data): the sequence-number increments, with lines."""

    # -- building ---------------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """`base`, or `base_N` with the next free N, as FX names a node."""
        base = base or "node"
        if base not in self._names and base not in self._by_name:
            self._names[base] = 0
            return base
        n = self._names.get(base, 0)
        while True:
            n += 1
            name = f"{base}_{n}"
            if name not in self._by_name:
                self._names[base] = n
                return name

    def create_node(self, op: Op, target: str, args: tuple = (), kwargs: dict | None = None,
                    name: str | None = None, meta: dict | None = None) -> Node:
        """Append a node; its name is `name` (made unique) or taken from the target. `kwargs` and `meta` dicts
        are taken as given (not copied): pass a fresh dict per node."""
        name = self.unique_name(name or _base_name(target))
        node = Node(self, name, op, target, args if args.__class__ is tuple else tuple(args),
                    {} if kwargs is None else kwargs, {} if meta is None else meta)
        self.nodes.append(node)
        self._by_name[name] = node
        self._users = None
        return node

    def placeholder(self, name: str, meta: dict | None = None) -> Node:
        """A graph input named `name`."""
        return self.create_node("placeholder", name, name=name, meta=meta)

    def output(self, values: Any, meta: dict | None = None) -> Node:
        """The graph's output node, returning `values`."""
        return self.create_node("output", "output", (values,), name="output", meta=meta)

    def erase_node(self, node: Node) -> None:
        """Remove a node that nothing uses any more.

        Raises:
            RuntimeError: the node still has users.
        """
        if self.users_of(node):
            raise RuntimeError(f"cannot erase {node.name}: it still has users {list(self.users_of(node))}")
        self.nodes.remove(node)
        del self._by_name[node.name]
        self._users = None

    def replace_all_uses_with(self, old: Node, new: Any) -> None:
        """Make every user of `old` take `new` instead."""
        for n in self.nodes:
            n.args = map_arg(n.args, lambda a: new if a is old else a)
            n.kwargs = map_arg(n.kwargs, lambda a: new if a is old else a)
        self._users = None

    def changed(self) -> None:
        """Call after editing nodes' args in place, so that `users` is recomputed."""
        self._users = None

    # -- reading ----------------------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        """The node called `name`. Raises KeyError naming the nodes there are."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no node {name!r} in this graph") from None

    def users_of(self, node: Node) -> dict[Node, None]:
        """`node.users`."""
        return self._users_of(node)

    def _users_of(self, node: Node) -> dict[Node, None]:
        if self._users is None:
            users: dict[Node, dict[Node, None]] = {n: {} for n in self.nodes}
            for n in self.nodes:
                for a in n.all_input_nodes:
                    users.setdefault(a, {})[n] = None
            self._users = users
        return self._users.get(node, {})

    def find_nodes(self, *, op: str, target: str | None = None) -> list[Node]:
        """Nodes of kind `op` (and `target`), in order."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    @property
    def output_node(self) -> Node:
        """The output node. Raises ValueError when the graph has none."""
        for n in reversed(self.nodes):
            if n.op == "output":
                return n
        raise ValueError("this graph has no output node")

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        lines = ["graph():"]
        lines.extend("    " + n.format_node() for n in self.nodes)
        return "\n".join(lines)

    def print_readable(self, print_output: bool = False, meta_keys: tuple[str, ...] = ("seq_nr",)) -> str:
        """The graph as Python code, like `GraphModule.print_readable`: one line a node, its `val` as a type
        comment (`f32[4, 3]`), and `meta_keys` of each node in a trailing comment."""
        inputs = [n for n in self.nodes if n.op == "placeholder"]
        lines = ["class joint(agdb.fx.GraphModule):",
                 f"    def forward(self, {', '.join(n.name for n in inputs)}):"]
        for n in self.nodes:
            note = ", ".join(f"{k}={n.meta[k]!r}" for k in meta_keys if k in n.meta)
            for flag in ("is_gradient_acc",):
                if n.meta.get(flag):
                    note += f", {flag}"
            comment = f"  # {note}" if note else ""
            if n.op == "placeholder":
                lines.append(f"        {n.name}: \"{type_text(n.meta.get('val'))}\"{comment}")
            elif n.op == "output":
                lines.append(f"        return {_code(n.args[0])}")
            elif n.op == "get_attr":
                lines.append(f"        {n.name}: \"{type_text(n.meta.get('val'))}\" = self.{n.target}")
            else:
                params = [_code(a) for a in n.args] + [f"{k}={_code(v)}" for k, v in n.kwargs.items()]
                call = f"{n.target}({', '.join(params)})"
                lines.append(f"        {n.name}: \"{type_text(n.meta.get('val'))}\" = {call}{comment}")
        text = "\n".join(lines) + "\n"
        if print_output:
            print(text)  # noqa: T201 - the caller asked for it, as FX's print_output does
        return text

    # -- copies and plain data ----------------------------------------------------------------------------
    def copy(self) -> Graph:
        """A deep copy: new Nodes, meta copied (passes may edit the copy freely)."""
        g = from_data(to_data(self), constants=copy.deepcopy(self.constants))
        return g


def op_name(target: str) -> str:
    """The op a target names, without namespace or overload: `engine.mul`, `engine._ops.mul` and torch's
    `aten.mul.Tensor` are all `mul`."""
    if target.startswith("aten."):
        return target.split(".")[1]
    return target.rsplit(".", 1)[-1]


def _base_name(target: str) -> str:
    """The node name FX derives from a target: `engine.mul` -> `mul`, `aten.mul_.Tensor` -> `mul_` (the op, not
    its overload), `PythonOp` -> `pythonop`."""
    base = (op_name(target) if target.startswith("aten.") else target.rsplit(".", 1)[-1]).lower()
    return "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "node"


# torch.fx.graph.dtype_abbrs, by dtype name: how print_readable writes each value's type.
_DTYPE_SHORT = {
    "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "float16": "f16", "float32": "f32",
    "float64": "f64", "complex32": "c32", "complex64": "c64", "complex128": "c128", "bool": "b8", "bfloat16": "bf16",
    "bits1x8": "b1x8", "bits2x4": "b2x4", "bits4x2": "b4x2", "bits8": "b8x1", "bits16": "b16x1",
    "float8_e5m2": "f8e5m2", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2fnuz": "f8e5m2fnuz",
    "float8_e4m3fnuz": "f8e4m3fnuz", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float8_e8m0fnu": "f8e8m0fnu",
    "float4_e2m1fn_x2": "f4e2m1fnx2",
}


def type_text(val: Any) -> str:
    """A value's type as print_readable writes it: `f32[4, 3]`, or `?` when unknown."""
    if isinstance(val, dict) and "shape" in val:
        return f"{_DTYPE_SHORT.get(val.get('dtype', ''), val.get('dtype', '?'))}{list(val['shape'])}"
    if isinstance(val, (list, tuple)):
        return ", ".join(type_text(v) for v in val)
    return "?" if val is None else type(val).__name__


# -- plain data -------------------------------------------------------------------------------------------
FORMAT = "agdb.fx/1"
"""The `format` key of a graph's plain data."""


def to_data(graph: Graph) -> dict:
    """The graph as JSON-ready data: nodes in order, arguments with `{"node": name}` for Nodes."""
    return {"format": FORMAT, "info": graph.info,
            "nodes": [{"name": n.name, "op": n.op, "target": n.target, "args": _encode(n.args),
                       "kwargs": _encode(n.kwargs), "meta": _encode(n.meta)} for n in graph.nodes]}


def from_data(data: dict, constants: dict | None = None) -> Graph:
    """A Graph from `to_data`'s output.

    Raises:
        ValueError: the data is not an agdb FX graph, or names a node before defining it.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not an agdb FX graph (expected format {FORMAT!r})")
    g = Graph()
    for row in data["nodes"]:
        try:
            args = _decode(row["args"], g)
            kwargs = _decode(row["kwargs"], g)
            meta = _decode(row["meta"], g)
            n = g.create_node(row["op"], row["target"], tuple(args), kwargs, name=row["name"], meta=meta)
        except KeyError as e:
            raise ValueError(f"node {row.get('name')!r}: {e}") from None
        if n.name != row["name"]:
            raise ValueError(f"node name {row['name']!r} appears twice")
    g.constants = dict(constants or {})
    g.info = dict(data.get("info") or {})
    return g


def _encode(v: Any) -> Any:
    if isinstance(v, Node):
        return {"node": v.name}
    if isinstance(v, tuple):
        return {"tuple": [_encode(x) for x in v]}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        return {"dict": {str(k): _encode(x) for k, x in v.items()}}
    if hasattr(v, "to_data"):  # descriptors
        return {"desc": v.to_data()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return {"repr": repr(v)}


def _decode(v: Any, g: Graph) -> Any:
    if isinstance(v, list):
        return [_decode(x, g) for x in v]
    if isinstance(v, dict):
        if "node" in v:
            return g.node(v["node"])
        if "tuple" in v:
            return tuple(_decode(x, g) for x in v["tuple"])
        if "dict" in v:
            return {k: _decode(x, g) for k, x in v["dict"].items()}
        if "desc" in v:
            from agdb.tracer.fx.descriptors import descriptor_from_data

            return descriptor_from_data(v["desc"])
        if "repr" in v:
            return Opaque(v["repr"])
    return v


@dataclass(frozen=True)
class Opaque:
    """A value that plain data keeps only as its repr (an object reference, a dtype)."""

    text: str

    def __repr__(self) -> str:
        return self.text
