"""`agdb ranks`: what each rank's backward calls gave grads to, and the first step where ranks differ, from the traces
`agdb torch --nproc` writes (one a rank). Pure: reads traces, returns plain data.

NOTE [ranks and steps]
A rank's step N is its Nth backward call (counted from 0): the Nth graph task started at reentrant depth 0; the
grads a reentrant backward inside it accumulates count for it. A step's parameters with grad are those whose
AccumulateGrad ran in it, in the order they ran; its unused parameters are the model's others, in
`named_parameters()` order. The model's parameters, and which AccumulateGrad node is whose, are what the bridge
kept of the DistributedDataParallel it saw made (meta `ddp`, NOTE [DDP's parameters] in
tracer/sources/torch/ddp.py), named as the wrapped module names them; with several DDP models each name is
prefixed `ddpK.`. A trace with no DDP model names its AccumulateGrads' leaves as every view does, and has no
unused parameters, since nothing says what the model had. Ranks differ at a step when one gave grads to
parameters another did not, in another order, or has no such step (it ended, or did one backward call more).

Never imports torch, textual or rich.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agdb.tracer.store.events import GraphTaskFinished, GraphTaskStarted
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace


@dataclass(frozen=True)
class Step:
    """One backward call of a rank (NOTE [ranks and steps])."""

    step: int
    params_with_grad: tuple[str, ...]
    unused_params: tuple[str, ...]
    rows: dict[str, int] = field(default_factory=dict, compare=False)  # parameter -> its AccumulateGrad's node row
    started: tuple[int, ...] = field(default=(), compare=False)  # the nodes that ran in it, in order


@dataclass(frozen=True)
class Rank:
    """One rank's trace, read."""

    rank: int
    world_size: int | None
    steps: tuple[Step, ...]
    trace: Trace = field(compare=False, repr=False)
    partial: str = ""  # the signal that cut its recording short, if one did
    blocked: dict[str, Any] = field(default_factory=dict, compare=False)
    """Where the script's thread was blocked in C++ when the signal came: {filename, lineno, name, source} (meta
    `blocked`, NOTE [a stop signal while blocked in C++] in app/blocked.py), or {}."""
    unfinished: bool = False  # its last backward call had not returned when the recording ended


class RanksError(ValueError):
    """The traces cannot be compared as ranks of one run; the message says why."""


def read_rank(trace: Trace, fallback_rank: int | None = None) -> Rank:
    """A rank's steps (NOTE [ranks and steps]); its rank from the trace's meta, else `fallback_rank`."""
    rank = trace.meta.get("rank", fallback_rank)
    if rank is None:
        raise RanksError("the trace does not say its rank (it was not recorded by agdb torch --nproc)")
    names, known = _parameters(trace)
    c = trace.columns
    tasks = trace.steps_of(Kind.GRAPH_TASK_STARTED)
    tops = [int(s) for s in tasks.tolist() if _depth(trace, int(s)) == 0]
    bounds = np.asarray(tops + [len(trace)], dtype=np.int64)
    accumulated = trace.steps_of(Kind.GRAD_ACCUMULATED)  # ascending steps: each backward call's are a slice
    started = trace.steps_of(Kind.NODE_STARTED)
    acc_at, run_at = np.searchsorted(accumulated, bounds), np.searchsorted(started, bounds)
    steps = []
    for i in range(len(tops)):
        rows = c["ev_node"][accumulated[acc_at[i]:acc_at[i + 1]]].tolist()
        got: dict[str, int] = {}
        for row in rows:
            name = known.get(row)
            if name is not None and name not in got:
                got[name] = row
        unused = tuple(n for n in names if n not in got)
        ran = tuple(c["ev_node"][started[run_at[i]:run_at[i + 1]]].tolist())
        steps.append(Step(i, tuple(got), unused, got, ran))
    world = trace.meta.get("world_size")
    return Rank(int(rank), world, tuple(steps), trace, str(trace.meta.get("partial", "")),
                dict(trace.meta.get("blocked") or {}), bool(tops) and not _finished(trace, tops[-1]))


