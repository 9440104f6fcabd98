"""FX graphs from real PyTorch, in agdb's FX model: `capture(target, *args)` (docs/fx.md, "From real PyTorch").

What torch makes, converted to plain data (tracer/fx/graph.py), so that the forward-to-backward map, its anomaly
report, `agdb export --view joint` and the TUI's joint panel read it as they read `capture_joint`'s graphs:
- an `nn.Module`: the joint graph of `aot_export_joint_with_descriptors`;
- a function: the joint graph `aot_function` hands its partitioner, and the forward and backward graphs it hands
  its compilers;
- a `torch.compile`d function or module: the same three graphs, as torch.compile's AOTAutograd makes them under
  Dynamo (the original is compiled again with a backend of ours). Dynamo's own graph carries no seq_nr; when
  the graphs below it carry none either, `capture` says so (NoSeqNr) rather than showing empty columns.

Each node keeps torch's real `seq_nr`, `partitioner_tag`, `is_gradient_acc`, `autograd_backward` and `desc` (torch's
descriptors become tracer/fx/descriptors.py's classes), its target's name (`aten.mul.Tensor`), its arguments, a
`val` summary (shape, stride, dtype, storage) and, where torch has them, `stack_trace`, `nn_module_stack`,
`fwd_nn_module_stack`. AOTAutograd records no stack trace or module stack when called directly (only under
Dynamo), so while it traces a function or module, a TorchFunctionMode of ours puts the user's line and the module
stack where torch's own tracer reads them (`torch.fx.traceback.current_meta`, as Dynamo does): it never touches
`seq_nr` and runs no op of its own.

NOTE [numbers no FX node made]
The anomaly report's `shifted` needs the increments no FX node made, with their line (`graph.info["bumps"]`, as
capture_joint keeps them). The one torch 2.13 makes while AOT traces is a custom Function's node applied where it
joins no graph (under no_grad, or on inputs needing no grad): it still takes a number, which the next ops that make
no node of their own repeat. `Function.apply` is wrapped for the capture (on its thread only) to note the number and
the caller's line; Functions whose node joins the graph are left out, since their inner ops carry its number by rule.

Imports torch: only ever imported lazily (from app/fx_torch.py when `--torch` is given, and from tests), never by
`tracer.sources.torch` itself, so nothing else pulls torch in.
"""
from __future__ import annotations

import contextlib
import operator
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx.traceback as fx_traceback
from torch.overrides import TorchFunctionMode

from agdb.tracer.fx import descriptors as d
from agdb.tracer.fx.frames import stack_text
from agdb.tracer.fx.graph import Graph, Node, Opaque

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FUNCTORCH_DIR = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "functorch") + os.sep
_HERE = os.path.abspath(__file__)


class TorchFxError(Exception):
    """What went wrong, in one line for the user."""


class NoSeqNr(TorchFxError):
    """The graphs torch made carry no seq_nr (Dynamo's graph never does), so there is no forward-to-backward map."""


@dataclass
class TorchFx:
    """What `capture` got from torch: the joint graph, and for functions the forward and backward graphs."""

    joint: Graph
    forward: Graph | None = None
    backward: Graph | None = None
    api: str = "aot_export_joint_with_descriptors"
    """Which torch entry point made the graphs: `aot_export_joint_with_descriptors`, `aot_function` or
    `torch.compile`."""
    notes: list[str] = field(default_factory=list)
    """What the user should know about these graphs (a compiled target, graph breaks), one sentence each."""


