"""One leaf name on both sources (NOTE [leaf names] in tracer/recording/leaf_names.py): the same program, run on
agdb's engine and on real torch, names every AccumulateGrad the same way, the path the user writes to reach the
leaf. The names expected are written by hand from each program's source."""
from __future__ import annotations

import re
import textwrap

import pytest

from agdb import engine, tracer
from tests.engine.helpers import run_in_thread

torch = pytest.importorskip("torch")

MLP = """
        class MLP(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(3, 4)
                self.fc2 = torch.nn.Linear(4, 1)

            def forward(self, x):
                return self.fc2(self.fc1(x).relu())
"""
"""A two-layer model's class, indented as the programs below are (textwrap.dedent takes the indent off)."""

PROGRAMS = {
    "a model in a variable": (MLP + """
        model = MLP()
        model(torch.ones(2, 3)).sum().backward()
        """, ["model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias"]),
    "a Sequential": ("""
        net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
        net(torch.ones(4, 2)).pow(2).mean().backward()
        """, ["net[0].weight", "net[0].bias", "net[2].weight", "net[2].bias"]),
    "containers and attributes": ("""
        class Trainer:
            def __init__(self):
                self.model = torch.nn.Sequential(torch.nn.Linear(2, 2))

        trainer = Trainer()
        heads = [torch.nn.Linear(2, 1)]
        towers = {"a": torch.nn.Linear(2, 1)}
        x = torch.ones(1, 2)
        (trainer.model(x).sum() + heads[0](x).sum() + towers["a"](x).sum()).backward()
        """, ["trainer.model[0].weight", "trainer.model[0].bias", "heads[0].weight", "heads[0].bias",
              "towers['a'].weight", "towers['a'].bias"]),
    "plain variables and an expression": ("""
        w = torch.ones(3, requires_grad=True)
        b = torch.zeros(3, requires_grad=True)
        (torch.ones(3) * w + b + torch.ones(3, requires_grad=True)).sum().backward()
        """, ["w", "b", "leaf N"]),
}


def _leaf_names(source: str, lib, scope: dict | None = None) -> list[str]:
    """The leaf label of every AccumulateGrad `source` made or met, recorded from `lib` (in the order first met);
    the program runs in `scope` when given (its globals are then the caller's to read)."""
    code = compile(textwrap.dedent(source), "program.py", "exec")
    scope = {"torch": lib, "__name__": "program"} if scope is None else scope

    def go():
        with tracer.record("engine" if lib is engine else "torch") as rec:
            exec(code, scope)
        return rec.trace

    trace = run_in_thread(go)
    # an unnamed leaf is `leaf N`, N its place in the order the source met the leaves: the engine when their ops
    # ran, the bridge when the backward call's walk met them
    return [re.sub(r"^leaf \d+$", "leaf N", name) for name in trace.index.leaf_labels.values()]


@pytest.mark.parametrize("name", PROGRAMS)
def test_engine_and_torch_name_every_leaf_alike(name):
    """Both sources give each leaf the name the user writes; sets compared, as the engine meets a leaf when its op
    runs and the bridge when a backward call walks it, which may order them differently."""
    source, expected = PROGRAMS[name]
    assert sorted(_leaf_names(source, engine)) == sorted(expected)
    assert sorted(_leaf_names(source, torch)) == sorted(expected)


def test_a_forward_in_a_helper_is_named_where_the_backward_is_called():
    """A loss computed in a function that binds the model under another name (`model` there, `m` at the call):
    both sources name the parameters from the backward call's frames, `m.weight`."""
    source = """
        def compute(model, x):
            return model(x).sum()

        m = torch.nn.Linear(2, 1)
        loss = compute(m, torch.ones(3, 2))
        loss.backward()
        """
    assert sorted(_leaf_names(source, engine)) == sorted(_leaf_names(source, torch)) == ["m.bias", "m.weight"]


def test_a_leaf_bound_only_in_a_returned_function_keeps_its_engine_name():
    """A leaf whose only name was in a function that returned before the backward call: the bridge, which meets it
    at the call, has no name for it (`leaf N`); the engine keeps the one it had where the leaf was made."""
    source = """
        def layer(x):
            w = torch.ones(2, requires_grad=True)
            return x * w

        layer(torch.ones(2)).sum().backward()
        """
    assert _leaf_names(source, engine) == ["w"]
    assert _leaf_names(source, torch) == ["leaf N"]


def test_a_compiled_module_s_parameters_are_named_as_the_user_reaches_them():
    """torch.compile wraps a module in an OptimizedModule, whose `named_parameters()` say `_orig_mod.fc1.weight`; the
    wrapper hands attributes on to the module it wraps, so the user writes `model.fc1.weight`, and the bridge names
    it so. Indexing is not handed on (`seq[0]` of a compiled Sequential raises), so there `seq._orig_mod[0].weight`.
    Each name, evaluated in the program's namespace, is one of its parameters, and together they are all of them."""
    source = MLP + """
        model = torch.compile(MLP(), backend="eager")
        seq = torch.compile(torch.nn.Sequential(torch.nn.Linear(3, 2)), backend="eager")
        x = torch.ones(2, 3)
        (model(x).sum() + seq(x).sum()).backward()
        """
    scope = {"torch": torch, "__name__": "program"}
    try:
        names = _leaf_names(source, torch, scope)
    finally:
        torch._dynamo.reset()  # what Dynamo compiled stays out of the next test's compile ids
    assert sorted(names) == sorted(["model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias",
                                    "seq._orig_mod[0].weight", "seq._orig_mod[0].bias"])
    reached = [eval(name, scope) for name in names]  # noqa: S307 - the program's own expressions, in its namespace
    params = list(scope["model"].parameters()) + list(scope["seq"].parameters())
    assert sorted(map(id, reached)) == sorted(map(id, params))
