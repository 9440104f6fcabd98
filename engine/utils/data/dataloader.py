"""DataLoader and the default collate, as torch's.

Batches are fetched in the calling process whatever `num_workers` says (the engine has no worker processes). With
workers, torch's main process still runs the sampler, and reads it ahead: `prefetch_factor * num_workers` batches of
indices when the iterator starts, then one more after each batch it yields. The engine reads the sampler at those
same moments, so batches, their order and the random draws of a sampler match torch's. What runs inside torch's
workers runs here in the calling process: any nodes a dataset's `__getitem__` makes take this thread's seq_nrs,
its random draws come from this process's generator, `get_worker_info()` is None and `worker_init_fn` is not
called (torch calls it in the workers only). An IterableDataset with workers is refused: each of torch's workers
iterates its own copy of the dataset, which the engine does not reproduce.
"""
from __future__ import annotations

import collections.abc
import copy
import re
from typing import Any, Callable, Iterator

import numpy as np

from ... import _random
from ..._tensor import Tensor
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, draw_seed

_NP_STR_OBJ = re.compile(r"[SaUO]")
_COLLATE_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _torch(name: str) -> Callable:
    from ... import _dispatch
    return _dispatch.table("torch")[name]  # the public entry, so that an observer sees the op as in torch


def get_worker_info() -> None:
    """None: the engine fetches every batch in the main process."""
    return None


def default_convert(data: Any) -> Any:
    """numpy arrays and scalars to tensors, inside mappings and sequences; everything else as it is."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ == "ndarray" and _NP_STR_OBJ.search(data.dtype.str) is not None:
            return data
        return _torch("as_tensor")(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({key: default_convert(data[key]) for key in data})
                return clone
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch: Any) -> Any:
    """A list of samples to one batch: tensors stacked on a new first dim, numbers to tensors, mappings and
    sequences collated field by field, strings kept as lists."""
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, Tensor):
        return _torch("stack")(batch, 0)
    if isinstance(elem, np.ndarray):
        if _NP_STR_OBJ.search(elem.dtype.str) is not None:
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return default_collate([_torch("as_tensor")(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number, np.object_)):
        return _torch("as_tensor")(batch)
    if isinstance(elem, float):
        return _torch("tensor")(batch, dtype="float64")
    if isinstance(elem, int):
        return _torch("tensor")(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({key: default_collate([d[key] for d in batch]) for key in elem})
                return clone
            return elem_type({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return elem_type(*(default_collate(samples) for samples in zip(*batch, strict=False)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch, strict=False))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = default_collate(samples)
                return clone
            return elem_type([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(_COLLATE_ERROR.format(elem_type))


class _InfiniteConstantSampler:
    """An IterableDataset's sampler: None forever (the dataset's own iterator decides)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader:
    """Batches of a dataset: a sampler's order, grouped by a BatchSampler, each batch made by `collate_fn`."""

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None, sampler: Any = None,
                 batch_sampler: Any = None, num_workers: int = 0, collate_fn: Callable | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None, multiprocessing_context: Any = None, generator: Any = None,
                 *, prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers, self.prefetch_factor, self.pin_memory = num_workers, prefetch_factor, pin_memory
        self.pin_memory_device, self.timeout, self.worker_init_fn = pin_memory_device, timeout, worker_init_fn
        self.multiprocessing_context, self.in_order = multiprocessing_context, in_order
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterated = False

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator[Any]:
        # torch's iterator draws a base seed for its workers from the loader's generator when it is made: on every
        # pass, except with persistent workers, whose one iterator serves every pass
        if not (self.persistent_workers and self.num_workers > 0 and self._iterated):
            draw_seed(self.generator if self.generator is not None else _random.default_generator)
        self._iterated = True
        if self._iterable:
            if self.num_workers > 0:
                raise NotImplementedError(
                    f"DataLoader with num_workers={self.num_workers} over an IterableDataset: on torch each worker "
                    "process iterates its own copy of the dataset (get_worker_info() tells it which), and agdb's "
                    "engine has no worker processes. Use num_workers=0, or run the script on real torch with "
                    "`agdb torch SCRIPT`")
            return self._iter_stream()
        if self.num_workers > 0:
            return self._iter_prefetched()
        return self._iter_map()

    def _fetch(self, index: Any) -> Any:
        if not self._auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return self.collate_fn(getitems(index))
        return self.collate_fn([self.dataset[i] for i in index])

    def _iter_map(self) -> Iterator[Any]:
        for index in self._index_sampler:
            yield self._fetch(index)

    def _iter_prefetched(self) -> Iterator[Any]:
        """torch's worker iterator: the sampler read ahead now, by prefetch_factor * num_workers batches."""
        indices = iter(self._index_sampler)
        pending: collections.deque = collections.deque()

        def put() -> None:
            try:
                pending.append(next(indices))
            except StopIteration:
                pass

        for _ in range(self.prefetch_factor * self.num_workers):  # type: ignore[operator]
            put()

        def batches() -> Iterator[Any]:
            while pending:
                index = pending.popleft()
                put()  # torch asks for the next index before it hands out (or re-raises) this batch
                yield self._fetch(index)
        return batches()

    def _iter_stream(self) -> Iterator[Any]:
        stream = iter(self.dataset)
        for _ in self._index_sampler:
            if not self._auto_collation:
                try:
                    yield self.collate_fn(next(stream))
                except StopIteration:
                    return
                continue
            data = []
            for _ in range(self.batch_size):  # type: ignore[arg-type]
                try:
                    data.append(next(stream))
                except StopIteration:
                    break
            if not data or (self.drop_last and len(data) < self.batch_size):  # type: ignore[operator]
                return
            yield self.collate_fn(data)

    def __len__(self) -> int:
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)