# -- capture --------------------------------------------------------------------------------------------------------
def capture(target: Any, *args: Any) -> TorchFx:
    """Trace `target(*args)` forward and backward with torch's AOTAutograd and convert the graphs to agdb's model.

    Raises:
        TorchFxError: the target is not callable, returns no tensor, or nothing in it needs a gradient.
        NoSeqNr: the graphs torch made carry no seq_nr.
    """
    if not callable(target):
        raise TorchFxError(f"the target must be a function or a torch.nn.Module, not {type(target).__name__}")
    original = compiled_original(target)
    if original is not None:
        return _capture_compiled(original, args)
    if isinstance(target, torch.nn.Module):
        with _user_lines(target) as mode:
            with contextlib.ExitStack() as stack:
                from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

                gm = aot_export_joint_with_descriptors(stack, target, args).graph_module
                joint = to_graph(gm)
        check_seq_nr(joint, "aot_export_joint_with_descriptors")
        joint.info = {"bumps": mode.bumps}
        return TorchFx(joint)
    from functorch.compile import aot_function

    seen: dict[str, Any] = {}
    with _user_lines(None) as mode:
        compiled = aot_function(target, fw_compiler=_keep(seen, "forward"), bw_compiler=_keep(seen, "backward"),
                                partition_fn=_partition(seen))
        _run_backward(compiled, args, [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad])
    result = _result(seen, "aot_function", [])
    result.joint.info = {"bumps": mode.bumps}
    return result


def record_run(target: Any, *args: Any) -> Any:
    """Run `target(*args)` eagerly, and autograd.grad of its outputs, under the bridge's recorder: the Trace of
    that real run (the TUI steps through it; `with_joint` adds the joint graph to it). A compiled target runs its
    original. The user's `.grad`s stay as they were.

    Raises:
        TorchFxError: as `capture`.
    """
    from agdb.tracer.sources.source import record

    original = compiled_original(target)
    target = original if original is not None else target
    wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    if isinstance(target, torch.nn.Module):
        wanted = [p for p in target.parameters() if p.requires_grad] + wanted
    with record("torch") as rec:
        _run_backward(target, args, wanted)
    return rec.trace


def compiled_original(target: Any) -> Any:
    """The function or module a `torch.compile` result wraps, or None when `target` was not compiled."""
    if isinstance(target, torch.nn.Module) and hasattr(target, "_orig_mod") and \
            type(target).__name__ == "OptimizedModule":
        return target._orig_mod
    return getattr(target, "_torchdynamo_orig_callable", None)


def _capture_compiled(original: Any, args: tuple) -> TorchFx:
    """Compile `original` again with a backend that keeps AOTAutograd's graphs (and counts Dynamo's)."""
    import torch._dynamo
    from torch._dynamo.backends.common import aot_autograd

    seen: dict[str, Any] = {"dynamo": 0}
    aot = aot_autograd(fw_compiler=_keep(seen, "forward"), bw_compiler=_keep(seen, "backward"),
                       partition_fn=_partition(seen))

    def backend(gm: Any, example_inputs: Any) -> Any:
        seen["dynamo"] += 1
        return aot(gm, example_inputs)

    torch._dynamo.reset()  # a target compiled before would run its cached code, not reach our backend
    try:
        compiled = torch.compile(original, backend=backend)
        wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        if isinstance(original, torch.nn.Module):
            wanted = [p for p in original.parameters() if p.requires_grad] + wanted
        _run_backward(compiled, args, wanted)
    finally:
        torch._dynamo.reset()
    notes = ["the target is a torch.compile result: these are the graphs its AOTAutograd makes under Dynamo "
             "(compiled again with agdb's backend); Dynamo's own graph, which a torch.compile backend receives, "
             "carries no seq_nr"]
    if seen["dynamo"] > 1:
        notes.append(f"Dynamo split the target into {seen['dynamo']} graphs (graph breaks): this is the first "
                     f"one that has a backward")
    return _result(seen, "torch.compile", notes)


def _keep(seen: dict, name: str) -> Any:
    from functorch.compile import make_boxed_func

    def compiler(gm: Any, example_inputs: Any) -> Any:
        seen.setdefault(name, []).append(gm)
        return make_boxed_func(gm.forward)
    return compiler


def _partition(seen: dict) -> Any:
    from functorch.compile import default_partition

    def partition(joint: Any, joint_inputs: Any, **kwargs: Any) -> Any:
        seen.setdefault("joint", joint)
        return default_partition(joint, joint_inputs, **kwargs)
    return partition


