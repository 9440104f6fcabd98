"""The engine's vectorised erf (engine/_ops/_erf.py) against math.erf: a dense grid, the interval edges, the tails
and the special values."""
from __future__ import annotations

import math

import numpy as np

from agdb.engine._ops._erf import erf


def test_erf_is_math_erf_to_two_ulps_of_one() -> None:
    edges = np.arange(-49, 50) * 0.125
    grid = np.concatenate([np.linspace(-8, 8, 160_001), edges, np.nextafter(edges, 0), np.nextafter(edges, 9),
                           [1e-300, -1e-300, 5e-9, 5.9999999, 6.0, 26.0, -26.0]])
    want = np.array([math.erf(v) for v in grid])
    assert np.max(np.abs(erf(grid) - want)) < 2e-15
    tiny = np.array([1e-300, -3e-20, 1e-9, 0.01, 0.1249])
    assert np.allclose(erf(tiny), [math.erf(v) for v in tiny], rtol=4e-16, atol=0)


def test_erf_special_values_and_shape() -> None:
    out = erf(np.array([[0.0, -0.0, np.inf], [-np.inf, np.nan, 0.5]]))
    assert out.shape == (2, 3)
    assert out[0, 0] == 0.0 and math.copysign(1.0, out[0, 1]) == -1.0
    assert out[0, 2] == 1.0 and out[1, 0] == -1.0 and math.isnan(out[1, 1])
    assert abs(out[1, 2] - math.erf(0.5)) < 2e-16
    assert erf(np.array(0.25)).shape == ()
