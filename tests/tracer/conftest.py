"""Fixtures shared by the tracer's tests."""
from __future__ import annotations

import pytest

from agdb import engine as torch
from agdb import tracer
from agdb.tracer.store.schema import short_name


@pytest.fixture(scope="module")
def small():
    """x.exp().sin().cos() * w, summed: Sum -> Mul -> {Cos -> Sin -> Exp -> Acc_x, Acc_w}; the trace and its node
    indices by short name (Acc_x, Acc_w for the two AccumulateGrads)."""
    with tracer.record() as rec:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        w = torch.tensor([3.0, 4.0], requires_grad=True)
        (x.exp().sin().cos() * w).sum().backward()
    t = rec.trace
    idx = {short_name(t.node(i).name): i for i in range(t.num_nodes) if "AccumulateGrad" not in t.node(i).name}
    idx["Acc_x"] = t.node(idx["ExpBackward0"]).next_edges[0][0]
    idx["Acc_w"] = t.node(idx["MulBackward0"]).next_edges[1][0]
    assert len(idx) == t.num_nodes == 7
    return t, idx
