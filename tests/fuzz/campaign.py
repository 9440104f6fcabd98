"""The campaign behind `python -m tests.fuzz --seed S -n N [--out DIR] [--jobs J]`: N random programs on engine
and torch.

Program i has seed S * 1_000_003 + i. Progress goes to stderr; each group of differences (first differing
field, op) gets up to `--repros` minimal repros, shrunk and written to DIR; the summary table goes to stdout.
Exit status 1 when any program differs, 2 when torch is missing.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Iterable, Iterator

from tests.fuzz.generator import generate
from tests.fuzz.interpret import Difference, compare, import_torch
from tests.fuzz.shrink import readable, repro, shrink

SEED_STRIDE = 1_000_003


def program_seed(seed: int, i: int) -> int:
    """The seed of program i of a run started at `seed`."""
    return seed * SEED_STRIDE + i


def _check(task: tuple[int, bool]) -> tuple[int, Difference | None]:
    seed, known_gaps = task
    return seed, compare(generate(seed, known_gaps))


def _shrink(task: tuple[int, bool]) -> tuple[int, str, Difference]:
    seed, known_gaps = task
    try:
        program, diff = shrink(generate(seed, known_gaps), compare)
    except ValueError:  # it differed once and not now: a nondeterministic difference, worth a look of its own
        diff = Difference("did not reproduce", "?", -1, "flaky", "differed in the campaign", "not when rerun")
        return seed, f"# seed {seed}: differed in the campaign, not when run again to be shrunk\n", diff
    return seed, repro(program, diff, readable(program, diff, compare)), diff


def _init_worker() -> None:
    """One intra-op thread for the worker's torch, as `torch.set_num_threads(1)` gives, set before torch is imported
    (torch reads these at its start): a worker then pays torch's import (about 1.5 s of CPU) only when its first
    program runs, and a worker that runs none (a pool the campaign stops when another worker died) pays nothing."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"


def _mapped(pool, fn, tasks: list) -> Iterator:
    """fn over tasks, in worker processes when `pool` is a job count above 1. A worker that dies (torch itself
    has segfaulted on a random program) does not hang the campaign: the tasks the workers were running are
    run again, each alone, and one that kills its worker again is reported as a crash; the rest go on."""
    if pool is None:
        yield from map(fn, tasks)
        return
    pending = list(tasks)
    with tempfile.TemporaryDirectory(prefix="agdb-fuzz-") as running:
        while pending:
            suspects: set = set()
            with _executor(pool) as executor:
                futures = {executor.submit(_tracked, fn, task, running): task for task in pending}
                pending = []
                for future in as_completed(futures):
                    try:
                        yield future.result()
                    except BrokenProcessPool:
                        suspects |= _tasks_of_dead_workers(running)
                        pending.append(futures[future])
            for task in suspects & set(pending):  # the pool also stops the workers that did nothing wrong
                pending.remove(task)
                yield _alone(fn, task, running)


def _alone(fn, task, running: str):
    """fn(task) in a worker of its own: its result, or a crash when the worker dies again."""
    with _executor(1) as executor:
        try:
            return executor.submit(_tracked, fn, task, running).result()
        except BrokenProcessPool:
            _tasks_of_dead_workers(running)
            return _crashed(fn, task)


def _tracked(fn, task, running: str):
    """fn(task) in a worker, with the task written down under the worker's pid while it runs."""
    mark = Path(running) / str(os.getpid())
    mark.write_text(repr(task))
    result = fn(task)
    mark.unlink()
    return result


def _tasks_of_dead_workers(running: str) -> set:
    """The tasks that workers which are gone were running (their marks are left behind)."""
    tasks = set()
    for mark in Path(running).iterdir():
        try:
            os.kill(int(mark.name), 0)
        except ProcessLookupError:
            tasks.add(ast.literal_eval(mark.read_text()))
            mark.unlink()
    return tasks


def _crashed(fn, task: tuple[int, bool]):
    diff = Difference("process crashed", "?", -1, "crash", "a worker process died running this program",
                      "(run it alone: python -m tests.fuzz.findings or the repro)")
    return (task[0], diff) if fn is _check else (task[0], f"# seed {task[0]}: the worker process died\n", diff)


def _executor(jobs: int) -> ProcessPoolExecutor:
    """Worker processes, spawned (a forked child can inherit a lock another thread held)."""
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker)


def _pool(jobs: int):
    """The job count when the work goes to worker processes, or None for one job."""
    return contextlib.nullcontext(jobs if jobs > 1 else None)


def _progress(label: str, items: Iterable, total: int, count_failures: bool) -> list:
    """Collect `items`, showing the count (and failures so far) on stderr: one updated line on a terminal,
    a line every 10 seconds otherwise."""
    tty = sys.stderr.isatty()
    done, failed, results, last = 0, 0, [], time.monotonic()
    for item in items:
        results.append(item)
        done += 1
        failed += count_failures and item[1] is not None
        now = time.monotonic()
        if now - last > (0.5 if tty else 10) or done == total:
            tail = f", {failed} differ" if count_failures else ""
            print(f"{chr(13) if tty else ''}{label}: {done}/{total}{tail}   ", end="" if tty else "\n",
                  file=sys.stderr, flush=True)
            last = now
    if tty:
        print(file=sys.stderr)
    return results


def _file_name(index: int, diff: Difference, seed: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", f"{diff.field}_{diff.op}").strip("_")
    return f"{index:03d}_{slug}_seed{seed}.py"


def main(argv: list[str] | None = None) -> int:
    """Run the campaign the arguments ask for; 1 when any program differs."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description="Run random programs on engine and "
                                     "torch, compare them event by event, and shrink the differences.")
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    parser.add_argument("-n", type=int, default=1000, help="how many programs (default 1000)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="where repros go (default fuzz-out/)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--repros", type=int, default=2, help="programs shrunk per group (default 2)")
    parser.add_argument("--skip-known-gaps", action="store_true",
                        help="leave out the constructs of generator.KNOWN_GAPS (as the fixed test batch does)")
    args = parser.parse_args(argv)
    try:
        import_torch()
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    known_gaps = not args.skip_known_gaps
    tasks = [(program_seed(args.seed, i), known_gaps) for i in range(args.n)]
    with _pool(args.jobs) as pool:
        results = _progress("programs", _mapped(pool, _check, tasks), len(tasks), True)
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for seed, diff in sorted(results, key=lambda r: r[0]):
            if diff is not None:
                groups[diff.signature].append(seed)
        picks = [(s, known_gaps) for seeds in groups.values() for s in seeds[: args.repros]]
        shrunk = _progress("shrinking", _mapped(pool, _shrink, picks), len(picks), False) if picks else []
    _report(args, groups, shrunk, len(tasks))
    return 1 if groups else 0


def _report(args: argparse.Namespace, groups: dict, shrunk: list, total: int) -> None:
    failed = sum(len(v) for v in groups.values())
    mode = "without the known gaps" if args.skip_known_gaps else "with everything on"
    print(f"{total} programs from seed {args.seed} ({mode}): {failed} differ from torch, in {len(groups)} groups "
          "(first differing field, op)")
    if not groups:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    files: dict[int, str] = {}
    for index, (seed, text, diff) in enumerate(sorted(shrunk, key=lambda r: r[0])):
        path = args.out / _file_name(index, diff, seed)
        path.write_text(text)
        files[seed] = str(path)
    print(f"{'count':>5}  {'field':<22} {'op':<16} repros")
    for (field, op), seeds in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        paths = [files[s] for s in seeds[: args.repros] if s in files]
        print(f"{len(seeds):>5}  {field:<22} {op:<16} {' '.join(paths)}")

