"""matmul / `@` programs swept over shape pairs, run on engine and torch by test_matmul_parity.py.

torch 2.13's at::matmul picks, for N-D @ 1-D/2-D and 1-D/2-D @ N-D, between folding the larger operand's
batch into the rows of one mm/mv (ViewBackward0 or a copy, MmBackward0/MvBackward0, UnsafeViewBackward0, and
for 2-D @ N-D a transpose back) and expanding both operands to one bmm (ExpandBackward0, ViewBackward0 or
ReshapeAliasBackward0, BmmBackward0). Which one depends on which operand requires grad and on the larger
operand's strides, so every shape pair runs with each grad combination, on contiguous operands, on operands
made by `.mT` of a leaf, on a batch made by permuting a leaf, and on a batch made by expand (stride 0) or
unsqueeze. Each program compares the forward graph, the
create_graph formula graph and the second-order grads (`_forward_and_grads`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tests.engine.parity_programs import _forward_and_grads

PROGRAMS: dict[str, Callable] = {}

SHAPES = [
    ((2, 3, 4), (4,)), ((2, 3, 4), (4, 5)), ((2, 2, 3, 4), (4, 5)), ((2, 2, 3, 4), (4,)), ((1, 3, 4), (4, 2)),
    ((2, 1, 4), (4, 5)), ((2, 3, 1), (1, 5)), ((4,), (2, 4, 5)), ((5,), (2, 2, 5, 3)), ((4,), (1, 4, 5)),
    ((3, 4), (2, 4, 5)), ((3, 4), (2, 2, 4, 5)), ((3, 4), (1, 4, 5)), ((1, 4), (2, 4, 5)), ((3, 4), (2, 1, 4, 5)),
    ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (1, 4, 5)), ((1, 3, 4), (2, 4, 5)), ((1, 3, 4), (1, 4, 5)),
    ((2, 3, 4), (1, 4, 1)), ((2, 3, 4), (1, 1, 4, 5)), ((2, 2, 3, 4), (1, 4, 5)), ((2, 2, 3, 4), (2, 1, 4, 5)),
    ((2, 1, 3, 4), (3, 4, 2)), ((2, 3, 4), (4, 2)),
]
GRADS = {"both": (True, True), "first": (True, False), "second": (False, True)}


def _data(shape: tuple, seed: int) -> list:
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * 0.7 + seed) * 1.5).round(3).reshape(shape).tolist()


def _swap(shape: tuple) -> tuple:
    return shape[:-2] + (shape[-1], shape[-2])


def _operand(t, p, name: str, shape: tuple, layout: str, requires_grad: bool, seed: int):
    """A leaf (watched under `name`) and the operand made from it: itself, its `.mT`, or a batch permutation."""
    if layout == "mT":
        leaf = p.leaf(name, _data(_swap(shape), seed), requires_grad=requires_grad)
        return leaf, leaf.mT
    if layout == "permuted":
        base = (shape[1], shape[0]) + shape[2:]
        leaf = p.leaf(name, _data(base, seed), requires_grad=requires_grad)
        return leaf, leaf.transpose(0, 1)
    if layout == "expanded":  # a stride-0 batch
        leaf = p.leaf(name, _data((1,) + shape[1:], seed), requires_grad=requires_grad)
        return leaf, leaf.expand(shape)
    if layout == "unsqueezed":  # a size-1 batch made by unsqueeze: torch and numpy may disagree on its stride
        leaf = p.leaf(name, _data(shape[1:], seed), requires_grad=requires_grad)
        return leaf, leaf.unsqueeze(0)
    leaf = p.leaf(name, _data(shape, seed), requires_grad=requires_grad)
    return leaf, leaf


def _program(sa: tuple, sb: tuple, grads: tuple, la: str, lb: str) -> Callable:
    def fn(t, p):
        xa, a = _operand(t, p, "a", sa, la, grads[0], 0)
        xb, b = _operand(t, p, "b", sb, lb, grads[1], 1)
        leaves = [x for x in (xa, xb) if x.requires_grad]
        _forward_and_grads(t, p, lambda *xs: a @ b, *leaves)
    return fn


def _layouts(shape: tuple) -> tuple[str, ...]:
    layouts = ("contiguous",)
    if len(shape) >= 2:
        layouts += ("mT",)
    if len(shape) >= 3 and shape[0] > 1 and shape[1] > 1:
        layouts += ("permuted",)
    if len(shape) >= 3:
        layouts += ("expanded",) if shape[0] > 1 else ("unsqueezed",)
    return layouts


for _sa, _sb in SHAPES:
    for _g, _flags in GRADS.items():
        for _la in _layouts(_sa):
            for _lb in _layouts(_sb):
                if _la != "contiguous" and _lb != "contiguous":
                    continue
                _name = f"matmul_{'x'.join(map(str, _sa))}_{'x'.join(map(str, _sb))}_{_g}_{_la}_{_lb}"
                PROGRAMS[_name] = _program(_sa, _sb, _flags, _la, _lb)


def _errors(t, p):
    """Shape errors of each path, and the seq_nrs taken before each refuses."""
    for tag, sa, sb in (("3-D @ 1-D inner", (2, 3, 4), (3,)), ("3-D @ 2-D inner", (2, 3, 4), (3, 5)),
                        ("1-D @ 3-D inner", (3,), (2, 4, 5)), ("2-D @ 3-D inner", (3, 3), (2, 4, 5)),
                        ("3-D @ 3-D batch", (2, 3, 4), (3, 4, 5)), ("3-D @ 3-D inner", (2, 3, 4), (2, 3, 5)),
                        ("4-D @ 3-D batch", (2, 2, 3, 4), (3, 4, 5)), ("unit batch inner", (2, 3, 4), (1, 3, 5)),
                        ("3-D @ 0-D", (2, 3, 4), ())):
        a = p.leaf(f"a {tag}", _data(sa, 0))
        b = p.leaf(f"b {tag}", _data(sb, 1) if sb else 0.5)
        p.run(tag, lambda a=a, b=b: a @ b)
        p.counter(tag)
        p.run(tag + " (b only)", lambda a=a, b=b: a.detach() @ b)
        p.counter(tag + " (b only)")


PROGRAMS["matmul_errors"] = _errors
