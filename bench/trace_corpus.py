"""Record a corpus of programs with the engine's Recorder (or, with --torch, real PyTorch programs with the bridge)
and print a digest of each saved trace, so that a change to the recorder can be checked to leave every trace byte
for byte the same.

Run it once per tree and compare the outputs (agdb is imported from wherever PYTHONPATH or the install points):

    .venv/bin/python bench/trace_corpus.py > after.txt
    PYTHONPATH=/tmp/before .venv/bin/python bench/trace_corpus.py > before.txt   # a tree with agdb/ in /tmp/before
    diff before.txt after.txt

The corpus: part 1's graph at 10 x 200 and at 3 x 9,000 (frozen chunks while recording), part 5's training loop
(40 calls), and `-n` programs of the differential fuzzer (tests/fuzz; default 150, seed 8181), each recorded from
before its first op to after its last.

--torch: the programs of tests/tracer/torch_programs.py and of tests/tracer/test_torch_bridge_lines.py (each then
runs a backward of what it returns), chains of 3,000 and 40,000 nodes (past the builder's CHUNK, so that rows and
node facts are frozen while recording), a 20,000-node retained graph run backward twice, autograd.grad and
backward(inputs=) on a chain, and a training loop; each with the default options, with values=False and
defer=True, and with culprits="mode". Each is recorded on a fresh thread (its seq_nr counter starts at 0) in one
process, in a fixed order (torch numbers graph tasks for the whole process).
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
    parser.add_argument("--torch", action="store_true", help="the bridge's corpus of real PyTorch programs instead")
    args = parser.parse_args(argv)
    if args.torch:
        return torch_main()
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


def torch_programs() -> list:
    """(name, program) of the --torch corpus: each program records nothing itself and runs its backward calls."""
    import torch

    from tests.tracer import test_torch_bridge_lines as lines
    from tests.tracer import torch_programs

    def backward_of(program):
        def run():
            out = program()
            outs = out if isinstance(out, list) else [out]
            sum(o.sum() for o in outs).backward()
        return run

    def chain(n, retain=False):
        def run():
            x = torch.ones(4, requires_grad=True)
            h = x
            for _ in range(n):
                h = h.tanh()
            loss = h.sum()
            loss.backward(retain_graph=retain)
            if retain:
                loss.backward()
        return run

    def grad_and_inputs():
        x = torch.ones(3, requires_grad=True)
        h, mid = x, None
        for i in range(2_000):
            h = h.sin() * 1.5
            if i == 700:
                mid = h
        torch.autograd.grad(h.sum(), [mid, x], retain_graph=True)
        h.sum().backward(inputs=[x])

    def training_loop():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data, target = torch.randn(6, 8), torch.tensor([0, 1, 0, 1, 1, 0])
        for _ in range(30):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(data), target).backward()
            opt.step()

    found = [(p.__name__, lambda p=p: p(lambda *tensors: None)) for p in torch_programs.PROGRAMS]
    found += [(f"lines-{p.__name__}", backward_of(p)) for p in lines.PROGRAMS]
    found += [("chain-3000", chain(3_000)), ("chain-40000", chain(40_000)), ("retained-20000", chain(20_000, True)),
              ("grad-and-inputs", grad_and_inputs), ("training-loop", training_loop)]
    return found


def torch_main() -> int:
    """--torch: the digest of each program's trace, per option set (the module's docstring)."""
    import threading

    from agdb import tracer

    options = [("default", {}), ("shapes-deferred", {"values": False, "defer": True}), ("mode", {"culprits": "mode"})]
    with tempfile.TemporaryDirectory() as folder:
        for label, opts in options:
            for name, program in torch_programs():
                box: list = []

                def run(program=program, opts=opts, box=box):
                    with tracer.record("torch", **opts) as rec:
                        try:
                            program()
                        except Exception as e:  # noqa: BLE001 - the programs that fail on purpose
                            box.append(type(e).__name__)
                    box.append(rec.trace)

                old = threading.stack_size(256 << 20)  # torch frees a deep graph recursively
                try:
                    thread = threading.Thread(target=run, name="recording")
                    thread.start()
                finally:
                    threading.stack_size(old)
                thread.join()
                trace = box.pop()
                print(f"{label}-{name}", digest(trace, folder), *box)
    print(f"agdb from {os.path.dirname(engine.__file__)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
