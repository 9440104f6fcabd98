"""Record a corpus of programs with the engine's Recorder and print a digest of each saved trace, so that a change
to the recorder can be checked to leave every trace byte for byte the same.

Run it once per tree and compare the outputs (agdb is imported from wherever PYTHONPATH or the install points):

    .venv/bin/python bench/trace_corpus.py > after.txt
    PYTHONPATH=/tmp/before .venv/bin/python bench/trace_corpus.py > before.txt   # a tree with agdb/ in /tmp/before
    diff before.txt after.txt

The corpus: part 1's graph at 10 x 200 and at 3 x 9,000 (frozen chunks while recording), part 5's training loop
(40 calls), and `-n` programs of the differential fuzzer (tests/fuzz; default 150, seed 8181), each recorded from
before its first op to after its last.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from _common import load_bench_module  # noqa: E402 - bench/, after the path

from agdb import engine  # noqa: E402
from agdb.tracer.sources.engine import Recorder  # noqa: E402
from agdb.tracer.store import tracefile  # noqa: E402
from tests.fuzz.campaign import program_seed  # noqa: E402
from tests.fuzz.generator import generate  # noqa: E402
from tests.fuzz.interpret import compile_program, run  # noqa: E402

bench = load_bench_module("tracer")  # bench/tracer.py, whose own name is the tracer package's


def digest(trace, folder: str) -> str:
    """The first 16 hex digits of the sha256 of `trace` saved."""
    path = os.path.join(folder, "trace.agdb")
    tracefile.save(trace, path)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def graph(chains: int, length: int):
    """The trace of part 1's graph of `chains` x `length` ops, forward and backward."""
    recorder = Recorder().attach()
    bench.build_graph(chains, length).backward()
    return recorder.finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=150, help="fuzzer programs (default 150)")
    parser.add_argument("--seed", type=int, default=8181, help="the fuzzer's campaign seed (default 8181)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        print("graph-10x200", digest(graph(10, 200), folder))
        print("graph-3x9000", digest(graph(3, 9_000), folder))
        print("training-loop", digest(bench.record_training_loop(40), folder))
        for i in range(args.n):
            fn = compile_program(generate(program_seed(args.seed, i)))
            recorder = Recorder().attach()
            run(engine, fn)
            print(f"fuzz-{args.seed}-{i}", digest(recorder.finish(), folder))
    print(f"agdb from {os.path.dirname(engine.__file__)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
