"""`agdb ranks run.rank*.agdb [--json]`: per rank and backward call, the parameters that got a grad and those that
did not, and the first step where the ranks differ (tracer/views/ranks.py, docs/torch-bridge.md "DDP")."""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from agdb.tracer.store.printable import printable

from .commands import fail, load_trace

_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.agdb$")


def add_command(sub: Any) -> None:
    ranks = sub.add_parser("ranks", help="compare the rank traces of agdb torch --nproc: grads and unused "
                                         "parameters per rank and step, and the first step where ranks differ",
                           description="Read the traces `agdb torch --nproc N SCRIPT -o run.agdb` wrote (one a rank) "
                                       "and report, per rank and backward call, the parameters whose AccumulateGrad "
                                       "ran, in order, and the DDP model's parameters that got no grad, named as "
                                       "named_parameters() of the module DDP wraps; then the first step where the "
                                       "ranks differ, with the lines that explain it. Exit status 0 when the ranks "
                                       "agree, 1 when they differ or a rank's trace is missing.")
    ranks.add_argument("traces", nargs="+", metavar="TRACE", help="the ranks' traces (run.rank0.agdb ...)")
    ranks.add_argument("--json", action="store_true", help="print {ranks: [...], first_difference: ... or null}")
    ranks.set_defaults(func=cmd_ranks)


def cmd_ranks(args: argparse.Namespace) -> int:
    from agdb.tracer.views.ranks import RanksError, check_ranks, first_difference, read_rank, to_json, to_text

    read, paths = [], {}
    try:
        for path in args.traces:
            named = _RANK_IN_NAME.search(path)
            rank = read_rank(load_trace(path), int(named.group(1)) if named else None)
            read.append(rank)
            paths[rank.rank] = path
        missing = check_ranks(read)
    except RanksError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(to_json(read), indent=2))
    else:
        sys.stdout.write(printable(to_text(read, paths, missing), keep_newlines=True))
    return 1 if missing or first_difference(read) is not None else 0