def _run_backward(fn: Any, args: tuple, wanted: list) -> None:
    """Call `fn(*args)`, then autograd.grad of its outputs with ones (the user's `.grad`s stay as they were)."""
    out = fn(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not any(isinstance(o, torch.Tensor) for o in outs):
        raise TorchFxError("the target returned no tensor")
    if not diff or not wanted:
        raise TorchFxError("nothing the target returns needs a gradient, so torch makes no backward graph: give "
                           "it an input with requires_grad=True (or a module with parameters)")
    torch.autograd.grad(diff, wanted, [torch.ones_like(o) for o in diff], allow_unused=True)


def _result(seen: dict, api: str, notes: list[str]) -> TorchFx:
    if "joint" not in seen:
        raise TorchFxError(f"{api} made no joint graph: nothing the target computes needs a gradient")
    joint = to_graph(seen["joint"])
    check_seq_nr(joint, api)
    return TorchFx(joint, _part_of(joint, seen.get("forward", []), "is_forward"),
                   _part_of(joint, seen.get("backward", []), "is_backward"), api, notes)


def _part_of(joint: Graph, candidates: list, tag: str) -> Graph | None:
    """The partition graph holding the joint graph's `tag` ops (their targets and seq_nrs, in order): with graph
    breaks, torch compiles several graphs, and backward graphs in the reverse order."""
    def key(g: Graph, tagged: bool) -> list:
        return [(n.target, n.meta.get("seq_nr")) for n in g.nodes if n.op == "call_function"
                and (not tagged or n.meta.get("partitioner_tag") == tag)]

    wanted = key(joint, True)
    graphs = [to_graph(gm) for gm in candidates]
    for g in graphs:
        if key(g, False) == wanted:
            return g
    return graphs[0] if len(graphs) == 1 else None


def check_seq_nr(graph: Graph, api: str) -> None:
    calls = [n for n in graph.nodes if n.op == "call_function"]
    if calls and not any("seq_nr" in n.meta for n in calls):
        raise NoSeqNr(f"the graphs {api} made carry no seq_nr (graphs from torch.compile's Dynamo never do in torch "
                      f"2.13), so agdb cannot map forward nodes to backward nodes; mark the function or module "
                      f"itself, not its torch.compile result, to get AOTAutograd's graphs with seq_nr")


# -- the user's lines and module stack while AOT traces -------------------------------------------------------------
class _UserLines(TorchFunctionMode):
    """Puts the user's line and module stack where torch's FX tracer copies node meta from, for each torch call the
    traced code makes in its forward (NOTE at the top of this module)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.modules: list[tuple[str, str]] = []
        self.bumps: list[dict] = []
        """Sequence numbers no FX node made, with the user's line (`graph.info["bumps"]`, which the anomaly report
        reads): a custom Function applied where its node joins no graph."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.depth or torch._C._current_autograd_node() is not None:
            return func(*args, **kwargs)  # inside a call we already annotated, or in backward (AOT's hooks say)
        frame = _user_frame(sys._getframe(1))
        if frame is None:
            return func(*args, **kwargs)  # AOT's own calls (its autograd.grad, its tangents)
        meta = fx_traceback.current_meta  # read anew: preserve_node_meta swaps the dict
        saved = {k: meta[k] for k in ("stack_trace", "nn_module_stack") if k in meta}
        meta["stack_trace"] = stack_text(frame) + "\n"  # torch joins stack lines that end in a newline
        if self.modules:
            meta["nn_module_stack"] = {fqn: (fqn, cls) for fqn, cls in self.modules}
        self.depth += 1
        try:
            return func(*args, **kwargs)
        finally:
            self.depth -= 1
            meta = fx_traceback.current_meta
            for k in ("stack_trace", "nn_module_stack"):
                meta.pop(k, None)
            meta.update(saved)


