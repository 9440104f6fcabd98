"""DistributedDataParallel while recording: which parameters each DDP model has, and which AccumulateGrad is whose;
the process's rank and world size. `agdb ranks` (tracer/views/ranks.py) reads them from the trace's meta.

NOTE [DDP's parameters]
A parameter that gets no grad never reaches a backward call's graph, so the graph alone cannot say that a model
had it. The bridge wraps `DistributedDataParallel.__init__` while it records: once DDP's own constructor has run,
the parameters DDP reduces (those of the module it wraps that require grad and are not in
`parameters_to_ignore`, as `named_parameters()` of that module names them, without DDP's `module.` prefix) are
the model's. Each AccumulateGrad a walk meets (walk.py gives it its key) is matched to its leaf by identity; DDP
keeps every parameter's AccumulateGrad alive (its reducer hooks them), so a parameter has one for as long as the
model lives, but a new one made later is matched too. Nothing else changes: DDP's hooks, its allreduce and its
`find_unused_parameters` traversal run as they would without agdb.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import os
import weakref
from typing import Any, Callable

import torch

from agdb.tracer.sources.torch.state import BridgeState


class DdpModels:
    """The DDP models made while recording (NOTE [DDP's parameters]) and the AccumulateGrad keys of their
    parameters; `meta(row_of)` is what the trace's meta keeps."""

    def __init__(self, shared: BridgeState, leaf_key: Callable[[Any], int | None]) -> None:
        self.shared = shared
        self._leaf_key = leaf_key  # the key a walk already gave a leaf's AccumulateGrad, or None
        self.models: list[list[str]] = []  # each DDP model's parameter names, in named_parameters() order
        self._params: dict[int, tuple[Any, int, int]] = {}  # id(param) -> (weakref, model, index in its names)
        self.keys: dict[int, tuple[int, int]] = {}  # AccumulateGrad key -> (model, index in its names)
        self.group: tuple[int, int] | None = None  # (rank, world size) of the first DDP model's process group
        self._restore: Callable[[], None] | None = None

    def attach(self) -> None:
        """Wrap DistributedDataParallel.__init__ (when torch has torch.distributed)."""
        if not torch.distributed.is_available():
            return
        from torch.nn.parallel import DistributedDataParallel

        original = DistributedDataParallel.__dict__["__init__"]
        models = self

        def __init__(ddp: Any, *args: Any, **kwargs: Any) -> None:
            original(ddp, *args, **kwargs)
            try:
                models.add(ddp)
            except Exception as e:  # noqa: BLE001 - the program's DDP is made; agdb only knows less
                models.shared.failures.append(f"DistributedDataParallel's parameters: {type(e).__name__}: {e}")

        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        DistributedDataParallel.__init__ = __init__
        self._restore = lambda: setattr(DistributedDataParallel, "__init__", original)

    def detach(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None

    def add(self, ddp: Any) -> None:
        """A DDP model was made: its parameters (NOTE [DDP's parameters]) and its process group's rank."""
        ignored = getattr(ddp, "parameters_to_ignore", ()) or ()
        named = [(n, p) for n, p in ddp.module.named_parameters() if p.requires_grad and n not in ignored]
        model = len(self.models)
        self.models.append([n for n, _ in named])
        for i, (_, p) in enumerate(named):
            self._params[id(p)] = (weakref.ref(p), model, i)
            key = self._leaf_key(p)  # an AccumulateGrad a backward before DDP was made already met
            if key is not None:
                self.keys[key] = (model, i)
        if self.group is None:
            group = getattr(ddp, "process_group", None)
            dist = torch.distributed
            self.group = (dist.get_rank(group), dist.get_world_size(group))

    def leaf(self, key: int, var: Any) -> None:
        """A walk gave the AccumulateGrad of leaf `var` the key `key` (called for each new one)."""
        known = self._params.get(id(var))
        if known is not None and known[0]() is var:
            self.keys[key] = known[1:]

    def meta(self, row_of: dict[int, int]) -> dict[str, Any]:
        """What the trace's meta keeps: `rank` and `world_size` (DDP's process group's, else torchrun's RANK and
        WORLD_SIZE), and `ddp`: each model's `parameters` and its AccumulateGrads' node rows (`accumulate_grads`:
        [row, index in parameters])."""
        out: dict[str, Any] = {}
        group = self.group or _launched()
        if group is not None:
            out["rank"], out["world_size"] = group
        if self.models:
            out["ddp"] = [{"parameters": names,
                           "accumulate_grads": sorted([row_of[key], i] for key, (m, i) in self.keys.items()
                                                      if m == model and key in row_of)}
                          for model, names in enumerate(self.models)]
        return out


def _launched() -> tuple[int, int] | None:
    """(RANK, WORLD_SIZE) as torch's launcher sets them for each process it starts, or None."""
    try:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
