"""What the progress line costs a recording, end to end: `agdb record` and `agdb torch` with stderr on a terminal
(the line drawn, NOTE [progress by polling] in app/run_progress.py) against the same command with stderr on a pipe
(no line), each a real `agdb` child process.

The scripts: a chain (`h = h.tanh()` N times, one tiny op per line, then one backward) on agdb's engine (`agdb
record`) and on real torch (`agdb torch`; skipped without torch). Each round runs every (command, stderr) pair
once, in an order turned each round, so that a shared machine's load falls on all alike. The figure is the child's
CPU time (user + system, from its rusage), median over the rounds; the ratio divides the terminal's median by the
pipe's (target <= 1.02: the line may cost nothing measurable). --quick: N = 5,000 and 3 rounds (else 20,000 and 5).

    .venv/bin/python bench/progress.py [--quick] [--reps ROUNDS] [--json PATH]
"""
from __future__ import annotations

import fcntl
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import bench_main, print_target_table  # noqa: E402

TARGET = 1.02
CHAIN = """import {module} as torch
h = torch.ones(4, requires_grad=True)
for _ in range({n}):
    h = h.tanh()
h.sum().backward()
"""


def _child_cpu(argv: list[str], cwd: str, on_terminal: bool) -> float:
    """CPU seconds of one `agdb` child, its stderr on a pseudo-terminal (drained by a thread) or on a pipe."""
    if on_terminal:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([sys.executable, "-m", "agdb", *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave if on_terminal else subprocess.PIPE)
    if on_terminal:
        os.close(slave)
        drain = threading.Thread(target=_drain, args=(master,), daemon=True)
        drain.start()
    else:
        threading.Thread(target=proc.stderr.read, daemon=True).start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if on_terminal:
        drain.join()
        os.close(master)
    if proc.returncode != 0:
        raise RuntimeError(f"agdb {' '.join(argv)} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def _drain(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def run(quick: bool, reps: int | None) -> dict[str, Any]:
    n, rounds = (5_000, 3) if quick else (20_000, 5)
    rounds = reps or rounds
    load_before = os.getloadavg()
    commands = [("record", "agdb.engine")]
    try:
        import torch  # noqa: F401

        commands.append(("torch", "torch"))
    except ImportError:
        pass
    times: dict[str, list[float]] = {f"{c} {w}": [] for c, _ in commands for w in ("terminal", "pipe")}
    with tempfile.TemporaryDirectory() as tmp:
        for command, module in commands:
            Path(tmp, f"chain_{command}.py").write_text(CHAIN.format(module=module, n=n))
        pairs = [(c, w) for c, _ in commands for w in ("terminal", "pipe")]
        for r in range(rounds):
            for command, where in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:
                argv = [command, f"chain_{command}.py", "-o", "out.agdb"]
                times[f"{command} {where}"].append(_child_cpu(argv, tmp, where == "terminal"))
    checks, info, table = [], [], []
    for command, _ in commands:
        term, pipe = (statistics.median(times[f"{command} {w}"]) for w in ("terminal", "pipe"))
        for where, value in (("terminal", term), ("pipe", pipe)):
            info.append({"name": f"agdb {command}, stderr on a {where} (CPU s)", "value": value})
            table.append(info[-1]["name"])
        checks.append({"name": f"agdb {command}: terminal / pipe", "value": term / pipe, "target": TARGET,
                       "met": term / pipe <= TARGET})
        table.append(checks[-1]["name"])
    return {"meta": {"n": n, "rounds": rounds, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg())},
            "times": times, "checks": checks, "info": info, "table": table}


def report(result: dict[str, Any]) -> None:
    meta = result["meta"]
    print(f"chain of {meta['n']:,} tanh, {meta['rounds']} rounds, {meta['date']}, load average "
          f"{meta['loadavg_before'][0]:.2f} before / {meta['loadavg_after'][0]:.2f} after")
    print_target_table(result, lambda row: f"{row['value']:.3f}", lambda row: f"<= {row['target']}")


if __name__ == "__main__":
    sys.exit(bench_main(__doc__, run, report, quick_help="N = 5,000 and 3 rounds",
                        reps_help="rounds (default 5; 3 with --quick)"))
