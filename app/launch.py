"""`agdb torch --nproc N SCRIPT -o run.agdb`: SCRIPT on N processes through torch's own launcher
(`torch.distributed.run`, as `torchrun --standalone` starts it), each recorded by the bridge into run.rankK.agdb.

NOTE [one trace per rank]
The launcher runs in agdb's process (so that it hands back each failed rank's exit code or signal as torch's
ChildFailedError has it, rather than as text to parse); each process it starts is `python -m
agdb.app.rank_worker`, which is `agdb torch SCRIPT -o run.rankK.agdb` with K its RANK. The script does its own
`init_process_group`, as under torchrun; `--standalone` gives the rendezvous a free port. When a rank fails, the
launcher stops the others with SIGTERM, which agdb's signal handling (NOTE [signals and the script]) turns into a
saved, partial trace; a rank killed by SIGKILL writes none. Traces of these ranks left by an earlier run are
removed first, so that no stale one passes for this run's.

NOTE [a hang]
Ranks that build different graphs usually hang rather than fail: each blocks in a gloo collective its peers never
join, until gloo's own timeout (30 minutes by default). `--timeout SECONDS` (none by default: a training run may
rightly take hours) and Ctrl-C (SIGINT, or SIGTERM, to agdb) end such a launch: torch's launcher passes the signal
on to each rank still running (SIGTERM for the timeout), whose trace is then saved even though its script is
blocked in C++ (NOTE [a stop signal while blocked in C++] in blocked.py), and agdb reads each rank's trace to say
where it was stuck: in or after which backward call, under which line of the script.

Imports torch when it runs (the command needs it); never textual.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from .commands import fail

WORKER = "agdb.app.rank_worker"


def rank_path(output: Path, rank: int) -> Path:
    """run.agdb -> run.rank0.agdb (a name with no .agdb gets it: run -> run.rank0.agdb)."""
    base = output.name[:-len(".agdb")] if output.name.endswith(".agdb") else output.name
    return output.with_name(f"{base}.rank{rank}.agdb")


def launch(script: str, script_args: list[str], output: Path, nproc: int, single_threaded: bool,
           timeout: float | None = None) -> int:
    """Run `script` on `nproc` processes, each recorded into its rank's trace; the status agdb ends with: 0 when
    every rank ended well, else 1 after naming each failed rank and how it ended, or, when `timeout` seconds passed
    or a signal stopped the launch (NOTE [a hang]), after saying where each rank was stuck (-signum for a signal
    other than the timeout's, which agdb then ends by)."""
    import torch.distributed

    if not torch.distributed.is_available():
        return fail("this torch was built without torch.distributed, so agdb torch --nproc cannot launch ranks")
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    paths = [rank_path(output, rank) for rank in range(nproc)]
    for path in paths:
        path.unlink(missing_ok=True)
    flags = ["--single-threaded"] if single_threaded else []
    args = parse_args(["--standalone", f"--nproc-per-node={nproc}", "--module", WORKER, str(output), *flags,
                       script, "--", *script_args])
    failed: dict[int, int] = {}
    stopped: int | None = None  # the signal that ended the launch
    time_up = threading.Event()
    timer = threading.Timer(timeout, _stop, (time_up,)) if timeout else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        run(args)
    except ChildFailedError as e:
        failed = {rank: failure.exitcode for rank, failure in e.failures.items()}
    except SignalException as e:
        stopped = int(e.sigval)
    finally:
        if timer is not None:
            timer.cancel()
    if stopped is not None:
        why = f"--timeout {timeout:g} s passed" if time_up.is_set() else f"{signal.Signals(stopped).name} came"
        fail(f"{why}: the ranks still running were stopped")
        for line in stuck_lines(paths):
            fail(line)
    for line in failure_lines(failed):
        fail(line)
    written = [str(p) for p in paths if p.exists()]
    missing = [rank for rank, p in enumerate(paths) if not p.exists()]
    if missing:
        fail(f"no trace from rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}")
    if written:
        sys.stderr.write(f"agdb: {len(written)} of {nproc} rank traces: {' '.join(written)} (agdb ranks reads them)\n")
    if stopped is not None and not time_up.is_set():
        return -stopped
    return 1 if failed or missing or stopped is not None else 0


def _stop(time_up: threading.Event) -> None:
    """--timeout: SIGTERM to agdb itself, which torch's launcher takes as it takes a Ctrl-C (NOTE [a hang])."""
    time_up.set()
    os.kill(os.getpid(), signal.SIGTERM)


def stuck_lines(paths: list[Path]) -> list[str]:
    """One line a rank whose trace was cut short by a signal, from that trace: where it was (NOTE [a hang])."""
    from agdb.tracer.store.tracefile import load
    from agdb.tracer.views.ranks import read_rank, stopped_text

    lines = []
    for k, path in enumerate(paths):
        if path.exists():
            rank = read_rank(load(path), k)
            text = stopped_text(rank)
            if text:
                lines.append(f"rank {k} was {text}")
    return lines


def failure_lines(failed: dict[int, int]) -> list[str]:
    """One line a failed rank. torch's launcher stops the other ranks with SIGTERM once one fails, and counts them
    as failed too: when some rank failed otherwise, those are said to have been stopped, not to have failed."""
    stopped = -signal.SIGTERM
    causes = sorted(rank for rank, code in failed.items() if code != stopped)
    lines = []
    for rank in sorted(failed):
        if causes and failed[rank] == stopped:
            which = ", ".join(map(str, causes))
            lines.append(f"rank {rank} was stopped (SIGTERM) by torch's launcher once rank {which} had failed")
        else:
            lines.append(f"rank {rank} failed: {ended(failed[rank])}")
    return lines


def ended(exitcode: int) -> str:
    """How a process ended, from its exit code (negative: killed by that signal, as Popen says it)."""
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
