"""`engine.autograd`: backward, grad, Function and anomaly mode, with PyTorch's checks and messages."""
from __future__ import annotations

from typing import Any, Sequence

from .. import _engine
from .._node import Identity
from .._state import peek_sequence_nr, tls
from .._tensor import Tensor, gradient_edge, try_get_grad_accumulator
from . import graph
from .anomaly_mode import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import gradcheck, gradgradcheck  # shadows the submodule, as in torch
from .graph import GradientEdge

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "detect_anomaly",
    "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "graph", "Variable",
    "_get_sequence_nr", "set_multithreading_enabled", "is_multithreading_enabled", "gradcheck", "gradgradcheck",
    "functional",
]


def _get_sequence_nr() -> int:
    """The seq_nr the next numbered node created on this thread will take (engine-semantics §1.6)."""
    return peek_sequence_nr()


def _as_tuple(value: Any) -> tuple:
    if isinstance(value, (Tensor, GradientEdge)):
        return (value,)
    return tuple(value)


def _tensor_or_tensors_to_tuple(tensors: Any, length: int) -> tuple:
    if tensors is None:
        return (None,) * length
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)


def _make_grads(outputs: Sequence[Any], grads: Sequence[Any]) -> tuple:
    """Check user grads against outputs and make implicit ones (torch.autograd._make_grads)."""
    from .. import _factories

    new_grads = []
    for out, grad in zip(outputs, grads, strict=False):
        if isinstance(out, GradientEdge):
            meta = out.node._input_metadata[out.output_nr]
            out_size, out_dtype, out_device = tuple(meta.shape), meta.dtype, meta.device
            out_requires_grad = True
        elif isinstance(out, Tensor):
            out_size, out_dtype, out_device = tuple(out.shape), out.dtype, out._device
            out_requires_grad = out.requires_grad
        else:  # torch's Python _make_grads asserts this before its C++ engine could name the element
            raise AssertionError("Expected output to be a torch.Tensor")
        if isinstance(grad, Tensor):
            if tuple(grad.shape) != out_size:
                # torch's message finds the positions with grads.index(grad) and outputs.index(out), which compare
                # with == from the first element on: for a later one, that comparison's error (shapes that do not
                # broadcast, or bool() of a many-element result) is what torch raises
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{grads.index(grad)}] has a shape of {grad.shape} and "
                    f"output[{outputs.index(out)}] has a shape of {_size_repr(out_size)}.")
            new_grads.append(grad)
        elif grad is None:
            if out_requires_grad:
                numel = 1
                for s in out_size:
                    numel *= s
                if numel != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not out_dtype.is_floating_point:
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got {out_dtype}")
                new_grads.append(_factories.ones(out_size, dtype=out_dtype, device=out_device))
            else:
                new_grads.append(None)
        else:
            raise TypeError("gradients can be either Tensors or None, but got " + type(grad).__name__)
    return tuple(new_grads)


def _size_repr(shape: tuple) -> str:
    from .._dtype import Size

    return repr(Size(shape))


