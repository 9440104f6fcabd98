"""A value's type in agdb's graph text is spelled as torch.fx's print_readable spells it, for every dtype."""
from __future__ import annotations

import pytest

from agdb.tracer.fx.graph import type_text


def test_every_dtype_is_abbreviated_as_torch_fx_does():
    torch = pytest.importorskip("torch")
    from torch.fx.graph import dtype_abbrs

    for dtype, abbr in dtype_abbrs.items():
        name = str(dtype).removeprefix("torch.")
        assert type_text({"dtype": name, "shape": [2, 3]}) == f"{abbr}[2, 3]", name
    assert isinstance(torch.float16, torch.dtype)


def test_an_unknown_dtype_keeps_its_name_and_no_dtype_is_a_question_mark():
    assert type_text({"dtype": "mystery", "shape": []}) == "mystery[]"
    assert type_text({"shape": [1]}) == "?[1]"
