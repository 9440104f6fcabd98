"""What every agdb benchmark shares: the command line (--quick, --reps, --json PATH) and node counting."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable


def bench_main(doc: str, run: Callable[[bool, int | None], dict], report: Callable[[dict], Any],
               quick_help: str, reps_help: str, argv: list[str] | None = None) -> int:
    """Parse the shared options, run the benchmark, print its report and optionally save its numbers."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--reps", type=int, default=None, help=reps_help)
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be at least 1")
    result = run(args.quick, args.reps)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def count_nodes(root: Any) -> int:
    """Distinct nodes reachable from `root` through next_functions, AccumulateGrad included."""
    seen = {id(root): root}  # keep the node objects alive so their ids stay unique
    stack = [root]
    while stack:
        fn = stack.pop()
        for nxt, _ in fn.next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return len(seen)
