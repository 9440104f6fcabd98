"""`torch.utils.data`: datasets, samplers and the DataLoader, with torch's semantics.

Shuffling and `random_split` draw from the engine's generators the way torch's draw from its own (a seed per
epoch from the default generator, then `randperm`), so the same `manual_seed` repeats the engine's order, which
is not torch's order (the engine's random values are numpy's).
"""
from __future__ import annotations

from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

__all__ = [
    "DataLoader", "default_collate", "default_convert", "get_worker_info",
    "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split",
    "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler",
]