def _run_backward(tensors: tuple, grad_tensors: tuple, keep_graph: bool, create_graph: bool, inputs: tuple,
                  allow_unreachable: bool, accumulate_grad: bool) -> tuple | None:
    """THPEngine_run_backward: roots, output edges, then Engine::execute (engine-semantics §3.2, §3.3)."""
    if len(tensors) != len(grad_tensors):
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grad_tensors)} gradients")
    roots, grads = [], []
    for i, t in enumerate(tensors):
        if isinstance(t, Tensor):
            edge = gradient_edge(t)
        elif isinstance(t, GradientEdge):
            edge = (t.node, t.output_nr)
        else:
            raise TypeError(f"element {i} of tensors must be a tensor or a GradientEdge")
        if edge[0] is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append(edge)
        g = grad_tensors[i]
        if isinstance(g, Tensor):
            grads.append(g)
        elif g is None:
            if not (isinstance(t, Tensor) and not t.requires_grad):
                raise RuntimeError(f"element {i} of gradients tuple is None, but the corresponding Tensor "
                                   "requires grad")
            grads.append(None)
        else:
            raise TypeError(f"element {i} of gradients tuple is not a Tensor or None")

    output_edges = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            grad_fn = inp.grad_fn if inp.grad_fn is not None else try_get_grad_accumulator(inp)
            if accumulate_grad:
                inp.retain_grad()
            if not inp.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            if grad_fn is None:
                # NOTE [Autograd unreachable input]: a leaf with no AccumulateGrad cannot be reached;
                # a fresh Identity (a numbered node) stands in for it.
                output_edges.append((Identity(), 0))
            else:
                output_edges.append((grad_fn, inp.output_nr))
        elif isinstance(inp, GradientEdge):
            output_edges.append((inp.node, inp.output_nr))
        else:
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(inp).__name__}")

    outputs = _engine.execute(roots, grads, keep_graph, create_graph, accumulate_grad, output_edges)
    if not accumulate_grad and inputs:
        for i, out in enumerate(outputs):
            if not allow_unreachable and out is None:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in the graph. Set "
                    "allow_unused=True if this is the desired behavior.")
        return tuple(outputs)
    return None


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, grad_variables: Any = None, inputs: Any = None) -> None:
    """Accumulate into `.grad` of the leaves (or of `inputs`) the gradient of `tensors`."""
    if grad_variables is not None:
        if grad_tensors is not None:
            raise RuntimeError("'grad_tensors' and 'grad_variables' (deprecated) arguments both passed to "
                               "backward(). Please only use 'grad_tensors'.")
        grad_tensors = grad_variables
    if inputs is not None and not isinstance(inputs, (Tensor, GradientEdge)) and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    tensors = _as_tuple(tensors)
    inputs = _as_tuple(inputs) if inputs is not None else ()
    grad_tensors_ = _tensor_or_tensors_to_tuple(grad_tensors, len(tensors))
    grad_tensors_ = _make_grads(tensors, grad_tensors_)
    if retain_graph is None:
        retain_graph = create_graph
    _run_backward(tensors, grad_tensors_, retain_graph, create_graph, inputs, allow_unreachable=True,
                  accumulate_grad=True)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """The gradients of `outputs` w.r.t. `inputs`, returned instead of accumulated."""
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        raise NotImplementedError("engine.autograd.grad does not support is_grads_batched=True")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    grad_outputs_ = _tensor_or_tensors_to_tuple(grad_outputs, len(outputs))
    grad_outputs_ = _make_grads(outputs, grad_outputs_)
    if retain_graph is None:
        retain_graph = create_graph
    result = _run_backward(outputs, grad_outputs_, retain_graph, create_graph, inputs, allow_unused,
                           accumulate_grad=False)
    if materialize_grads:
        from .. import _factories

        if any(r is None and not isinstance(inputs[i], Tensor) for i, r in enumerate(result)):
            raise RuntimeError("materialize_grads cannot be used when the given input is a GradientEdge")
        result = tuple(r if r is not None else _factories.zeros_like(inp)
                       for r, inp in zip(result, inputs, strict=True))
    return result


class set_multithreading_enabled:
    """Run backward's device tasks on device threads (True, the default) or all on the calling thread.

    Takes effect at once; as a context manager it restores the previous setting on exit. The setting is
    per thread and is read when a backward starts (engine-semantics §12.1).
    """

    def __init__(self, mode: bool) -> None:
        self.prev = tls.multithreading_enabled
        tls.multithreading_enabled = bool(mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        tls.multithreading_enabled = self.prev


def is_multithreading_enabled() -> bool:
    """Whether backward on this thread uses device threads."""
    return tls.multithreading_enabled


class _ExecutionEngine:
    """What `Variable._execution_engine` offers: queue_callback."""

    @staticmethod
    def queue_callback(callback) -> None:
        """Run `callback` when the current backward finishes."""
        _engine.queue_callback(callback)


class _VariableMeta(type):
    def __instancecheck__(cls, other: object) -> bool:
        return isinstance(other, Tensor)


class Variable(Tensor, metaclass=_VariableMeta):
    """The legacy wrapper: `Variable(t)` is a detached alias of `t` (a Tensor of its dtype, sharing its data),
    a leaf that requires grad when asked; every Tensor is an instance. `Variable._execution_engine` offers
    queue_callback, as PyTorch code uses it."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


from . import functional  # noqa: E402 - needs grad defined
