"""Whether torch is tracing the program rather than running it: the bridge stands aside then.

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

The compiled program itself runs as any program does: its CompiledFunction node is recorded like any node.
"""
from __future__ import annotations

import torch

_get_mode = torch._C._get_dispatch_mode
_KEYS = torch._C._TorchDispatchModeKey
_is_compiling = torch.compiler.is_compiling


def tracing() -> bool:
    """True while Dynamo or AOTAutograd traces (NOTE [compile time])."""
    return _is_compiling() or _get_mode(_KEYS.PROXY) is not None or _get_mode(_KEYS.FAKE) is not None
