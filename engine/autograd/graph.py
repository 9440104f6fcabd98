"""`engine.autograd.graph`: the Node type, GradientEdge and get_gradient_edge."""
from __future__ import annotations

from typing import NamedTuple

from .._node import Node
from .._tensor import Tensor, gradient_edge

__all__ = ["Node", "GradientEdge", "get_gradient_edge"]


class GradientEdge(NamedTuple):
    """A node and which of its inputs a gradient flows into."""

    node: Node
    output_nr: int


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The edge the gradient w.r.t. `tensor` flows along (creates a leaf's AccumulateGrad if needed)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require "
                           "gradients")
    node, nr = gradient_edge(tensor)
    return GradientEdge(node, nr)
