"""What every agdb benchmark shares: the command line (--quick, --reps, --json PATH) and node counting."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable


def bench_main(doc: str, run: Callable[[bool, int | None], dict], report: Callable[[dict], Any],
               quick_help: str, reps_help: str, argv: list[str] | None = None,
               flags: dict[str, tuple[str, Callable[[], Any]]] | None = None) -> int:
    """Parse the shared options, run the benchmark, print its report and optionally save its numbers.

    `flags`: a benchmark's own on/off options, `--name: (help, called before the run when given)`.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--reps", type=int, default=None, help=reps_help)
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    for flag, (help_text, _) in (flags or {}).items():
        parser.add_argument(flag, action="store_true", help=help_text)
    args = parser.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be at least 1")
    for flag, (_, turn_on) in (flags or {}).items():
        if getattr(args, flag.lstrip("-").replace("-", "_")):
            turn_on()
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


def load_bench_module(name: str) -> Any:
    """bench/NAME.py as the module `bench_NAME`: bench/tracer.py's own name would be the `tracer` package's."""
    key = f"bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, Path(__file__).resolve().parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def print_target_table(result: dict, value_text: Callable[[dict], str], target_text: Callable[[dict], str],
                       target_width: int = 10) -> None:
    """The closing table of a benchmark: each figure of `result["table"]`, its target and whether it is met."""
    header = f"{'figure':<42}{'value':>12}  {'target':>{target_width}}  status"
    print(header)
    print("-" * (len(header) + 4))
    by_name = {row["name"]: row for row in result["checks"] + result["info"]}
    for name in result["table"]:
        row = by_name[name]
        target = row.get("target")
        wanted = "-" if target is None else target_text(row)
        status = "info" if target is None else ("met" if row["met"] else "NOT met")
        print(f"{name:<42}{value_text(row):>12}  {wanted:>{target_width}}  {status}")
