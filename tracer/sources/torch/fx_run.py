"""The graphs a run's own `torch.compile` makes: `capture_run()` (docs/fx.md, "The run's own graphs").

While the block runs, every AOTAutograd compile of the process (any backend built on AOTAutograd: `aot_eager`,
inductor, a user's `aot_autograd(...)`) hands agdb each graph it makes, at the moment torch makes it: the joint
graph (before the partitioner and before the passes that split higher-order ops' subgraphs), and the graphs the
backend's forward, backward and inference compilers receive, each with its nested subgraphs. Nothing is compiled
a second time, and the backend's own compilers still receive the very graphs they would have.

NOTE [where the capture sits]
torch 2.13 has no public hook that sees every graph of a compile: `torch._functorch.config.joint_custom_pass`
sees the joint only after higher-order ops' joint subgraphs were partitioned, and Inductor's pass hooks see
graphs after Inductor changed them. Every AOTAutograd entry point (`aot_module_simplified` under Dynamo,
`aot_function`, `aot_compile_joint_with_descriptors`) calls `aot_stage2_compile(aot_state, aot_graph_capture,
partition_fn, fw_compiler, bw_compiler, inference_compiler)` from torch._functorch.aot_autograd's namespace,
with the joint graph already traced and the compilers not yet called. The capture replaces that one name for the
duration of the block and wraps the compilers it is given, converting each graph to plain data on entry (Inductor
changes a graph in place as it compiles it). When the name is missing (another torch), the capture says so.

AOTAutograd's and Inductor's caches are switched off while capturing: a cache hit skips the compilers, so the
graphs of a warm cache would never be seen.

Meta is kept as torch set it: `seq_nr`, `partitioner_tag`, `is_gradient_acc`, `autograd_backward`, `custom`,
`stack_trace`, `nn_module_stack` (its keys and module paths verbatim), `source_fn_stack`, the `fwd_*` copies,
`desc` (`{"class", "expr"}`), and `val` summarised (shape, stride, dtype, and a storage number shared by views).
Objects that are not plain data become `<ClassName>` text, so no address reaches the output.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import re
import sys
import threading
import weakref
from typing import Any, Callable, Iterator

import torch

from agdb.tracer.fx.graph import Graph, Opaque
from agdb.tracer.fx.graph_set import Compile, GraphEntry, GraphSet

from .compiling import compile_origin
from .fx import TorchFxError, _val, target_name

_STAGE2 = "aot_stage2_compile"
_TORCH = os.path.dirname(torch.__file__) + os.sep


@contextlib.contextmanager
def capture_run(takers: bool = False) -> Iterator[GraphSet]:
    """Capture every graph AOTAutograd makes in this process while the block runs (NOTE [where the capture sits]);
    with `takers`, also the Python frames in flight when each sequence number was taken while torch traced
    (`GraphSet.takers`, NOTE [who took a number]).

    Raises:
        TorchFxError: this torch has no `aot_stage2_compile` to hold on to.
    """
    import torch._functorch.aot_autograd as aot_autograd

    original = getattr(aot_autograd, _STAGE2, None)
    if original is None:
        raise TorchFxError(f"this torch ({torch.__version__}) has no torch._functorch.aot_autograd.{_STAGE2}, where "
                           "agdb takes the graphs of a compile; agdb fx --torch is made for torch 2.13")
    found = GraphSet()
    lock = threading.Lock()

    def stage2(aot_state: Any, aot_graph_capture: Any, partition_fn: Any, fw_compiler: Any, bw_compiler: Any = None,
               inference_compiler: Any = None) -> Any:
        bw_compiler = fw_compiler if bw_compiler is None else bw_compiler
        inference_compiler = fw_compiler if inference_compiler is None else inference_compiler
        with lock:
            c = _new_compile(found, needs_autograd=bool(getattr(aot_state, "needs_autograd", True)),
                             aot_id=getattr(getattr(aot_state, "aot_config", None), "aot_id", None))
        if not c.inference:
            _add(found, c, "joint", aot_graph_capture.graph_module, lock)
        return original(aot_state, aot_graph_capture, partition_fn, _keeping(found, c, "forward", fw_compiler, lock),
                         _keeping(found, c, "backward", bw_compiler, lock),
                         _keeping(found, c, "forward", inference_compiler, lock))

    with _caches_off(), (_watching_takers(found) if takers else contextlib.nullcontext()):
        setattr(aot_autograd, _STAGE2, stage2)
        try:
            yield found
        finally:
            setattr(aot_autograd, _STAGE2, original)


# -- who took a number ----------------------------------------------------------------------------------------------
_TRACING_MACHINERY = tuple(os.path.join(_TORCH, *p) for p in (
    ("fx", "experimental", "proxy_tensor.py"), ("_ops.py",), ("utils", "_python_dispatch.py"), ("_subclasses",),
    ("utils", "_stats.py"), ("_library",), ("fx", "experimental", "symbolic_shapes.py")))
_MAX_FRAMES = 8


@contextlib.contextmanager
def _watching_takers(found: GraphSet) -> Iterator[None]:
    """NOTE [who took a number]
    An FX node's seq_nr is the number of the autograd node its op made, read when the node is created; a backward
    node's is the number of the autograd node being run. When a number belongs to no FX node (a backward node with
    no forward node), the question is which code made the autograd node that took it: a decomposition, DTensor,
    a higher-order op's autograd Function. While torch traces, every op reaches ProxyTorchDispatchMode after its
    autograd kernel ran, so the counter has moved by the nodes that op made: each number taken since the last op
    seen by the same trace is noted with the Python frames in flight (torch's tracing machinery left out), innermost
    last; the first op of a trace names only the number just before it. A number taken outside tracing (eager code
    between compiles) is not named."""
    from torch.fx.experimental import proxy_tensor

    mode = proxy_tensor.ProxyTorchDispatchMode
    original = mode.__dict__["__torch_dispatch__"]
    last: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per trace (a mode a trace): eager code between
    # two traces moves the counter too, and those numbers are not this trace's to name

    def __torch_dispatch__(self: Any, *args: Any, **kwargs: Any) -> Any:
        now = torch.autograd._get_sequence_nr()
        seen = last.get(self, now - 1)
        if now > seen:
            frames = _frames_in_flight(sys._getframe(1))
            for seq_nr in range(seen, now):
                found.takers.setdefault(seq_nr, frames)
        last[self] = now
        return original(self, *args, **kwargs)

    mode.__torch_dispatch__ = __torch_dispatch__
    try:
        yield
    finally:
        mode.__torch_dispatch__ = original


def _frames_in_flight(frame: Any) -> list[dict]:
    out: list[dict] = []
    while frame is not None and len(out) < _MAX_FRAMES:
        name = frame.f_code.co_filename
        if not name.startswith(_TRACING_MACHINERY) and name != __file__:
            shown = "torch/" + name[len(_TORCH):] if name.startswith(_TORCH) else name
            out.append({"file": shown, "line": frame.f_lineno, "function": frame.f_code.co_name,
                        "code": linecache.getline(name, frame.f_lineno).strip()})
        frame = frame.f_back
    return out[::-1]


def _new_compile(found: GraphSet, needs_autograd: bool, aot_id: Any) -> Compile:
    """A new compile: Dynamo's compile id and frame, and AOTAutograd's id (NOTE [compiled function nodes] in
    compiling.py: the trace's CompiledFunctionBackward nodes name it)."""
    c = Compile(len(found.compiles), *compile_origin(), inference=not needs_autograd,
                aot_id=aot_id if type(aot_id) is int else None)
    found.compiles.append(c)
    return c


def _keeping(found: GraphSet, c: Compile, kind: str, compiler: Callable, lock: threading.Lock) -> Callable:
    """`compiler`, first converting the graph it receives (the backward compiler may run later, on the thread that
    runs the first backward)."""
    def keep(gm: Any, *args: Any, **kwargs: Any) -> Any:
        _add(found, c, kind, gm, lock)
        return compiler(gm, *args, **kwargs)
    return keep


def _add(found: GraphSet, c: Compile, kind: str, gm: Any, lock: threading.Lock) -> None:
    with lock:
        taken = {e.id for e in found.graphs}
        graph_id = f"c{c.index}.{kind}"
        n = 1
        while graph_id in taken:  # a second forward graph of one compile (an inference compile of the same frame)
            n += 1
            graph_id = f"c{c.index}.{kind}{n}"
        found.graphs.extend(_entries(gm, graph_id, kind, None, c.index, kind))


def _entries(gm: Any, graph_id: str, kind: str, parent: str | None, compile_index: int, name: str) -> list[GraphEntry]:
    """The graph of `gm`, then each GraphModule it holds as a submodule (a higher-order op's subgraph), depth first,
    as `GraphModule.modules()` walks them."""
    out = [GraphEntry(graph_id, kind, parent, compile_index, name, exact_graph(gm))]  # type: ignore[arg-type]
    for child_name, child in gm.named_children():
        if isinstance(child, torch.fx.GraphModule):
            out.extend(_entries(child, f"{graph_id}/{child_name}", "subgraph", graph_id, compile_index, child_name))
    return out


@contextlib.contextmanager
def _caches_off() -> Iterator[None]:
    import torch._functorch.config as functorch_config

    settings: list[tuple[Any, str, Any]] = [(functorch_config, "enable_autograd_cache", False)]
    try:
        import torch._inductor.config as inductor_config
        settings += [(inductor_config, "fx_graph_cache", False), (inductor_config, "fx_graph_remote_cache", False)]
    except ImportError:  # a torch built without Inductor: only AOTAutograd's cache to turn off
        pass
    saved = [(module, name, getattr(module, name)) for module, name, _ in settings if hasattr(module, name)]
    for module, name, value in settings:
        if hasattr(module, name):
            setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


# -- conversion, meta as torch set it -------------------------------------------------------------------------------
_KEPT = ("seq_nr", "partitioner_tag", "is_gradient_acc", "autograd_backward", "custom", "stack_trace",
         "nn_module_stack", "fwd_nn_module_stack", "source_fn_stack", "fwd_source_fn_stack", "desc", "val",
         "recompute", "ac_graph_id")
"""The meta keys kept (others, such as `tensor_meta`, `example_value`, `from_node` and `original_aten`, repeat `val`
or describe torch's own bookkeeping)."""


def exact_graph(gm: Any) -> Graph:
    """A GraphModule's graph as agdb's plain Graph, names and meta as torch set them (no agdb value added)."""
    from .fx import _plain

    g = Graph()
    ours: dict[Any, Any] = {}
    storages: dict[int, int] = {}
    for n in gm.graph.nodes:
        node = g.create_node(n.op, target_name(n.target), tuple(_plain(n.args, ours)), _plain(dict(n.kwargs), ours),
                             name=n.name, meta=_exact_meta(n.meta, storages))
        if node.name != n.name:
            raise TorchFxError(f"node name {n.name!r} appears twice in torch's graph")
        ours[n] = node
    return g


def _exact_meta(meta: dict, storages: dict[int, int]) -> dict:
    out: dict = {}
    for key in _KEPT:
        if key not in meta:
            continue
        v = meta[key]
        if key == "val":
            v = _val(v, storages)
        elif key == "desc":
            v = [_desc(d) for d in v] if isinstance(v, (list, tuple)) else _desc(v)
        elif key in ("nn_module_stack", "fwd_nn_module_stack"):
            v = None if v is None else {str(k): [str(fqn), _class_name(cls)] for k, (fqn, cls) in v.items()}
        elif key in ("source_fn_stack", "fwd_source_fn_stack"):
            v = None if v is None else [[str(name), target_name(fn)] for name, fn in v]
        else:
            v = plain_value(v)
        out[key] = v
    return out


def _desc(d: Any) -> Any:
    if d is None:
        return None
    return {"class": type(d).__name__, "expr": d.expr() if hasattr(d, "expr") else plain_value(d)}


def _class_name(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else str(cls)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def plain_value(v: Any) -> Any:
    """A meta value as plain data: scalars, text, lists, tuples and dicts as they are; anything else as its text
    without addresses (`<NestedCompileRegionOptions>` for an object whose repr is only its address)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dict):
        return {str(k): plain_value(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(plain_value(x) for x in v)
    if isinstance(v, list):
        return [plain_value(x) for x in v]
    if isinstance(v, (torch.dtype, torch.device, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return Opaque(str(v))
    text = repr(v)
    if type(v).__repr__ is object.__repr__:
        text = f"<{type(v).__qualname__}>"
    return Opaque(_ADDRESS.sub("", text))
