"""Scripts that `import torch`: agdb runs them on its engine by default, says clearly what the engine lacks,
and says why nothing was recorded when the script ran on real torch."""
from __future__ import annotations

import textwrap

import pytest

from agdb.app.torch_shim import imports_torch
from agdb.tracer.store.tracefile import load
from tests.app.test_cli import agdb

USES_TORCH = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F

    x = torch.tensor([1.0, -2.0], requires_grad=True)
    F.relu(x * 3).sum().backward()
    print("grad", x.grad.tolist())
""")


@pytest.mark.parametrize(("source", "expected"), [
    ("import torch\n", True),
    ("import torch.nn as nn\n", True),
    ("from torch import nn\n", True),
    ("from torch.autograd import grad\n", True),
    ("import os, torch\n", True),
    ("def f():\n    import torch\n", True),
    ("import torchvision\n", False),
    ("import agdb.engine as torch\n", False),
    ("# import torch\nx = 'import torch'\n", False),
    ("import torch(\n", False),
])
def test_imports_torch_reads_the_scripts_imports(tmp_path, source, expected):
    """Only real import statements of torch or its submodules count; comments, strings, other packages
    and a script that does not parse do not."""
    script = tmp_path / "s.py"
    script.write_text(source)
    assert imports_torch(script) is expected


def test_a_script_that_imports_torch_runs_on_the_engine_by_default(tmp_path, capsys):
    """No flag needed: `import torch` gets agdb's engine, and the trace holds the script's nodes."""
    script = tmp_path / "model.py"
    script.write_text(USES_TORCH)
    code, out, err = agdb(["record", script, "-o", tmp_path / "run.agdb"], capsys)
    assert code == 0, err
    assert "grad [3.0, 0.0]" in out
    trace = load(tmp_path / "run.agdb")
    names = {trace.node(i).name for i in range(trace.num_nodes)}
    assert {"MulBackward0", "ReluBackward0", "SumBackward0"} <= names


def test_real_torch_records_nothing_and_says_what_to_do(tmp_path, capsys):
    """--real-torch runs real PyTorch, which agdb cannot record: exit 1, the reason and the way out on stderr,
    and no empty trace file."""
    pytest.importorskip("torch")
    script = tmp_path / "model.py"
    script.write_text(USES_TORCH)
    out_file = tmp_path / "run.agdb"
    code, out, err = agdb(["record", script, "-o", out_file, "--real-torch"], capsys)
    assert code == 1
    assert "grad [3.0, 0.0]" in out  # the script itself ran, on real torch
    assert "real PyTorch" in err and "--as-torch" in err
    assert not out_file.exists()


@pytest.mark.parametrize(("line", "name"), [
    ("from torch.nn import NoSuchLayer", "torch.nn.NoSuchLayer"),
    ("import torch.no_such_module", "torch.no_such_module"),
    ("import torch\ntorch.no_such_function(1)", "torch.no_such_function"),
])
def test_what_the_engine_lacks_is_named_however_the_script_reaches_it(tmp_path, capsys, line, name):
    """An attribute, a from-import and a submodule import of something the engine lacks all give the same
    message naming it, instead of Python's bare ImportError."""
    script = tmp_path / "model.py"
    script.write_text(line + "\n")
    code, _, err = agdb(["record", script, "-o", tmp_path / "run.agdb"], capsys)
    assert code == 1
    assert f"agdb's engine has no {name}" in err and "--real-torch" in err


USES_DATA = textwrap.dedent("""\
    import torch
    import torch.utils.data as data
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.dataset import random_split

    x = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    train, _ = random_split(TensorDataset(x), [2, 1])
    for (xb,) in DataLoader(train, batch_size=2, shuffle=True):
        (xb * 2).sum().backward()
    print("data", isinstance(train, data.Subset), x.grad.sum().item())
""")


def test_torch_utils_data_and_its_submodules_resolve_on_the_engine(tmp_path, capsys):
    """`import torch.utils.data`, `from torch.utils.data import ...` and a submodule of it all reach the engine's
    torch.utils.data, and the loop's nodes are recorded."""
    script = tmp_path / "loader.py"
    script.write_text(USES_DATA)
    code, out, err = agdb(["record", script, "-o", tmp_path / "run.agdb"], capsys)
    assert code == 0, err
    assert "data True 4.0" in out
    trace = load(tmp_path / "run.agdb")
    names = {trace.node(i).name for i in range(trace.num_nodes)}
    assert {"SelectBackward0", "StackBackward0", "MulBackward0"} <= names