def _user_frame(frame: Any) -> tuple[str, int, str] | None:
    """The innermost frame of the traced code: the user's, or a `forward` of torch.nn's modules; None when the
    call came from this module's own frames (AOT's calls outside the traced code)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if os.path.abspath(name) == _HERE:
            return None
        if name.startswith((_TORCH_DIR, _FUNCTORCH_DIR)):
            if frame.f_code.co_name == "forward" and f"{os.sep}nn{os.sep}modules{os.sep}" in name:
                return name, frame.f_lineno, "forward"
        else:
            return name, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


@contextlib.contextmanager
def _user_lines(module: Any) -> Any:
    """The mode; global module hooks keeping the stack of `module`'s submodules (by fully qualified name); and
    `Function.apply` watched for custom Functions whose node takes a number but joins no graph (NOTE [numbers no
    FX node made])."""
    from torch.nn.modules import module as nn_module

    mode = _UserLines()
    names = {id(m): n for n, m in module.named_modules() if n} if module is not None else {}

    def pre(m: Any, args: Any) -> None:
        if id(m) in names:
            cls = type(m)
            mode.modules.append((names[id(m)], f"{cls.__module__}.{cls.__qualname__}"))

    def post(m: Any, args: Any, output: Any) -> None:
        if id(m) in names and mode.modules:
            mode.modules.pop()

    handles = [nn_module.register_module_forward_pre_hook(pre), nn_module.register_module_forward_hook(post)]
    original_apply = torch.autograd.Function.__dict__["apply"]
    thread = threading.get_ident()

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == thread and torch._C._current_autograd_node() is None:
            linked = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
            frame = None if linked else _user_frame(sys._getframe(1))
            if frame is not None:
                file, line, function = frame
                mode.bumps.append({"seq_nr": torch.autograd._get_sequence_nr(), "node": f"{cls.__name__}Backward",
                                   "file": file, "line": line, "function": function, "phase": "forward"})
        return original_apply.__func__(cls, *args, **kwargs)

    torch.autograd.Function.apply = classmethod(apply)
    try:
        with mode:
            yield mode
    finally:
        torch.autograd.Function.apply = original_apply
        for h in handles:
            h.remove()


# -- conversion -----------------------------------------------------------------------------------------------------
_PLAIN_META = ("seq_nr", "partitioner_tag", "is_gradient_acc", "autograd_backward", "stack_trace")
_MODULE_META = ("nn_module_stack", "fwd_nn_module_stack")


def to_graph(gm: Any) -> Graph:
    """A torch `GraphModule`'s graph as agdb's Graph: plain data only (no torch object is kept)."""
    g = Graph()
    ours: dict[Any, Node] = {}
    storages: dict[int, int] = {}
    for n in gm.graph.nodes:
        args = _plain(n.args, ours)
        kwargs = _plain(dict(n.kwargs), ours)
        node = g.create_node(n.op, target_name(n.target), tuple(args), kwargs, name=n.name,
                             meta=_meta(n, storages))
        if node.name != n.name:
            raise TorchFxError(f"node name {n.name!r} appears twice in torch's graph")
        ours[n] = node
    return g


def target_name(target: Any) -> str:
    """A node target as a string: `aten.mul.Tensor` for an OpOverload, `getitem` for operator.getitem."""
    if isinstance(target, str):
        return target
    if target is operator.getitem:
        return "getitem"
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket, torch._ops.HigherOrderOperator)):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    module = {"_operator": "operator", "builtins": ""}.get(module, module)
    return f"{module}.{name}" if module else name


def _plain(value: Any, ours: dict) -> Any:
    """An argument as plain data: torch fx Nodes become ours; dtypes, devices and the like their text."""
    if isinstance(value, torch.fx.Node):
        return ours[value]
    if isinstance(value, tuple):
        return tuple(_plain(v, ours) for v in value)
    if isinstance(value, list):
        return [_plain(v, ours) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v, ours) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return Opaque(str(value))
    if isinstance(value, torch.dtype):
        return Opaque(str(value))
    return Opaque(str(value) if isinstance(value, (torch.device, torch.memory_format, torch.layout)) else repr(value))


def _meta(n: Any, storages: dict[int, int]) -> dict:
    meta: dict = {}
    for k in _PLAIN_META:
        v = n.meta.get(k)
        if v is not None and isinstance(v, (bool, int, str)):
            meta[k] = v.rstrip("\n") if k == "stack_trace" else v
    for k in _MODULE_META:
        v = n.meta.get(k)
        if v:
            meta[k] = _module_stack(v)
    if "desc" in n.meta:
        desc = n.meta["desc"]
        meta["desc"] = [to_descriptor(x) for x in desc] if isinstance(desc, (list, tuple)) else to_descriptor(desc)
    if "val" in n.meta:
        val = _val(n.meta["val"], storages)
        if val is not None:
            meta["val"] = val
    return meta


def _module_stack(stack: dict) -> dict:
    """torch's module stack as agdb's `{fqn: [fqn, class]}`. Dynamo keys it by an object id and names a module by
    its source (`L['self'].lin`): the key becomes the name, relative to the target (`lin`), so nothing in the
    graph depends on an address."""
    out = {}
    for fqn, cls in stack.values():
        name = str(fqn)
        for root in ("L['self'].", "L['self']"):
            if name.startswith(root):
                name = name[len(root):]
                break
        out[name] = [name, _class_name(cls)]
    return out


def _class_name(cls: Any) -> str:
    if isinstance(cls, type):
        return f"{cls.__module__}.{cls.__qualname__}"
    return str(cls)


_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.bool: "bool"}


def _val(v: Any, storages: dict[int, int]) -> Any:
    """`{"shape", "stride", "dtype", "storage"}` for a (fake) tensor; a list of those for several outputs."""
    if isinstance(v, torch.Tensor):
        dtype = _DTYPES.get(v.dtype) or str(v.dtype).removeprefix("torch.")
        out: dict = {"shape": [_int(s) for s in v.shape], "dtype": dtype}
        try:
            out["stride"] = [_int(s) for s in v.stride()]
            key = v.untyped_storage()._cdata
            out["storage"] = storages.setdefault(key, len(storages))
        except (RuntimeError, NotImplementedError):  # sparse layouts, subclasses without storage
            pass
        return out
    if isinstance(v, (list, tuple)):
        return [_val(x, storages) for x in v]
    if isinstance(v, (bool, int, float)):
        return v
    return None


def _int(s: Any) -> Any:
    try:
        return int(s)
    except (TypeError, ValueError, RuntimeError):  # a symbolic size
        return str(s)


_SAME = {"PlainAOTInput": ("idx",), "ParamAOTInput": ("target",), "BufferAOTInput": ("target",),
         "TangentAOTInput": ("output",), "PlainAOTOutput": ("idx",), "GradAOTOutput": ("grad_of",),
         "InputMutationAOTOutput": ("mutated_input",), "SavedForBackwardsAOTOutput": ("idx",)}
"""torch descriptor classes agdb has a class of the same name and fields for."""


def to_descriptor(desc: Any) -> Any:
    """torch's AOTInput/AOTOutput as tracer/fx/descriptors.py's class of the same name (or OtherAOTInput/Output)."""
    if desc is None:
        return None
    name = type(desc).__name__
    fields = _SAME.get(name)
    if fields is not None:
        values = {f: getattr(desc, f) for f in fields}
        values = {f: to_descriptor(v) if hasattr(v, "expr") else v for f, v in values.items()}
        return getattr(d, name)(**values)
    text = desc.expr() if hasattr(desc, "expr") else repr(desc)
    from torch._functorch._aot_autograd.descriptors import AOTInput

    return (d.OtherAOTInput if isinstance(desc, AOTInput) else d.OtherAOTOutput)(name, text)
