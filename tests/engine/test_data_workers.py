"""DataLoader over an IterableDataset with worker processes: torch's workers each iterate their own copy of the
dataset, which the engine (no worker processes) refuses, naming the bridge command that runs the script on torch."""
from __future__ import annotations

import pytest

from agdb import engine


def _stream(t):
    class Stream(t.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))
    return Stream()


def test_iterable_dataset_with_workers_is_refused_with_the_bridge_command() -> None:
    loader = engine.utils.data.DataLoader(_stream(engine), batch_size=None, num_workers=2)
    with pytest.raises(NotImplementedError, match=r"IterableDataset.*`agdb torch SCRIPT`"):
        iter(loader)
    assert [int(x) for x in engine.utils.data.DataLoader(_stream(engine), batch_size=None)] == [0, 1, 2]


@pytest.mark.torch
def test_torch_workers_each_iterate_the_whole_dataset() -> None:
    """Why the engine refuses rather than iterating once: torch yields every sample once per worker."""
    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(_stream(torch), batch_size=None, num_workers=2)
    assert sorted(int(x) for x in loader) == [0, 0, 1, 1, 2, 2]