def _finished(trace: Trace, top: int) -> bool:
    """Whether the graph task started at step `top` finished."""
    task = trace[top].graph_task
    for s in trace.steps_of(Kind.GRAPH_TASK_FINISHED).tolist():
        event = trace[int(s)]
        if s > top and isinstance(event, GraphTaskFinished) and event.graph_task == task:
            return True
    return False


def stopped_text(r: Rank) -> str:
    """Where a rank cut short by a signal was, from its trace: "stuck in backward call 2 (step 1) under
    ddp_program.py:58 `loss.backward()`", "stuck after backward call 1 (step 0) at ...", or "" when the recording
    ended of itself."""
    if not r.partial:
        return ""
    calls = len(r.steps)
    if r.blocked.get("in_backward") and not r.unfinished:  # blocked before the bridge recorded the call's start
        calls += 1
    if r.unfinished or r.blocked.get("in_backward"):
        where = f"in backward call {calls} (step {calls - 1})"
    elif calls:
        where = f"after backward call {calls} (step {calls - 1})"
    else:
        where = "before its first backward call"
    b = r.blocked
    if b:
        where += f" at {_short(b['filename'])}:{b['lineno']}" + (f" `{b['source']}`" if b.get("source") else "")
        return f"stuck {where}, blocked in C++ when {r.partial} came"
    return f"stopped by {r.partial} {where}"


def _depth(trace: Trace, step: int) -> int:
    event = trace[step]
    return event.reentrant_depth if isinstance(event, GraphTaskStarted) else 0


def _parameters(trace: Trace) -> tuple[list[str], dict[int, str]]:
    """The model's parameter names, in order, and AccumulateGrad row -> name (NOTE [ranks and steps])."""
    models = trace.meta.get("ddp") or []
    if not models:
        labels = trace.index.leaf_labels
        return [], {int(row): name for row, name in labels.items()}
    names: list[str] = []
    known: dict[int, str] = {}
    for k, model in enumerate(models):
        prefix = f"ddp{k}." if len(models) > 1 else ""
        own = [prefix + n for n in model["parameters"]]
        names.extend(own)
        for row, index in model["accumulate_grads"]:
            known[row] = own[index]
    return names, known


def check_ranks(ranks: list[Rank]) -> list[int]:
    """Raise RanksError when two traces claim one rank or disagree on the world size; the ranks of the world size
    that no trace is given for."""
    seen: dict[int, int] = {}
    for r in ranks:
        if r.rank in seen:
            raise RanksError(f"two traces are rank {r.rank}")
        seen[r.rank] = 1
    worlds = {r.world_size for r in ranks if r.world_size is not None}
    if len(worlds) > 1:
        raise RanksError(f"the traces come from runs of different world sizes ({', '.join(map(str, sorted(worlds)))})")
    world = worlds.pop() if worlds else len(ranks)
    return [k for k in range(world) if k not in seen]


def first_difference(ranks: list[Rank]) -> dict[str, Any] | None:
    """The first step where a rank differs from the lowest one (NOTE [ranks and steps]): {step, ranks: [a, b],
    message}, the message naming the parameters and the lines that made the nodes that used them; None when all
    agree."""
    ordered = sorted(ranks, key=lambda r: r.rank)
    if len(ordered) < 2:
        return None
    a = ordered[0]
    found: tuple[int, Rank] | None = None
    for b in ordered[1:]:
        for k in range(max(len(a.steps), len(b.steps))):
            if found is not None and k >= found[0]:
                break
            if _differs(a, b, k):
                found = (k, b)
                break
    if found is None:
        return None
    k, b = found
    return {"step": k, "ranks": [a.rank, b.rank], "message": _message(a, b, k)}


def _differs(a: Rank, b: Rank, k: int) -> bool:
    if k >= len(a.steps) or k >= len(b.steps):
        return True
    return a.steps[k].params_with_grad != b.steps[k].params_with_grad


