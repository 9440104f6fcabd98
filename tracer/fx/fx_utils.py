"""Reading a joint graph by its descriptors: each input with its gradient node, each output with its tangent, the
parameters and buffers by name (PyTorch 2.13's torch._functorch._aot_autograd.fx_utils, same names).

Imports the FX graph model and the descriptors only.
"""
from __future__ import annotations

from agdb.tracer.fx.descriptors import (
    AOTInput,
    AOTOutput,
    BufferAOTInput,
    GradAOTOutput,
    ParamAOTInput,
    PlainAOTInput,
    PlainAOTOutput,
    TangentAOTInput,
)
from agdb.tracer.fx.graph import Graph, Node


def _outputs(g: Graph) -> list[tuple[Node | None, AOTOutput | None]]:
    out = g.output_node
    values = out.args[0]
    descs = out.meta.get("desc")
    if descs is None:
        raise RuntimeError("the output node has no meta['desc']: not a joint graph with descriptors")
    return list(zip(values, descs, strict=True))


def _placeholders(g: Graph) -> list[tuple[Node, AOTInput]]:
    found = []
    for n in g.nodes:
        if n.op == "placeholder":
            desc = n.meta.get("desc")
            if desc is None:
                raise RuntimeError(f"placeholder {n.name} has no meta['desc']: not a joint graph with descriptors")
            found.append((n, desc))
    return found


def get_all_input_and_grad_nodes(g: Graph) -> dict[AOTInput, tuple[Node, Node | None]]:
    """Every input (tangents included) and the node computing its gradient, or None."""
    grads = {d.grad_of: n for n, d in _outputs(g) if isinstance(d, GradAOTOutput)}
    return {d: (n, grads.get(d)) for n, d in _placeholders(g)}


def get_all_output_and_tangent_nodes(g: Graph) -> dict[AOTOutput, tuple[Node | None, Node | None]]:
    """Every output (gradients included) and its tangent placeholder, or None."""
    tangents = {d.output: n for n, d in _placeholders(g) if isinstance(d, TangentAOTInput)}
    return {d: (n, tangents.get(d)) for n, d in _outputs(g) if d is not None}


def get_param_and_grad_nodes(g: Graph) -> dict[ParamAOTInput, tuple[Node, Node | None]]:
    """Each parameter's placeholder and gradient node."""
    return {d: v for d, v in get_all_input_and_grad_nodes(g).items() if isinstance(d, ParamAOTInput)}


def get_plain_input_and_grad_nodes(g: Graph) -> dict[PlainAOTInput, tuple[Node, Node | None]]:
    """Each positional input's placeholder and gradient node."""
    return {d: v for d, v in get_all_input_and_grad_nodes(g).items() if isinstance(d, PlainAOTInput)}


def get_plain_output_and_tangent_nodes(g: Graph) -> dict[PlainAOTOutput, tuple[Node | None, Node | None]]:
    """Each returned value's node and its tangent placeholder."""
    return {d: v for d, v in get_all_output_and_tangent_nodes(g).items() if isinstance(d, PlainAOTOutput)}


def get_named_param_nodes(g: Graph) -> dict[str, Node]:
    """Parameter placeholders by fully qualified name, in input order."""
    return {d.target: n for n, d in _placeholders(g) if isinstance(d, ParamAOTInput)}


def get_named_buffer_nodes(g: Graph) -> dict[str, Node]:
    """Buffer placeholders by fully qualified name, in input order."""
    return {d.target: n for n, d in _placeholders(g) if isinstance(d, BufferAOTInput)}


def get_param_nodes(g: Graph) -> list[Node]:
    """Parameter placeholders in the order the joint graph takes them (first)."""
    return list(get_named_param_nodes(g).values())


def get_buffer_nodes(g: Graph) -> list[Node]:
    """Buffer placeholders in the order the joint graph takes them (after the parameters)."""
    return list(get_named_buffer_nodes(g).values())
