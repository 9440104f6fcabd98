"""The bridge's line culprits (NOTE [line culprits] in tracer/sources/torch/lines.py): every increment of a real
torch run on the line that made it, named, without the mode's cost and without ever making a node by looking."""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from agdb import tracer  # noqa: E402
from agdb.tracer.recording.culprits import of_trace  # noqa: E402
from agdb.tracer.sources.torch.line_names import MAX_CANDIDATES  # noqa: E402
from tests.tracer.test_torch_bridge import _marked_lines  # noqa: E402


def _culprits(program, culprits="lines"):
    with tracer.record("torch", culprits=culprits) as rec:
        program()
    return [(c.old, c.node_name, c.lineno) for c in of_trace(rec.trace) if c.filename == __file__], rec


def _check_marks(program, found):
    by_line: dict[int, list] = {}
    for _, name, line in found:
        by_line.setdefault(line, []).append(name)
    for line, names in _marked_lines(program).items():
        assert sorted(by_line.get(line, [])) == sorted(names.split(", ")), (line, by_line)


def leaf():
    return torch.tensor([1.0, 2.0], requires_grad=True)


def helper(t):
    u = t.exp()  # <- ExpBackward0
    return u * 2  # <- MulBackward0


def nested_calls():
    x = leaf()
    y = helper(x.sin())  # <- SinBackward0
    return y.sum()  # <- SumBackward0


def appended_to_a_list():
    x = leaf()
    out = []
    for _ in range(2):
        out.append(x.cos())  # <- CosBackward0, CosBackward0
    return out


def comprehension_then_consumer():
    ps = [leaf() for _ in range(2)]
    parts = [p.exp() * 2 for p in ps]  # <- ExpBackward0, MulBackward0, ExpBackward0, MulBackward0
    return torch.cat(parts).sum()  # <- CatBackward0, SumBackward0


def views_and_in_place():
    x = leaf()
    g = x.clone()  # <- CloneBackward0
    v = g[0:1]  # <- SliceBackward0
    v.mul_(3)  # <- MulBackward0, torch::autograd::CopySlices, AsStridedBackward0
    w = g.view(2)  # <- ViewBackward0
    g += 1  # <- AddBackward0
    return w


def in_a_module():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    out = model(torch.ones(1, 2))  # <- TBackward0, AddmmBackward0, TanhBackward0
    return out.sum()  # <- SumBackward0


PROGRAMS = (nested_calls, appended_to_a_list, comprehension_then_consumer, views_and_in_place, in_a_module)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_every_increment_is_on_its_line_and_named(program):
    found, _ = _culprits(program)
    _check_marks(program, found)
    assert "?" not in {name for _, name, _ in found}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_the_lines_agree_with_the_mode(program):
    """The two ways of seeing the forward blame the same lines for the same nodes."""
    lines, _ = _culprits(program, "lines")
    mode, _ = _culprits(program, "mode")
    assert [(n, ln) for _, n, ln in lines] == [(n, ln) for _, n, ln in mode]


def test_nodes_a_walk_describes_keep_their_line_and_get_torch_s_edges():
    """An increment writes its node with no edges (none are known then); the backward's walk adds them. Of a
    comprehension's results the line looks at only the last MAX_CANDIDATES, so the first stay `?` until the walk
    names them. Every node keeps the line that made it and gets torch's edges: each MulBackward0's are an
    ExpBackward0 and the constant 2; the ExpBackward0's is the AccumulateGrad of its leaf."""
    ps = [leaf() for _ in range(MAX_CANDIDATES + 4)]

    def program():
        torch.cat([p.exp() * 2 for p in ps]).sum().backward()

    found, rec = _culprits(program)
    line = program.__code__.co_firstlineno + 1
    assert [(n, ln) for _, n, ln in found].count(("MulBackward0", line)) == len(ps)
    assert "?" not in {name for _, name, _ in found}
    trace = rec.trace
    nodes = {i: trace.node(i) for i in range(trace.num_nodes)}
    muls = [n for n in nodes.values() if n.name == "MulBackward0"]
    assert len(muls) == len(ps)
    leaves = set()
    for mul in muls:
        assert (mul.filename, mul.lineno, mul.thread, mul.num_inputs) == (__file__, line, 0, 1)
        (child, _), (none, _) = mul.next_edges
        assert none is None
        exp = nodes[child]
        assert (exp.name, exp.lineno) == ("ExpBackward0", line)
        ((acc, _),) = exp.next_edges
        assert nodes[acc].name == "torch::autograd::AccumulateGrad"
        leaves.add(acc)
    assert len(leaves) == len(ps)
    (cat,) = [n for n in nodes.values() if n.name == "CatBackward0"]
    assert sorted(child for child, _ in cat.next_edges) == sorted(m.index for m in muls)


def test_looking_never_makes_a_node():
    """A stale view stored by a line that bumps the counter: asking it for its grad_fn would make an
    AsStridedBackward0 and shift every later seq_nr. The counter after the recorded run is the unrecorded one's."""
    def program():
        x = leaf()
        g = x.clone()
        v, u = g[0:1], g[1:2]
        v.mul_(2)  # u is stale from here on
        w = u; y = x * 2  # noqa: E702 - one line that stores a stale view and bumps the counter
        keep = (w, y)  # noqa: F841
        return torch.autograd._get_sequence_nr()

    before = torch.autograd._get_sequence_nr()
    plain = program() - before
    with tracer.record("torch", culprits="lines") as rec:
        start = torch.autograd._get_sequence_nr()
        recorded = program() - start
    assert rec.source.culprits == "lines"
    assert recorded == plain


def test_a_trace_function_already_set_keeps_its_place():
    """Under a debugger or coverage (a trace function set), the bridge sees the forward through its mode even when
    asked for lines."""
    calls = []

    def trace_function(frame, event, arg):
        calls.append(event)
        return None

    sys.settrace(trace_function)
    try:
        with tracer.record("torch", culprits="lines") as rec:
            (leaf() * 2).sum()
        assert sys.gettrace() is trace_function
    finally:
        sys.settrace(None)
    assert rec.source.culprits == "mode"
    assert [c.node_name for c in of_trace(rec.trace)] == ["MulBackward0", "SumBackward0"]


def test_python_s_own_code_is_never_the_culprit():
    """An op run inside the standard library (functools.reduce over torch.add, copy.deepcopy...) is blamed on the
    user's line that called it."""
    import functools
    import operator

    def program():
        xs = [leaf() for _ in range(3)]
        total = functools.reduce(operator.add, xs)  # <- AddBackward0, AddBackward0
        return total

    found, _ = _culprits(program)
    _check_marks(program, found)


def test_the_mode_of_a_view_line_is_off_in_the_functions_it_calls():
    """A line that indexes runs with the mode pushed; a function it calls runs by lines, and the mode is back on
    (and off at the end) around it."""
    depths = []

    def inner(t):
        depths.append(torch._C._len_torch_function_stack())
        return t.exp()  # <- ExpBackward0

    def program():
        x = leaf()
        y = inner(x)[0:1]  # <- SliceBackward0
        return y

    found, _ = _culprits(program)
    assert depths == [0]
    assert torch._C._len_torch_function_stack() == 0
    _check_marks(program, found)
    _check_marks(inner, found)