def _message(a: Rank, b: Rank, k: int) -> str:
    for short, long in ((a, b), (b, a)):
        if k >= len(short.steps):
            how = f", cut short by {short.partial}" if short.partial else ""
            return (f"step {k}: rank {short.rank} has none, its trace ends after {len(short.steps)} backward call(s)"
                    f"{how}; rank {long.rank} made it")
    sa, sb = a.steps[k], b.steps[k]
    parts = []
    for mine, other, s_mine, s_other in ((a, b, sa, sb), (b, a, sb, sa)):
        only = [n for n in s_mine.params_with_grad if n not in s_other.rows]
        if only:
            lines = _lines(mine, s_mine, only)
            where = f" (used at {'; '.join(lines)})" if lines else ""
            parts.append(f"rank {other.rank} gave no grad to {', '.join(only)}, which rank {mine.rank} did{where}")
    if not parts:
        i = next(i for i, (x, y) in enumerate(zip(sa.params_with_grad, sb.params_with_grad, strict=True)) if x != y)
        parts.append(f"the ranks accumulated the same parameters in another order: at position {i} rank {a.rank} "
                     f"{sa.params_with_grad[i]}, rank {b.rank} {sb.params_with_grad[i]}")
    return f"step {k}: " + "; ".join(parts)


def _lines(rank: Rank, step: Step, params: list[str]) -> list[str]:
    """The lines that made the nodes which ran in `step` and fed these parameters' AccumulateGrads (their
    culprits), each once, in the order the nodes ran: `file:line `source``."""
    trace = rank.trace
    wanted = {step.rows[n] for n in params}
    lines: list[str] = []
    for row in step.started:
        node = trace.node(row)
        if node.lineno > 0 and any(child in wanted for child, _ in node.next_edges):
            text = f"{_short(node.filename)}:{node.lineno} `{node.source.strip()}`"
            if text not in lines:
                lines.append(text)
    return lines


def _short(filename: str) -> str:
    return filename.rsplit("/", 1)[-1]


def to_json(ranks: list[Rank]) -> dict[str, Any]:
    """The `agdb ranks --json` object."""
    ordered = sorted(ranks, key=lambda r: r.rank)
    return {"ranks": [{"rank": r.rank, "steps": [{"step": s.step, "params_with_grad": list(s.params_with_grad),
                                                  "unused_params": list(s.unused_params)} for s in r.steps],
                       "partial": r.partial or None, "stopped": stopped_text(r) or None}
                      for r in ordered],
            "first_difference": first_difference(ordered)}


def to_text(ranks: list[Rank], paths: dict[int, str], missing: list[int]) -> str:
    """What `agdb ranks` prints: each rank's steps, the ranks with no trace, and the first difference."""
    out = []
    for r in sorted(ranks, key=lambda r: r.rank):
        cut = f", partial: {stopped_text(r)}" if r.partial else ""
        out.append(f"rank {r.rank} ({paths.get(r.rank, '?')}: {len(r.steps)} backward call(s){cut})")
        for s in r.steps:
            out.append(f"  step {s.step}: grad to {', '.join(s.params_with_grad) or 'no parameter'}")
            if s.unused_params:
                out.append(f"          unused: {', '.join(s.unused_params)}")
    for k in missing:
        out.append(f"rank {k}: no trace given")
    diff = first_difference(ranks)
    if len(ranks) < 2:
        out.append("one rank's trace: nothing to compare it with")
        return "\n".join(out) + "\n"
    partial = [str(r.rank) for r in sorted(ranks, key=lambda r: r.rank) if r.partial]
    cut = f" recorded (rank{'s' if len(partial) > 1 else ''} {', '.join(partial)} cut short)" if partial else ""
    out.append(f"first difference: ranks {diff['ranks'][0]} and {diff['ranks'][1]} at {diff['message']}" if diff
               else f"the ranks agree at every step{cut}")
    return "\n".join(out) + "\n"
