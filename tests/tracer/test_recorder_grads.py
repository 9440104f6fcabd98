"""The Recorder keeps what each backward node returned, in order, with None for an input that needs no grad
(node_finished's inline groups of a binary op with one such input)."""
from __future__ import annotations

from agdb import engine as t
from agdb.tracer.sources.engine import Recorder


def _outputs_of(trace, name: str) -> list:
    """(shape, preview) or None per output of each NodeFinished of nodes called `name`, in step order."""
    return [tuple(None if s is None else (s.shape, s.preview) for s in e.outputs)
            for e in trace if type(e).__name__ == "NodeFinished" and e.node_name == name]


def test_a_binary_ops_grads_keep_their_slots():
    """x * 2.0 returns (grad * 2, None); c * x returns (None, grad * c); by hand, for x = ones(3) and sum()."""
    x = t.ones(3, requires_grad=True)
    recorder = Recorder().attach()
    (x * 2.0).sum().backward()
    (t.tensor([1.0, 2.0, 3.0]) * x).sum().backward()
    trace = recorder.finish()
    assert _outputs_of(trace, "MulBackward0") == [(((3,), (2.0, 2.0, 2.0)), None),
                                                  (None, ((3,), (1.0, 2.0, 3.0)))]


def test_a_large_grad_beside_a_none_is_summarised_too():
    """A grad of more elements than are kept as copies (here 40) beside None: its shape and first three values
    (the sum passes on ones, the product by 3 makes them threes, the add passes those on)."""
    x = t.ones(40, requires_grad=True)
    recorder = Recorder().attach()
    (x + 0.5).mul(3.0).sum().backward()
    trace = recorder.finish()
    assert _outputs_of(trace, "AddBackward0") == [(((40,), (3.0, 3.0, 3.0)), None)]
    assert _outputs_of(trace, "MulBackward0") == [(((40,), (3.0, 3.0, 3.0)), None)]
