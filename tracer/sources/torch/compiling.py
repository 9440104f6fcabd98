"""Whether torch is tracing the program rather than running it (the bridge stands aside then), and what the bridge
keeps of torch.compile's own work: an entry per backward call torch made while tracing, the numbers taken while
Dynamo compiled, and the compile each compiled region's backward node belongs to.

Imports torch (through bridge.py and fx_run.py only); never textual or rich.

NOTE [compile time]
torch.compile runs the user's code twice over before it runs it: Dynamo traces the Python (inlining whatever
Python it meets, the bridge's own wrappers included), and AOTAutograd traces the result with fake tensors,
calling `torch.autograd.grad` and `Function.apply` itself to build the joint graph. What happens then is not the
user's program: its autograd nodes belong to fake tensors, its backward is AOT's, and a bridge that walked those
graphs, hooked their nodes or summarised their grads would record a graph task the user never ran and, worse,
change what torch traces (a summary of a fake grad becomes a constant AOTAutograd refuses: "Unexpected fake buffer
_tensor_constant0"). So every place the bridge wraps asks `tracing()` first and, while torch traces, passes the
call straight on. Under Dynamo `torch.compiler.is_compiling()` is True, and Dynamo folds it, so the wrapper it
inlines is the plain call; under AOTAutograd's make_fx, the proxy or fake dispatch mode is active.

The compiled program itself runs as any program does: its CompiledFunction node is recorded like any node (NOTE
[compiled function nodes]).
"""
from __future__ import annotations

import bisect
import functools
import sys
import types
from typing import Any, Callable

import torch

_get_mode = torch._C._get_dispatch_mode
_KEYS = torch._C._TorchDispatchModeKey
_is_compiling = torch.compiler.is_compiling
_seq = torch.autograd._get_sequence_nr


def tracing() -> bool:
    """True while Dynamo or AOTAutograd traces (NOTE [compile time])."""
    return _is_compiling() or _get_mode(_KEYS.PROXY) is not None or _get_mode(_KEYS.FAKE) is not None


# NOTE [compile-time entries]
# A backward call torch makes while it traces is not walked, hooked or summarised (NOTE [compile time]); what is kept
# of it is what can be read without running anything of torch's: which compile made it (Dynamo's compile id, read
# from torch's CompileContext, and the frame Dynamo is compiling, a local of its `_compile` up the stack), whether
# it is a backward() or an autograd.grad() (its `accumulate_grad`), and the names of its roots' and inputs' nodes.
# A node's name is a method of the node, not of the fake tensor; the tensors' `grad_fn` getter is read with torch
# functions disabled, so that no mode or subclass of the tracer sees it. The list is the trace's
# `meta["compile_time_calls"]` (docs/trace-format.md), apart from the program's graph tasks.
NAMES_KEPT = 20
"""Node names kept per list of a compile-time entry (the count says how many there were)."""


def compile_time_entry(t_outputs: Any, args: tuple, kwargs: dict) -> dict:
    """The plain entry of one backward call torch made while tracing (NOTE [compile-time entries]): `compile_id`,
    `function`, `file`, `line`, `kind` ("backward" or "grad"), `roots` and `inputs` (node names, at most
    NAMES_KEPT each; "leaf" for a tensor with no grad_fn) and `num_roots`, `num_inputs`."""
    accumulate = kwargs.get("accumulate_grad", args[5] if len(args) > 5 else True)
    given = kwargs.get("inputs", args[3] if len(args) > 3 else None) or ()
    compile_id, function, file, line = compile_origin()
    with torch._C.DisableTorchFunction():
        roots = _names(t_outputs)
        inputs = _names(given)
    return {"compile_id": compile_id, "function": function, "file": file, "line": line,
            "kind": "backward" if accumulate else "grad",
            "roots": roots[:NAMES_KEPT], "num_roots": len(roots), "inputs": inputs[:NAMES_KEPT],
            "num_inputs": len(inputs)}


def _names(tensors: Any) -> list[str]:
    out = []
    for t in tensors:
        if isinstance(t, torch.autograd.graph.GradientEdge):
            out.append(t.node.name())
            continue
        fn = t.grad_fn
        out.append("leaf" if fn is None else fn.name())
    return out


def compile_origin() -> tuple[str | None, str | None, str | None, int | None]:
    """The compile in progress: Dynamo's compile id (as "0/0") and the function, file and first line of the frame
    Dynamo is compiling; each None outside Dynamo."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    code = compiled_code()
    if code is None:
        return None if compile_id is None else str(compile_id), None, None, None
    return None if compile_id is None else str(compile_id), code.co_name, code.co_filename, code.co_firstlineno


def compiled_code() -> types.CodeType | None:
    """The code object Dynamo is compiling (a local of its `_compile`, up the stack), or None outside Dynamo."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_compile" and frame.f_code.co_filename.endswith("convert_frame.py"):
            code = frame.f_locals.get("code")
            return code if isinstance(code, types.CodeType) else None
        frame = frame.f_back
    return None


