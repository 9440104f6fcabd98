"""AccumulateGrads told apart by their leaf's name (NOTE [leaf names] in tracer/recording/leaf_names.py): what the Recorder
stores, how readers make the names unique, and that the look-up keeps nothing alive. The names expected are
written by hand from each program's source."""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

from agdb import engine as torch
from agdb.engine import nn
from agdb.tracer.recording import leaf_names as leaf_names_mod
from agdb.tracer.store import tracefile
from agdb.tracer.store.schema import short_name
from agdb.tracer.store.trace import Trace
from tests.graph_programs import recorded_on_fresh_thread


def _recorded(program) -> Trace:
    """`program` recorded on a fresh thread (its seq_nrs start at 0)."""
    return recorded_on_fresh_thread(program, name="leaves")


def _leaf_labels(trace: Trace) -> list[str]:
    """Every AccumulateGrad's label, in the order they were made."""
    labels = trace.index.leaf_labels
    return [labels[n] for n in sorted(labels, key=lambda n: int(trace.created_steps()[n]))]


class MLP(nn.Module):
    """Two Linear layers: parameters fc1.weight, fc1.bias, fc2.weight, fc2.bias."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def test_an_mlp_names_its_parameters_by_the_path_the_user_writes():
    """The leaves of an MLP bound to `model` are `model.fc1.weight` and so on, in the order the forward pass used
    them: fc1 first, the weight of each Linear before its bias (linear takes `weight.t()` before it calls addmm with
    the bias)."""
    def program() -> None:
        model = MLP()
        model(torch.ones(2, 3)).sum().backward()

    assert _leaf_labels(_recorded(program)) == ["model.fc1.weight", "model.fc1.bias", "model.fc2.weight",
                                                "model.fc2.bias"]


def test_a_layer_called_directly_still_gets_the_models_path():
    """`model.fc1(x)` called from the user's code: the model bound in that frame gives the longer path
    (`model.fc1.weight`), and a layer also bound to a variable of its own (`layer`) does not win."""
    def program() -> None:
        model = MLP()
        layer = model.fc1
        layer(torch.ones(2, 3)).sum().backward()

    assert sorted(_leaf_labels(_recorded(program))) == ["model.fc1.bias", "model.fc1.weight"]


def test_containers_and_attributes_are_written_as_python_reaches_them():
    """A Sequential's child is `[i]`, a module in a list `heads[0]`, in a dict `towers['a']`, in an object's
    attribute `trainer.net`; a module made and called in one expression has no holder, and its parameters no name."""
    class Trainer:
        def __init__(self) -> None:
            self.net = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))

    def program() -> None:
        trainer = Trainer()
        heads = [nn.Linear(2, 1)]
        towers = {"a": nn.Linear(2, 1)}
        x = torch.ones(1, 2)
        (trainer.net(x).sum() + heads[0](x).sum() + towers["a"](x).sum() + nn.Linear(2, 1)(x).sum()).backward()

    assert _leaf_labels(_recorded(program)) == [
        "trainer.net[0].weight", "trainer.net[0].bias", "trainer.net[2].weight", "trainer.net[2].bias",
        "heads[0].weight", "heads[0].bias", "towers['a'].weight", "towers['a'].bias", "leaf 9", "leaf 10"]


def test_a_model_held_further_out_names_by_its_own_path():
    """A model that the frames near its forward and its backward call hold only deep inside containers, and a frame
    further out holds by a variable, names its parameters by their path in it (rule 2 of NOTE [leaf names])."""
    def deeper(box, x, depth):  # the model two containers down: no holder rule 1 reads, at the forward or the call
        if depth:
            deeper(box, x, depth - 1)
        else:
            box[0][0](x).sum().backward()

    def program() -> None:
        model = MLP()
        deeper(((model,),), torch.ones(2, 3), 3)

    assert _leaf_labels(_recorded(program)) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def test_plain_variables_are_named_as_bound():
    """`w` and `b` bound in the user's frame name their leaves."""
    def program() -> None:
        x = torch.ones(3)
        w = torch.ones(3, requires_grad=True)
        b = torch.zeros(3, requires_grad=True)
        (x * w + b).sum().backward()

    assert _leaf_labels(_recorded(program)) == ["w", "b"]


def layer1(x):
    w = torch.ones(3, requires_grad=True)
    return x * w


def layer2(x):
    w = torch.full((3,), 2.0, requires_grad=True)
    return x * w


