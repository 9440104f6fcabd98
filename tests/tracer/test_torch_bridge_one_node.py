"""The line tracer's one-node path (NOTE [one number, one name] in tracer/sources/torch/lines.py): a line that makes one
node outside every module call is written without the general path, with the same name, line and module path as
agdb's engine and torch's own forward hooks give the same program."""
from __future__ import annotations

import pytest

from agdb import engine
from agdb.tracer.recording.culprits import of_trace
from agdb.tracer.sources.torch.lines import LineCulprits
from tests.tracer.test_torch_bridge_exact import _module_truth, _run

torch = pytest.importorskip("torch")

PROGRAM = """
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, x):
            y = self.fc(x)
            y = y.tanh()
            return y

    model = Inner()
    x = torch.ones(1, 2, requires_grad=True)
    out = model(x)
    h = out
    for _ in range(5):
        h = h.tanh()
    h = model(h)
    h = h.exp()
    loss = h.sum()
    loss.backward()
    for _ in range(3):
        h = h.sin()
    """


def test_one_node_lines_after_module_calls_skip_the_general_path_and_say_the_same(monkeypatch, tmp_path):
    """Ops on lines of their own after module calls ran (the loops' tanh, and sin after a backward call whose log
    waits) go by the one-node path once their line is known (its first run goes by the general path, which reads
    its bytecode); every culprit row (node, line, source, module) is the engine's, and each op's module call is the
    one torch's own forward hooks saw."""
    handled: list[tuple[int, int]] = []  # the numbers the general path was given, as (first, after)
    general = LineCulprits._moved

    def counting(self, *args):
        start = self.state.last
        general(self, *args)
        handled.append((start, self.state.last))

    monkeypatch.setattr(LineCulprits, "_moved", counting)
    trace, _ = _run(PROGRAM, torch, tmp_path)
    monkeypatch.undo()
    rows = of_trace(trace)
    first = rows[0].old
    truth = _module_truth(PROGRAM)
    got = {c.old - first: c.module for c in rows}
    assert {s: got.get(s) for s in truth} == truth  # torch's own hooks
    assert {m for s, m in got.items() if s not in truth} == {""}
    engine_trace, _ = _run(PROGRAM, engine, tmp_path)
    mine = [(c.node_name, c.lineno, c.source, c.module) for c in rows]
    assert mine == [(c.node_name, c.lineno, c.source, c.module) for c in of_trace(engine_trace)]
    general_numbers = {s - first for a, b in handled for s in range(a, b)}
    for source, runs in (("h = h.tanh()", 5), ("h = h.sin()", 3)):
        numbers = [c.old - first for c in rows if c.source == source]
        assert len(numbers) == runs and {c.module for c in rows if c.source == source} == {""}
        assert not general_numbers & set(numbers[1:])
