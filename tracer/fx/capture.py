"""`capture_joint`: run a function or module forward and backward on agdb's engine and build its joint graph.

The meta follows what PyTorch 2.13's AOTAutograd writes (measured with aot_function and
aot_export_joint_with_descriptors; docs/fx.md lists every rule):

- a forward node takes `seq_nr = _get_sequence_nr() - 1` when it is made, right after its op returned;
- backward nodes take the seq_nr of the autograd node being run, pushed where AOT's Node pre-hook runs and
  popped where its post-hook runs (a stack: a reentrant backward nests; NOTE [seq_nr window]);
- between a post-hook and the next pre-hook, the window where InputBuffer sums gradients (and where tensor
  hooks run, as PyTorch has it), nodes get `is_gradient_acc`, the special stack line and the forward rule.

Where the events come from: forward ops and ops user code runs during backward (tensor hooks, a custom
Function's backward) from the engine's one dispatch point (`op_called`); gradient sums from `buffer_written`;
the derivative formulas' own ops by wrapping the `engine._ops` namespace they call through, for the duration
of the capture only (tracer/fx/patching.py). Captures run one at a time and record only their own thread.

Imports the engine (it drives it) and the standard library; never textual or rich.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from threading import get_ident
from typing import Any, Literal

import numpy as np

from agdb.tracer.fx.calls import Ref, overload_of, without_defaults
from agdb.tracer.fx.descriptors import (
    AOTInput,
    BufferAOTInput,
    GradAOTOutput,
    ParamAOTInput,
    PlainAOTInput,
    PlainAOTOutput,
    TangentAOTInput,
)
from agdb.tracer.fx.frames import stack_text, user_frame
from agdb.tracer.fx.graph import Graph, Node
from agdb.tracer.fx.patching import Patched

CustomFunctions = Literal["trace", "python_op"]
"""How a custom autograd.Function appears: traced through (its inner ops), or one PythonOp/PythonOpGrad pair."""

GRADIENT_ACC_SPECIAL_STACK = "Gradient addition node due to multiple use of tensor around:"
"""The line PyTorch puts in the stack trace of ops traced between two backward nodes (exact text)."""

COMPOSITE_OPS = frozenset({"linear", "matmul"})
"""Ops aten decomposes in AOT graphs (CompositeImplicitAutograd) that the engine implements with its own ops, down
the same paths: recorded as those ops (`_Capture._decompose`)."""

_capture_lock = threading.Lock()
_DTYPE_NAMES: dict = {}


@dataclass
class _Window:
    """The backward-tracing state PyTorch keeps in fx.traceback's current_meta."""

    seq_stack: list[int] = field(default_factory=list)
    stack_trace: str = ""
    in_acc_window: bool = False  # the stack trace holds GRADIENT_ACC_SPECIAL_STACK (after a post-hook)