def test_one_name_in_two_functions_is_told_apart_by_the_function():
    """Two leaves both named `w`, made in layer1 and layer2, read `w (layer1)` and `w (layer2)`."""
    def program() -> None:
        x = torch.ones(3)
        (layer1(x) + layer2(x)).sum().backward()

    assert _leaf_labels(_recorded(program)) == ["w (layer1)", "w (layer2)"]


def test_an_unnamed_leaf_keeps_its_number():
    """A leaf that is an expression's result has no name: `leaf N`, N its place among the leaves."""
    def program() -> None:
        w = torch.ones(3, requires_grad=True)
        (w * torch.ones(3, requires_grad=True)).sum().backward()

    trace = _recorded(program)
    assert _leaf_labels(trace) == ["w", "leaf 2"]
    assert "node_leaf_name" in trace.columns


def test_each_steps_accumulategrad_of_one_parameter_is_counted():
    """A training loop makes a new AccumulateGrad for every parameter at every step: `model.fc1.weight #1`, `#2`."""
    def program() -> None:
        model = MLP()
        for _ in range(2):
            model(torch.ones(2, 3)).sum().backward()
            gc.collect()  # the engine frees part of a spent graph only then: a new AccumulateGrad for every one

    labels = _leaf_labels(_recorded(program))
    assert labels == [f"model.{name} #{k}" for k in (1, 2)
                      for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]


def test_names_survive_a_save_and_an_older_file_loads_without_them(tmp_path):
    """Leaf names are saved (format 5) and loaded; a file without the column (format 4) shows `leaf N`."""
    def program() -> None:
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()

    trace = _recorded(program)
    tracefile.save(trace, tmp_path / "t.agdb")
    assert _leaf_labels(tracefile.load(tmp_path / "t.agdb")) == ["w"]
    columns = {k: v for k, v in trace.columns.items() if k != "node_leaf_name"}
    old = Trace(columns, list(trace.strings), trace.meta)
    saved = tracefile.FORMAT_VERSION
    tracefile.FORMAT_VERSION = 4
    try:
        tracefile.save(old, tmp_path / "v4.agdb")
    finally:
        tracefile.FORMAT_VERSION = saved
    assert _leaf_labels(tracefile.load(tmp_path / "v4.agdb")) == ["leaf 1"]


def test_the_torch_bridges_parameter_names_are_read_too():
    """A trace whose names are in meta["parameter_names"] (the torch bridge's) shows them; entries that are not a
    node row and a string are ignored."""
    def program() -> None:
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()

    trace = _recorded(program)
    columns = {k: v for k, v in trace.columns.items() if k != "node_leaf_name"}
    acc = int(np.flatnonzero(trace.nodes_named(lambda s: short_name(s) == "AccumulateGrad"))[0])
    meta = {**trace.meta, "parameter_names": {str(acc): "MLP.fc1.weight", "x": "bad", "99999": "far", "0": 3}}
    assert _leaf_labels(Trace(columns, list(trace.strings), meta)) == ["MLP.fc1.weight"]


def test_the_look_up_keeps_no_tensor_alive():
    """A leaf dropped by the program while its function still runs is freed at once, as without a recorder: the
    look-up holds no reference, and the locals snapshot it made of the running frame is emptied."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("under a tracer the look-up leaves the frame's locals snapshot to it (NOTE [leaf names])")
    refs: list = []

    def program() -> None:
        w = torch.ones(3, requires_grad=True)
        loss = (w * 2).sum()
        refs.append(weakref.ref(w))
        del w, loss  # the graph and the leaf: nothing else holds them
        refs.append(refs[0]() is None)

    gc.disable()  # refcounts alone must free them
    try:
        _recorded(program)
    finally:
        gc.enable()
    assert refs[1] is True


def test_one_look_up_per_accumulategrad(monkeypatch):
    """The look-up runs once per AccumulateGrad made, not per op: 3 ops on 2 leaves, 2 look-ups."""
    calls: list = []
    original = leaf_names_mod.LeafNamer.name_of

    def counted(self, *args):  # no local bound to the leaf: this frame is the user's too (tests/)
        calls.append(len(args))
        return original(self, *args)

    monkeypatch.setattr(leaf_names_mod.LeafNamer, "name_of", counted)

    def program() -> None:
        w = torch.ones(3, requires_grad=True)
        b = torch.ones(3, requires_grad=True)
        ((w * 2 + b) * w).sum().backward()

    assert _leaf_labels(_recorded(program)) == ["w", "b"]
    assert len(calls) == 2
