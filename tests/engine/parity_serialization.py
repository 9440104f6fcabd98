"""torch.save and torch.load (the round trip of a module's state_dict, as the CIFAR-10 tutorial saves its model), as
programs run on the engine and on torch by test_serialization_parity.py. Each is `fn(t, p)`; see parity.py.

Only a round trip within one library is compared: the two libraries' files differ (torch writes a zip archive)."""
from __future__ import annotations

import io
import os
import pickle
import tempfile

from tests.engine.parity import registry

PROGRAMS, program = registry()


def _kinds(obj) -> object:
    """What a loaded object holds, by type: nested containers, and each tensor's class, dtype and grad state."""
    if isinstance(obj, dict):
        return (type(obj).__name__, tuple((k, _kinds(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_kinds(v) for v in obj))
    if hasattr(obj, "requires_grad"):
        return (type(obj).__name__, str(obj.dtype), tuple(obj.shape), obj.requires_grad, obj.grad_fn is None,
                obj.grad is None, obj.is_leaf)
    return obj


@program("save and load: a state_dict through a path and a buffer; Parameters, non-leaves, containers")
def _round_trip(t, p):
    net = t.nn.Sequential(t.nn.Linear(2, 3), t.nn.ReLU(), t.nn.Linear(3, 1))
    with t.no_grad():
        for i, param in enumerate(net.parameters()):
            param.copy_(t.arange(param.numel(), dtype=t.float32).reshape(param.shape) * 0.1 - i)
    x = p.leaf("x", [[1.0, -2.0], [0.5, 0.25]], dtype="float32")
    net(x).sum().backward()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "net.pth")
        p.counter("before save")
        t.save(net.state_dict(), path)
        loaded = t.load(path)
        p.counter("after load")
    p.value("state_dict kinds", _kinds(loaded))
    p.value("state_dict values", list(loaded.values()))
    fresh = t.nn.Sequential(t.nn.Linear(2, 3), t.nn.ReLU(), t.nn.Linear(3, 1))
    p.value("load_state_dict", str(fresh.load_state_dict(loaded)))
    p.value("same outputs", (fresh(x) == net(x)).all())
    y = x * 2
    buffer = io.BytesIO()
    t.save({"param": net[0].weight, "nonleaf": y, "ints": t.arange(3), "list": [x, 1.5, "s"], "t": (x,)}, buffer)
    buffer.seek(0)
    back = t.load(buffer)
    p.value("objects kinds", _kinds(back))
    p.value("objects values", (back["param"], back["nonleaf"], back["ints"], back["list"][0]))
    back["param"].sum().backward()
    p.value("a loaded Parameter is a new leaf", (back["param"].grad, net[0].weight.grad is not back["param"].grad))
    p.counter("end")


class Custom:
    pass


@program("load refuses other objects unless weights_only=False")
def _weights_only(t, p):
    buffer = io.BytesIO()
    t.save({"custom": Custom(), "x": t.ones(2)}, buffer)
    buffer.seek(0)
    try:
        t.load(buffer)
    except pickle.UnpicklingError as e:
        p.value("weights_only refusal", str(e).split(".")[0])
    buffer.seek(0)
    back = t.load(buffer, weights_only=False)
    p.value("weights_only=False", (type(back["custom"]).__name__, back["x"]))
    p.counter("end")
