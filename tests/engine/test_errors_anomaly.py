"""Error propagation, stale tasks and anomaly mode, written by hand from engine-semantics §12.2, §11 and the
outputs recorded from real torch 2.13 in experiments/e5_err.out and e11_err2.out.
"""
from __future__ import annotations

import warnings

import pytest

from agdb import engine as torch
from tests.engine.helpers import hook_every_node

ANOMALY_ENABLED = ("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                   "enabled for debugging.")
ERROR_DETECTED_BAD = "Error detected in BadBackward. Traceback of forward call that caused the error:"
ERROR_DETECTED_DIV = "Error detected in DivBackward0. Traceback of forward call that caused the error:"
PREVIOUS_OUTER = ("\n\nPrevious calculation was induced by OuterBackward. Traceback of forward call that induced "
                  "the previous calculation:")


def _instrument(roots):
    """Like sim.instrument: a logging prehook on every reachable node; returns the log (name#relative seq)."""
    log = []

    def record(n):
        log.append(n.name() if hasattr(n, "variable") else f"{n.name()}#{n._sequence_nr()}")

    hook_every_node(roots, record)
    return log


class Bad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("bad backward")


class Outer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a.clone()

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return Bad.apply(g * a)  # a node created during backward: its parent is OuterBackward


def _user_warnings(records):
    return [str(r.message) for r in records if issubclass(r.category, UserWarning)]


# -- first error wins (engine-semantics §11.1, §11.2) -----------------------------------------------------------
def _e5_graph():
    x = torch.ones(2, requires_grad=True)
    base = torch.autograd._get_sequence_nr()
    a = x.exp()
    b = x.sin()
    c = x.cos()
    y = (a + b + c).sum()
    return x, a, b, c, y, base


def test_error_stops_execution_in_e5_order():
    """engine-semantics §11.2 / e5_err: Sum, Add, Add, Cos, Sin (error) ran; Exp and AccumulateGrad never ran."""
    x, a, b, c, y, base = _e5_graph()
    log = _instrument([y.grad_fn])

    def boom(go):
        raise ValueError("boom in SinBackward0 prehook")

    b.grad_fn.register_prehook(boom)
    with pytest.raises(ValueError):
        y.backward()
    s = base
    assert log == [f"SumBackward0#{s + 5}", f"AddBackward0#{s + 4}", f"AddBackward0#{s + 3}",
                   f"CosBackward0#{s + 2}", f"SinBackward0#{s + 1}"]


def test_original_exception_type_and_message_reach_caller():
    """engine-semantics §11.1 / e5_err: a ValueError raised in a prehook reaches the caller as ValueError with its message."""
    x, a, b, c, y, _ = _e5_graph()

    def boom(go):
        raise ValueError("boom in SinBackward0 prehook")

    b.grad_fn.register_prehook(boom)
    with pytest.raises(ValueError) as ei:
        y.backward()
    assert type(ei.value) is ValueError
    assert str(ei.value) == "boom in SinBackward0 prehook"


def test_leaf_grad_stays_none_after_error():
    """engine-semantics §11.2 / e5_err: after the error x.grad is still None."""
    x, a, b, c, y, _ = _e5_graph()

    def boom(go):
        raise ValueError("boom")

    b.grad_fn.register_prehook(boom)
    with pytest.raises(ValueError):
        y.backward()
    assert x.grad is None


def test_first_error_wins():
    """engine-semantics §11.1: with two failing nodes, the first to run (Cos, larger seq) decides the exception; Sin never runs."""
    x, a, b, c, y, _ = _e5_graph()
    ran = []

    def boom_cos(go):
        ran.append("cos")
        raise KeyError("cos failed")

    def boom_sin(go):
        ran.append("sin")
        raise ValueError("sin failed")

    c.grad_fn.register_prehook(boom_cos)
    b.grad_fn.register_prehook(boom_sin)
    with pytest.raises(KeyError):
        y.backward()
    assert ran == ["cos"]
    assert x.grad is None


def test_error_from_node_apply_propagates():
    """engine-semantics §11.1: an exception raised inside a custom backward reaches the caller unchanged."""
    x = torch.ones(2, requires_grad=True)
    y = Bad.apply(x).sum()
    with pytest.raises(RuntimeError) as ei:
        y.backward()
    assert str(ei.value) == "bad backward"
    assert x.grad is None


def test_stale_tasks_never_run_and_next_backward_works():
    """engine-semantics §12.2 / e11_err2: the ExpBackward0 left over from an errored backward never runs; the next backward works."""
    log = []
    x = torch.ones(2, requires_grad=True)
    a = x.exp()
    b = x.sin()
    y = (a + b).sum()
    a.grad_fn.register_prehook(lambda go: log.append("stale ExpBackward0 ran"))

    def boom(go):
        raise ValueError("boom")

    b.grad_fn.register_prehook(boom)
    with pytest.raises(ValueError):
        y.backward()
    assert log == []
    x2 = torch.ones(2, requires_grad=True)
    (x2 * 2).sum().backward()
    assert log == []
    assert x2.grad.tolist() == [2.0, 2.0]


# -- anomaly mode (engine-semantics §11.3, §11.4) ------------------------------------------------------------------
def test_detect_anomaly_warns_on_entry():
    """engine-semantics §11.3 / e5_err: detect_anomaly() warns the exact 'Anomaly Detection has been enabled...' UserWarning."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly():
            pass
    msgs = [(r.category, str(r.message)) for r in w]
    assert (UserWarning, ANOMALY_ENABLED) in msgs


def test_anomaly_mode_only_inside_block():
    """engine-semantics §11.3: nodes get metadata['traceback_'] only while inside detect_anomaly(); after the block they get {} again."""
    x = torch.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            inside = x.exp()
    after = x.exp()
    assert "traceback_" in inside.grad_fn.metadata
    assert after.grad_fn.metadata == {}


def test_nodes_store_traceback_under_anomaly():
    """engine-semantics §11.3 / e5_err: every node created under anomaly mode has metadata['traceback_'] (a list of str) and no other key."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            x = torch.ones(2, requires_grad=True)
            h = x * x
            y = Bad.apply(h)
            s = y.sum()
    acc = h.grad_fn.next_functions[0][0]
    for node in (h.grad_fn, y.grad_fn, s.grad_fn, acc):
        assert list(node.metadata.keys()) == ["traceback_"]
        tb = node.metadata["traceback_"]
        assert isinstance(tb, list) and tb
        assert all(isinstance(line, str) for line in tb)


def test_traceback_mentions_forward_line():
    """engine-semantics §11.3: the stored stack contains the user's forward line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            x = torch.ones(2, requires_grad=True)
            y = x.exp()  # FORWARD-MARKER
    assert "FORWARD-MARKER" in "".join(y.grad_fn.metadata["traceback_"])


def test_nodes_outside_anomaly_have_empty_metadata():
    """engine-semantics §14.3: without anomaly mode a node's metadata is {}."""
    x = torch.ones(2, requires_grad=True)
    y = x.exp()
    assert y.grad_fn.metadata == {}


def test_anomaly_error_warns_with_forward_stack():
    """engine-semantics §11.3 / e5_err: an error in BadBackward warns 'Error detected in BadBackward. ...' with the forward line; the exception stays."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly():
            x = torch.ones(2, requires_grad=True)
            y = Bad.apply(x).sum()
            with pytest.raises(RuntimeError) as ei:
                y.backward()
    assert str(ei.value) == "bad backward"
    msgs = _user_warnings(w)
    assert msgs[0] == ANOMALY_ENABLED
    detected = [m for m in msgs if m.startswith("Error detected")]
    assert len(detected) == 1
    assert detected[0].startswith(ERROR_DETECTED_BAD)
    assert "y = Bad.apply(x).sum()" in detected[0]


def test_anomaly_nan_check_raises():
    """engine-semantics §11.4 / e5_err: (x/x).sum() with x = zeros raises "Function 'DivBackward0' returned nan values in its 1th output."."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly():
            x = torch.zeros(2, requires_grad=True)
            y = (x / x).sum()
            with pytest.raises(RuntimeError) as ei:
                y.backward()
    assert str(ei.value) == "Function 'DivBackward0' returned nan values in its 1th output."
    assert x.grad is None
    detected = [m for m in _user_warnings(w) if m.startswith("Error detected")]
    assert len(detected) == 1 and detected[0].startswith(ERROR_DETECTED_DIV)


def test_anomaly_check_nan_false_disables_nan_check():
    """engine-semantics §11.4 / e5_err: detect_anomaly(check_nan=False) lets (x/x).sum() backward finish with grad [nan, nan]."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly(check_nan=False):
            x = torch.zeros(2, requires_grad=True)
            (x / x).sum().backward()
    assert len(x.grad.tolist()) == 2
    assert all(v != v for v in x.grad.tolist())  # NaN


def test_no_nan_check_without_anomaly_mode():
    """engine-semantics §11.4: outside anomaly mode a NaN grad is no error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.zeros(2, requires_grad=True)
        (x / x).sum().backward()
    assert all(v != v for v in x.grad.tolist())


def test_anomaly_previous_calculation_warning():
    """engine-semantics §11.3 / e11_err2: a node made during a create_graph backward warns 'Previous calculation was induced by OuterBackward...'."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly():
            x = torch.ones(2, requires_grad=True)
            y = Outer.apply(x).sum()
            g, = torch.autograd.grad(y, x, create_graph=True)
            with pytest.raises(RuntimeError) as ei:
                g.sum().backward()
    assert str(ei.value) == "bad backward"
    msgs = _user_warnings(w)
    assert msgs[0] == ANOMALY_ENABLED
    i_err = next(i for i, m in enumerate(msgs) if m.startswith("Error detected"))
    assert msgs[i_err].startswith(ERROR_DETECTED_BAD)
    assert "torch.autograd.grad(y, x, create_graph=True)" in msgs[i_err]
    prev = msgs[i_err + 1]
    assert prev.startswith(PREVIOUS_OUTER)
    assert "y = Outer.apply(x).sum()" in prev


def test_anomaly_hook_error_warns_for_failing_node():
    """engine-semantics §11.1 / §11.3: under anomaly mode a ValueError from SinBackward0's prehook still reaches the caller, after an 'Error detected in SinBackward0' warning."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.autograd.detect_anomaly():
            x = torch.ones(2, requires_grad=True)
            b = x.sin()
            y = b.sum()

            def boom(go):
                raise ValueError("boom")

            b.grad_fn.register_prehook(boom)
            with pytest.raises(ValueError):
                y.backward()
    detected = [m for m in _user_warnings(w) if m.startswith("Error detected")]
    assert len(detected) == 1
    assert detected[0].startswith("Error detected in SinBackward0. Traceback of forward call that caused the error:")
    assert "b = x.sin()" in detected[0]