# NOTE [compiled function nodes]
# AOTAutograd makes one autograd.Function class per compile (`CompiledFunction`, built in
# torch/_functorch/_aot_autograd/runtime_wrappers.py), whose class attribute `_aot_id` is the compile's
# `aot_config.aot_id`; running the compiled region applies it, and its node, CompiledFunctionBackward, is a node of
# the program's graph like any other (`node._forward_cls._aot_id` names the same compile). The bridge's patched
# `Function.apply` notes the class's `_aot_id` with the number the node takes (the counter at entry), and the trace
# says, for each CompiledFunctionBackward node, which compile it belongs to (`meta["compiled_functions"]`); the FX
# capture notes the same id for each compile it keeps (fx_run.py), which is how a view finds the node's graphs
# (tracer/views/compiled.py).
COMPILED_NODE = "CompiledFunctionBackward"


def compiled_function_rows(trace: Any, noted: list[tuple[int, int, int]], keys_of: Any, row_of: dict[int, int]
                           ) -> list[dict]:
    """`meta["compiled_functions"]`: `{"node": row, "aot_id": id}` for each noted (thread row, seq_nr, aot_id)
    whose node the trace holds and names CompiledFunctionBackward (NOTE [compiled function nodes]); `keys_of[row]`
    maps a thread's seq_nrs to node keys, `row_of` node keys to the trace's rows."""
    out = []
    for thread, seq, aot_id in noted:
        row = row_of.get(keys_of[thread].get(seq, 0), -1)
        if row >= 0 and trace.node_name(row) == COMPILED_NODE:
            out.append({"node": row, "aot_id": int(aot_id)})
    return out


# NOTE [numbers taken while compiling]
# While Dynamo compiles a frame, AOTAutograd runs the frame's ops on fake tensors with grad mode on, and each op's
# autograd node takes a number of the thread's counter as a real one does (a compile of a three-op function takes
# about six). No program's tensor leads to those nodes, so the bridge would write each number as an unnamed node
# (`?`) and a culprit on the line that called the compiled function. Dynamo compiles a frame in one call of
# torch._dynamo.convert_frame._compile, and every number taken during that call is the compile's (what runs there
# is torch's tracing, on fake tensors, even where it runs the program's Python, as for a nested compile region's
# function). The bridge wraps that name (plain Python around Dynamo, which traces nothing of it), notes each call's
# range (`meta["compile_time_seq_nrs"]`: `[thread row, start, stop]` each), and writes no node for a number in one:
# neither an unnamed one (Forward.bump) nor one the line tracer named while the program's lines ran on fake
# tensors (its notes are written only after the compile returned, when the range is known: Forward.write_seen).
# Dynamo is imported by the first torch.compile call, not by `import torch` (importing it costs a second): if it
# is not imported when the recording starts, the bridge wraps `torch.compile` and wraps `_compile` once that call
# has imported it.
_CONVERT_FRAME = "torch._dynamo.convert_frame"


def watch_compiles(note: Callable[[int, int], None]) -> Callable[[], None]:
    """Call `note(start, stop)` after each Dynamo compile that took numbers start..stop-1 on its thread (NOTE
    [numbers taken while compiling]); returns what puts torch back."""
    restore: list[Callable[[], None]] = []

    def wrap_compile(convert_frame: Any) -> None:
        original = convert_frame._compile

        def _compile(*args: Any, **kwargs: Any) -> Any:
            before = _seq()
            try:
                return original(*args, **kwargs)
            finally:
                after = _seq()
                if after > before:
                    note(before, after)

        convert_frame._compile = _compile
        restore.append(lambda: setattr(convert_frame, "_compile", original))

    loaded = sys.modules.get(_CONVERT_FRAME)
    if loaded is not None and hasattr(loaded, "_compile"):
        wrap_compile(loaded)
    else:
        original_compile = torch.compile

        def compile(*args: Any, **kwargs: Any) -> Any:  # noqa: A001 - torch's name, put back on detach
            out = original_compile(*args, **kwargs)
            module = sys.modules.get(_CONVERT_FRAME)
            if not restore[1:] and module is not None and hasattr(module, "_compile"):
                wrap_compile(module)
            return out

        functools.update_wrapper(compile, original_compile)
        torch.compile = compile
        restore.append(lambda: setattr(torch, "compile", original_compile))

    def undo() -> None:
        while restore:
            restore.pop()()

    return undo


def is_compile_time(ranges: list[tuple[int, int]], seq: int) -> bool:
    """Whether `seq` is in one of a thread's compile ranges, kept sorted and disjoint (NOTE [numbers taken while
    compiling])."""
    i = bisect.bisect_right(ranges, (seq, sys.maxsize)) - 1
    return i >= 0 and ranges[i][0] <= seq < ranges[i][1]