class _Capture:
    """The observer: turns op calls, gradient sums and formula ops into FX nodes."""

    def __init__(self, custom_functions: CustomFunctions) -> None:
        from agdb.engine import _state

        self.tls = _state.tls
        self.g = Graph()
        self.custom_functions = custom_functions
        self.fx_of: dict[int, Node] = {}  # id(tensor) -> node; tensors are kept alive in `keep`
        self.fx_of_data: dict[int, Node] = {}  # id(tensor._data) -> node, for saved tensors unpacked anew
        self.keep: list[Any] = []
        self.storages: dict[int, int] = {}
        self.phase = "setup"  # setup | forward | backward
        self.w = _Window()
        self.module_stack: list[tuple[str, str]] = []
        self.in_formula = 0
        self.in_function = 0  # depth of custom Function.apply calls being captured as one PythonOp
        self.bumps: list[list] = []
        from agdb.engine import _dispatch

        self.reporting = _dispatch._reporting
        self.thread = threading.get_ident()
        """Events from other threads (a background thread running ops meanwhile) are not the capture's."""
        self.explained: set[int] = set()
        self.buffer_fx: dict[tuple, Node] = {}
        self.last_outputs: list = []
        self.first_fwd: dict[int, Node] = {}
        self.n_constants = 0
        self.hooked: set[int] = set()
        self.op_frame: tuple[str, int, str] | None = None
        from agdb.engine import Tensor

        self.Tensor = Tensor
        self.grad_in: list[list] = []
        self.leaves: list = []  # patching.Leaf records of the reported op running now

    # -- tensors and nodes -------------------------------------------------------------------------------
    def bind(self, t: Any, node: Node) -> None:
        self.fx_of[id(t)] = node
        self.fx_of_data[id(t._data)] = node
        self.keep.append(t)

    def node_of(self, t: Any) -> Node:
        node = self.fx_of.get(id(t)) or self.fx_of_data.get(id(t._data))
        if node is None:  # a tensor the traced code did not make: a constant, as FX's get_attr
            target = f"_tensor_constant{self.n_constants}"
            self.n_constants += 1
            self.g.constants[target] = np.array(t._data, copy=True)
            node = self.g.create_node("get_attr", target, name=target, meta={"val": self.val(t)})
            self.bind(t, node)
        return node

    def val(self, t: Any) -> dict:
        data = t._data
        root = data
        base = data.base
        while base is not None and base.__class__ is np.ndarray:
            root, base = base, base.base
        storage = self.storages.get(id(root))
        if storage is None:
            storage = self.storages[id(root)] = len(self.storages)
            self.keep.append(root)
        item = data.itemsize
        dt = data.dtype
        name = _DTYPE_NAMES.get(dt)
        if name is None:  # numpy's dtype names are PyTorch's here (float32, int64, bool); .name is slow
            name = _DTYPE_NAMES[dt] = dt.name
        return {"shape": list(data.shape), "stride": [s // item for s in data.strides], "dtype": name,
                "storage": storage}

    def arg(self, v: Any) -> Any:
        if isinstance(v, self.Tensor):
            node = self.fx_of.get(id(v))
            if node is not None:
                return node
            if v._is_wrapped_number:
                return v._data.item()  # a Python number the op wrapped (`x * 2`): aten keeps it a scalar
            return self.node_of(v)
        if isinstance(v, (tuple, list)):
            out = [self.arg(x) for x in v]
            return tuple(out) if isinstance(v, tuple) else out
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist() if v.size <= 16 else f"<ndarray {list(v.shape)}>"
        return Ref(v)

    def meta_for_new(self, kind: str) -> dict:
        """seq_nr, partitioner_tag and the backward marks of a node made now (torch's _get_seq_nr rules)."""
        w = self.w
        if self.phase == "forward":
            meta = {"seq_nr": self.tls.seq_nr - 1, "partitioner_tag": "is_forward"}
            frame = self.op_frame or user_frame()
            self.op_frame = None  # one node per op call: later nodes walk the stack themselves
            meta["stack_trace"] = stack_text(frame)
            if self.module_stack:
                meta["nn_module_stack"] = {fqn: [fqn, cls] for fqn, cls in self.module_stack}
            return meta
        meta = {"partitioner_tag": "is_backward"}
        if w.seq_stack:
            meta["seq_nr"] = w.seq_stack[-1]
            meta["autograd_backward"] = True
        else:
            meta["seq_nr"] = self.tls.seq_nr - 1
        trace = w.stack_trace
        if kind == "op" and (not w.seq_stack or not trace):
            line = stack_text(user_frame())  # a hook's or custom backward's own line
            trace = f"{trace}\n{line}" if trace and line else (trace or line)
        if trace:
            meta["stack_trace"] = trace
        if w.in_acc_window:
            meta["is_gradient_acc"] = True
            meta["autograd_backward"] = True
        return meta

    def add(self, target: str, args: tuple, kwargs: dict | None, outputs: tuple, kind: str,
            name: str | None = None, extra: dict | None = None) -> Node:
        meta = self.meta_for_new(kind)
        if extra:
            meta.update(extra)
        node = self.g.create_node("call_function", target, args, kwargs, name=name, meta=meta)
        if len(outputs) == 1:
            out = outputs[0]
            meta["val"] = self.val(out)
            self.fx_of[id(out)] = node  # bind(), inlined: this runs once per node
            self.fx_of_data[id(out._data)] = node
            self.keep.append(out)
        elif outputs:
            node.meta["val"] = [self.val(o) for o in outputs]
            for i, o in enumerate(outputs):
                item = self.g.create_node("call_function", "getitem", (node, i), name="getitem",
                                          meta={**{k: meta[k] for k in ("seq_nr", "partitioner_tag") if k in meta},
                                                "val": self.val(o)})
                self.bind(o, item)
        if self.phase == "forward" and meta.get("seq_nr") is not None:
            self.first_fwd.setdefault(meta["seq_nr"], node)
        return node

    # -- engine observer points --------------------------------------------------------------------------
    def op_called(self, call: Any) -> None:
        if get_ident() != self.thread:
            return
        bumps = self.bumps
        leaves, self.leaves = self.leaves, []
        self.op_frame = None
        if bumps and bumps[-1][2] is None:  # increments made inside this call: its user line is theirs
            frame = self.op_frame = user_frame()
            i = len(bumps) - 1
            while i >= 0 and bumps[i][2] is None:
                bumps[i][2] = frame
                i -= 1
        if self.phase == "setup" or self.in_function or self.in_formula:
            return
        if self.phase == "forward" and call.backward_node is not None:
            return
        args = tuple([self.arg(a) for a in without_defaults(call.impl, call.args)])
        kwargs = {k: self.arg(v) for k, v in call.kwargs.items()} if call.kwargs else {}
        extra = None
        if self.phase == "forward" and call.node is not None:
            seq = call.node._seq
            extra = {"autograd_node": {"name": call.node.name(), "seq_nr": seq}}
            self.explained.add(seq)
        elif self.phase != "forward":
            self.op_frame = None  # backward nodes find their own line
        if call.name in COMPOSITE_OPS and self._decompose(call, leaves):
            return
        overload = overload_of(call.impl)
        if overload is not None:
            extra = {**(extra or {}), "overload": overload}
        self.add(f"engine.{call.name}", args, kwargs, call.output_tensors, "op", name=call.name, extra=extra)

    def _decompose(self, call: Any, leaves: list) -> bool:
        """Record a composite op as the innermost ops it ran (patching.Leaf), as aten's CompositeImplicitAutograd
        decomposition appears in AOT graphs: `linear` on a 2-D input with a bias is `t` + `addmm`, on a 3-D one
        `view` + `t` + `addmm` + `view`. Each takes its own number, and the tensors the autograd nodes save (the
        weight's transpose) are nodes of the graph rather than constants. Only the ops the output depends on
        count (matmul's `mT` made and dropped is not one); False, and the op stays one node, when the output does
        not come from the inputs through them alone."""
        outs = call.output_tensors
        if len(outs) != 1 or not leaves:
            return False
        inputs = {id(t) for t in call.input_tensors}
        need = {id(outs[0])}
        chosen = []
        for leaf in reversed(leaves):
            if id(leaf.out) not in need:
                continue
            need.discard(id(leaf.out))
            chosen.append(leaf)
            for a in (*leaf.args, *leaf.kwargs.values()):
                if isinstance(a, self.Tensor) and id(a) not in inputs and not a._is_wrapped_number:
                    need.add(id(a))
        if need:
            return False
        forward = self.phase == "forward"
        for leaf in reversed(chosen):
            target, out = leaf.target, leaf.out
            if target == "engine._ops.reshape" and leaf.args[0]._data.flags.c_contiguous:
                target = "engine._ops.view"  # what reshape of a contiguous tensor is (ViewBackward0), as in aten
            extra = None
            if forward:
                extra = {"seq_nr": leaf.after - 1}
                made = out._grad_fn
                if leaf.after != leaf.before and made is not None and leaf.before <= made._seq < leaf.after:
                    extra["autograd_node"] = {"name": made.name(), "seq_nr": made._seq}
                    self.explained.add(made._seq)
            args = tuple([self.arg(a) for a in without_defaults(leaf.fn, leaf.args)])
            kwargs = {k: self.arg(v) for k, v in leaf.kwargs.items()}
            self.add(target, args, kwargs, (out,), "op", name=target.rsplit(".", 1)[-1], extra=extra)
        return True

    def seq_nr_bumped(self, node: Any, seq_nr: int) -> None:
        if self.phase == "setup" or get_ident() != self.thread:
            return
        # [seq_nr, node, (file, line, function), phase], made into dicts when the capture ends. Inside a reported
        # op the frame is filled in when the op is reported (op_called walks the stack once for both).
        self.bumps.append([seq_nr, node, None if self.reporting.active else user_frame(), self.phase])

    def buffer_written(self, graph_task: Any, node: Any, slot: int, is_accumulation: bool, buffer: Any) -> None:
        if get_ident() != self.thread:
            return
        key = (id(graph_task), node._uid, slot)
        value = buffer.buffer[slot]
        if value is None:
            return
        produced = self._produced_for(node, slot)
        if not is_accumulation:
            self.buffer_fx[key] = produced if produced is not None else self.node_of(value)
            return
        old = self.buffer_fx.get(key)
        new = produced
        if old is None or new is None:
            self.buffer_fx[key] = self.node_of(value)
            return
        acc = self.add("engine.add", (old, new), {}, (value,), "acc", name="add")
        self.buffer_fx[key] = acc

    def _produced_for(self, nxt: Any, slot: int) -> Node | None:
        fn = self.tls.current_node
        if fn is None:
            return None
        for i, (child, input_nr) in enumerate(fn.next_edges):
            if child is nxt and input_nr == slot and i < len(self.last_outputs):
                return self.last_outputs[i]
        return None

    def node_started(self, graph_task: Any, node: Any, inputs: list) -> None:
        if get_ident() != self.thread:
            return
        # The buffer's (summed) grads, as the node sees them after its hooks.
        for slot, t in enumerate(inputs):
            if t is not None:
                fx = self.buffer_fx.pop((id(graph_task), node._uid, slot), None)
                if fx is not None and id(t) not in self.fx_of:
                    self.bind(t, fx)
        if id(node) in self.hooked:
            self._enter_node(node, inputs)

    def node_finished(self, graph_task: Any, node: Any, outputs: list) -> None:
        if get_ident() != self.thread:
            return
        if id(node) in self.hooked:
            self._leave_node(node, outputs)
        fx_of = self.fx_of  # only what is known: a grad nobody traced becomes a constant when it is used
        self.last_outputs = [None if o is None else fx_of.get(id(o)) for o in outputs]

    # -- the pre/post-hook pair AOT registers on every node (logging_utils.setup_stacktrace_preservation_hooks)
    # NOTE [seq_nr window]: AOT registers a Node pre-hook and a post-hook on every node reachable from the
    # outputs when backward starts; its pre-hook runs after the tensor pre-hooks and the user's earlier Node
    # pre-hooks, its post-hook after validate_outputs and the user's post-hooks. The engine's node_started and
    # node_finished points sit exactly there, so the capture uses them for the nodes AOT would hook (found
    # here, once) rather than registering 2 hooks per node, which cost a quarter of a capture (bench/fx.py).
    def hook_nodes(self, roots: list) -> None:
        seen: set[int] = set()
        queue = [r for r in roots if r is not None]
        for r in queue:
            seen.add(id(r))
        i = 0
        while i < len(queue):
            fn = queue[i]
            i += 1
            for child, _ in fn.next_edges:
                if child is not None and id(child) not in seen:
                    seen.add(id(child))
                    queue.append(child)
        self.hooked = seen
        self.keep.append(queue)  # the ids stay valid while the capture runs

    def _fwd_stack(self, seq: int) -> str:
        fwd = self.first_fwd.get(seq)
        return (fwd.meta.get("stack_trace") or "") if fwd is not None else ""

    def _enter_node(self, fn: Any, grad_outputs: list) -> None:
        """AOT's pre-hook: push the node's number and its forward stack."""
        w = self.w
        w.stack_trace = self._fwd_stack(fn._seq)
        w.in_acc_window = False
        w.seq_stack.append(fn._seq)
        if self._is_python_op(fn):
            self.in_function += 1
            self.grad_in.append([None if g is None else self.node_of(g) for g in grad_outputs])

    def _leave_node(self, fn: Any, grad_inputs: list) -> None:
        """AOT's post-hook: pop the number, and mark the window until the next node as gradient accumulation."""
        w = self.w
        if self._is_python_op(fn):
            self.in_function -= 1
            outs = tuple(g for g in grad_inputs if g is not None)
            self.add("PythonOpGrad", tuple(self.grad_in.pop()), {"name": fn._forward_cls.__name__}, outs, "pyop",
                     name="PythonOpGrad")
        fwd = self._fwd_stack(fn._seq)
        w.stack_trace = (fwd + "\n" if fwd else "") + GRADIENT_ACC_SPECIAL_STACK
        w.in_acc_window = True
        if w.seq_stack:
            w.seq_stack.pop()

    def _is_python_op(self, fn: Any) -> bool:
        return self.custom_functions == "python_op" and hasattr(fn, "_forward_cls")


def bump_dict(b: tuple) -> dict:
    """A recorded increment as plain data: the number, the node that took it, the user's line, the phase."""
    seq, node, frame, phase = b
    file, line, fn = frame or ("", 0, "")
    return {"seq_nr": seq, "node": node.name(), "file": file, "line": line, "function": fn, "phase": phase}


def capture_joint(fn_or_module: Any, *args: Any, custom_functions: CustomFunctions = "trace") -> Graph:
    """Run `fn_or_module(*args)` forward and backward on the engine and return its joint graph.

    The graph takes parameters, buffers (for a module), the tensor arguments, then one tangent per output that
    needs a gradient; it returns the outputs, then the gradient of each input (None where it has none).
    Placeholders and the output carry `meta["desc"]` (tracer/fx/descriptors.py); `graph.info` holds the
    sequence-number increments that no FX node owns (`bumps`, with the Python line of each: an op that made
    several autograd nodes, a custom Function under no_grad, ...) for the anomalies report.

    Args:
        custom_functions: "trace" (a custom Function's inner ops appear, with the Function node's seq_nr) or
            "python_op" (one PythonOp node and one PythonOpGrad node per Function call).

    Raises:
        TypeError: the target is not callable, or returns no tensor.
        ValueError: an unknown `custom_functions`.
    """
    from agdb import engine
    from agdb.engine import nn

    if custom_functions not in ("trace", "python_op"):
        raise ValueError(f"custom_functions must be 'trace' or 'python_op', not {custom_functions!r}")
    if not callable(fn_or_module):
        raise TypeError(f"capture_joint needs a function or an nn.Module, not {type(fn_or_module).__name__}")
    with _capture_lock:
        cap = _Capture(custom_functions)
        g = cap.g
        primals: list[tuple[Any, AOTInput]] = []
        if isinstance(fn_or_module, nn.Module):
            primals += [(p, ParamAOTInput(n)) for n, p in fn_or_module.named_parameters()]
            primals += [(b, BufferAOTInput(n)) for n, b in fn_or_module.named_buffers()]
        call_args = []
        for i, a in enumerate(args):
            if isinstance(a, engine.Tensor):
                a = a.detach().requires_grad_(a.requires_grad) if a.grad_fn is not None else a
                primals.append((a, PlainAOTInput(i)))
            call_args.append(a)
        for k, (t, desc) in enumerate(primals):
            cap.bind(t, g.placeholder(f"primals_{k + 1}", {"val": cap.val(t), "desc": desc,
                                                           "partitioner_tag": "is_forward"}))
        handles = [engine.add_observer(cap)]
        handles += _module_hooks(cap, fn_or_module)
        try:
            with Patched(cap):
                cap.phase = "forward"
                out = fn_or_module(*call_args)
                outs = out if isinstance(out, tuple) else (out,)
                if not any(isinstance(o, engine.Tensor) for o in outs):
                    raise TypeError("the traced function returned no tensor")
                cap.phase = "setup"
                diff = [(i, o) for i, o in enumerate(outs) if isinstance(o, engine.Tensor) and o.requires_grad]
                tangents = [engine.ones_like(o) for _, o in diff]
                for j, ((i, _o), t) in enumerate(zip(diff, tangents, strict=True)):
                    cap.bind(t, g.placeholder(f"tangents_{j + 1}",
                                              {"val": cap.val(t), "desc": TangentAOTInput(PlainAOTOutput(i)),
                                               "partitioner_tag": "is_backward"}))
                # the placeholders go first, as in FX
                g.nodes.sort(key=lambda n: n.op != "placeholder")
                grads = _run_backward(cap, diff, tangents, primals)
        finally:
            cap.phase = "setup"
            for h in handles:
                h.remove()
        values = [cap.arg(o) if isinstance(o, engine.Tensor) else None for o in outs]
        descs: list = [PlainAOTOutput(i) for i in range(len(outs))]
        for (_t, desc), grad in zip(primals, grads, strict=True):
            values.append(None if grad is None else cap.node_of(grad))
            descs.append(GradAOTOutput(desc) if grad is not None else None)
        g.output(tuple(values), {"desc": descs})
        # Only the increments no FX node owns are kept: they are what shifts a number (the trace has them all).
        g.info = {"bumps": [bump_dict(b) for b in cap.bumps if b[0] not in cap.explained],
                  "custom_functions": custom_functions}
        return g


def _run_backward(cap: _Capture, diff: list, tangents: list, primals: list) -> list:
    """autograd.grad of the differentiable outputs w.r.t. the inputs that require grad, as AOT calls it."""
    from agdb import engine

    wanted = [t for t, _ in primals if t.requires_grad]
    if not diff or not wanted:
        return [None] * len(primals)
    cap.hook_nodes([o.grad_fn for _, o in diff])
    cap.phase = "backward"
    try:
        got = engine.autograd.grad([o for _, o in diff], wanted, tangents, allow_unused=True)
    finally:
        cap.phase = "setup"
    by_id = {id(t): g for t, g in zip(wanted, got, strict=True)}
    return [by_id.get(id(t)) for t, _ in primals]


def _module_hooks(cap: _Capture, target: Any) -> list:
    """Global module hooks that keep `nn_module_stack` (submodules only, by fully qualified name)."""
    from agdb.engine import nn
    from agdb.engine.nn import hooks as nn_hooks

    if not isinstance(target, nn.Module):
        return []
    names = {id(m): n for n, m in target.named_modules() if n}

    def pre(module, args):
        name = names.get(id(module))
        if name is not None:
            cls = type(module)
            cap.module_stack.append((name, f"{cls.__module__}.{cls.__qualname__}"))

    def post(module, args, output):
        if names.get(id(module)) is not None and cap.module_stack:
            cap.module_stack.pop()

    return [nn_hooks.register_module_forward_pre_hook(pre), nn_hooks.register_module_forward_hook(post)]
