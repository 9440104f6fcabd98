"""recording/freeze.py's summary_block (small arrays summarised a block at a time, NOTE [frozen chunks] in tracer/recording/builder.py)
against summarising each tensor on its own, over every layout builder.summaries holds."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from agdb.tracer.recording.freeze import summary_block

_VALUES = st.sampled_from([0.0, -1.5, 2.25, math.nan, math.inf, -math.inf, 7.0])
_SHAPES = st.sampled_from([(), (1,), (3,), (4,), (2, 2), (0,), (2, 0, 3)])
_DTYPES = st.sampled_from([np.float64, np.float32, np.int64, np.bool_])


@st.composite
def _array(draw, shape=None, dtype=None) -> np.ndarray:
    shape = draw(_SHAPES) if shape is None else shape
    dtype = draw(_DTYPES) if dtype is None else dtype
    size = int(np.prod(shape))
    values = np.array(draw(st.lists(_VALUES, min_size=size, max_size=size)), dtype=np.float64)
    if dtype is not np.float64 and dtype is not np.float32:
        values = np.nan_to_num(values, posinf=9, neginf=-9)
    return values.astype(dtype).reshape(shape)


_SUMMARY = st.tuples(st.lists(st.integers(0, 50), max_size=3).map(tuple), st.sampled_from(["float64", "int64"]),
                     st.sampled_from(["cpu", "cuda:0"]), st.lists(_VALUES, max_size=3).map(tuple), st.booleans(),
                     st.booleans())
_ITEM = st.one_of(st.none(), st.tuples(_array(), st.sampled_from(["cpu", "cuda:0"])), _SUMMARY)
_GROUP = st.one_of(_array(), st.lists(_ITEM, max_size=3).map(tuple))  # a bare array: one small CPU tensor


def _one_by_one(group) -> list:
    """(info, dtype name, device, dims, preview) of each tensor of a group, each computed on its own."""
    items = [(group, "cpu")] if isinstance(group, np.ndarray) else list(group)
    out = []
    for item in items:
        if isinstance(item, np.ndarray):  # a small CPU tensor in a group of its own (the Recorder's grads)
            item = (item, "cpu")
        if item is None:
            out.append((0, None, None, (), [math.nan] * 3))
        elif len(item) == 2:
            arr, device = item
            flat = arr.reshape(-1)
            k = min(3, flat.size)
            floats = arr.dtype.kind == "f"
            info = 1 | int(floats and bool(np.isnan(flat).any())) << 1 | int(floats and bool(np.isinf(flat).any())) << 2
            preview = [float(np.float32(v)) for v in flat[:k]] + [math.nan] * (3 - k)
            out.append((info | k << 3, arr.dtype.name, device, arr.shape, preview))
        else:
            shape, dtype, device, values, has_nan, has_inf = item
            preview = [float(np.float32(v)) for v in values] + [math.nan] * (3 - len(values))
            out.append((1 | int(has_nan) << 1 | int(has_inf) << 2 | len(values) << 3, dtype, device, shape, preview))
    return out


@given(st.lists(_GROUP, max_size=12))
def test_summary_block_equals_summarising_each_tensor_alone(groups):
    """Every layout of group, mixed at random, summarised a block at a time as each tensor alone."""
    _check(groups)


@st.composite
def _backward_chunk(draw) -> list:
    """A chunk as a backward makes them (NOTE [summary fast path] in freeze): bare arrays of one dtype and shape,
    some perhaps kept in a pair beside a None, with perhaps a group of no tensor, one None or one array kept in a
    tuple among them, or one odd array."""
    shape, dtype = draw(_SHAPES), draw(_DTYPES)
    groups = draw(st.lists(_array(shape, dtype), min_size=1, max_size=12))
    first = groups[0]
    if draw(st.booleans()):  # a binary op's node whose other input needs no grad: (grad, None) or (None, grad)
        sides = draw(st.lists(st.sampled_from([0, 1, 2]), min_size=len(groups), max_size=len(groups)))
        groups = [g if k == 0 else (g, None) if k == 1 else (None, g) for g, k in zip(groups, sides, strict=True)]
    extra = draw(st.sampled_from([None, (), (None,), "tuple", "odd"]))
    if extra is not None:
        item = {"tuple": (first.copy(),), "odd": np.zeros((5,), dtype=np.float16)}.get(extra, extra)
        groups.insert(draw(st.integers(0, len(groups))), item)
    return groups


@given(_backward_chunk())
def test_a_backward_chunk_is_summarised_as_each_tensor_alone(groups):
    """A chunk of bare arrays of one dtype and shape (the fast path), with or without a None or an odd one out."""
    _check(groups)


def _check(groups: list) -> None:
    block = summary_block(groups)
    names = block["names"]
    expected = [item for group in groups for item in _one_by_one(group)]
    assert block["s_count"].tolist() == [1 if isinstance(g, np.ndarray) else len(g) for g in groups]
    dims = block["s_dims"].tolist()
    at = 0
    for i, (info, dtype, device, shape, preview) in enumerate(expected):
        assert int(block["s_info"][i]) == info
        if info & 1:
            assert names[block["s_dtype"][i]] == dtype and names[block["s_device"][i]] == device
        assert int(block["s_ndim"][i]) == len(shape)
        assert tuple(dims[at:at + len(shape)]) == tuple(shape)
        at += len(shape)
        np.testing.assert_array_equal(block["s_preview"][i], np.asarray(preview, dtype=np.float32))
    assert at == len(dims) and len(block["s_info"]) == len(expected)


@given(st.sampled_from(["float16", "float32", "float64", "int64", "int8", "bool", "complex64"]),
       st.lists(st.sampled_from([0.0, -1.5, 2.25, 7.0, math.nan, math.inf, -math.inf]), min_size=17, max_size=40),
       st.booleans())
def test_a_large_array_s_summary_is_its_shape_dtype_first_values_and_flags(dtype, values, square):
    """summarize (a grad past SMALL elements), against a hand computation value by value."""
    from agdb.tracer.recording.builder import summarize

    kind = np.dtype(dtype).kind
    if kind != "f" and kind != "c":
        values = [v if math.isfinite(v) else 3.0 for v in values]
    with np.errstate(invalid="ignore", over="ignore"):
        data = np.array(values, dtype=dtype)
    if square:
        data = np.stack([data, data])
    flat = [complex(v).real if kind == "c" else float(v) for v in data.reshape(-1).tolist()]
    shape, name, device, preview, has_nan, has_inf = summarize(data, "cpu")
    assert (shape, name, device) == (data.shape, dtype, "cpu")
    assert all(type(v) is float for v in preview) and len(preview) == 3
    assert [str(v) for v in preview] == [str(v) for v in flat[:3]]  # str: nan == nan
    floats = kind == "f"
    assert has_nan == (floats and any(math.isnan(v) for v in flat))
    assert has_inf == (floats and any(math.isinf(v) for v in flat))
