"""`engine.autograd.graph`: the Node type, GradientEdge, get_gradient_edge, and the saved-tensor hooks."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, NamedTuple

from .. import _saved
from .._node import Node
from .._state import enable_grad, tls
from .._tensor import Tensor

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks"]


class GradientEdge(NamedTuple):
    """A node and which of its inputs a gradient flows into; `ownership_token` keeps a custom Function's node
    alive, as torch's does."""

    node: Node
    output_nr: int
    ownership_token: Node | None = None


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The edge the gradient w.r.t. `tensor` flows along (creates a leaf's AccumulateGrad if needed).

    torch reaches a leaf's accumulator through a throwaway `tensor.view_as(tensor)` under enable_grad, and makes
    one more for a custom Function's node (its ownership token): each takes a seq_nr, so later numbers agree."""
    from .function import BackwardCFunction

    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require "
                           "gradients")
    if tensor.grad_fn is None:
        with enable_grad():
            node = tensor.view_as(tensor).grad_fn.next_functions[0][0]
    else:
        node = tensor.grad_fn
    token = None
    if isinstance(node, BackwardCFunction):
        with enable_grad():
            token = tensor.view_as(tensor).grad_fn
    return GradientEdge(node, tensor.output_nr, token)


class saved_tensors_hooks:
    """Inside the block, every tensor an op or a custom Function saves for backward is handed to
    `pack_hook(tensor)`, and what it returns is kept instead; `unpack_hook(packed)` must give the tensor back
    whenever it is used. Thread-local; the innermost pair wins (NOTE [saved tensors] in engine/_saved.py)."""

    def __init__(self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        _saved.push_default_hooks(self.pack_hook, self.unpack_hook)

    def __exit__(self, *args: object) -> None:
        _saved.pop_default_hooks()


class save_on_cpu(saved_tensors_hooks):
    """saved_tensors_hooks that keep a CPU copy of each saved tensor and move it back to its device when used."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor: Tensor) -> tuple[Any, Tensor]:
            if not pin_memory:
                return (tensor.device, tensor.cpu())  # the tensor itself when it is on the CPU already
            # torch copies into a new buffer, pinned only when an accelerator exists (none here).
            return (tensor.device, tensor.cpu().clone())

        def unpack_from_cpu(packed: tuple[Any, Tensor]) -> Tensor:
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Iterator[None]:
    """Inside the block, entering saved_tensors_hooks raises RuntimeError(error_message); so does entering the
    block while hooks are in force. The previous state comes back on exit."""
    previous = tls.saved_hooks_disabled
    try:
        _saved.disable_default_hooks(error_message)
        yield
    finally:
        tls.saved_hooks_disabled = previous
