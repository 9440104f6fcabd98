"""Runs compiled programs under `agdb fx --torch SCRIPT --json` with a recording backend of the test's own.

`python -m tests.tracer.fx.compiled_runner OUT_DIR SCRIPT...` imports torch and agdb once, then runs each script in
a forked child (torch.compile's state is per process, so each program starts from a fresh one without paying for
the imports again). In the child, the script's backend (named by FX_CORPUS_BACKEND) is a recording backend:
`aot_autograd` with the default partitioner and compilers that keep, for the graph they receive and every
GraphModule in it, each node's name, op, seq_nr, partitioner_tag, is_gradient_acc and custom. agdb's capture rides on
that same compile. For each script STEM the child writes STEM.out (agdb's stdout), STEM.err (stderr), STEM.rc
(agdb's exit status) and STEM.received.json (what the recording compilers received, in the order they received
it). The recording is independent of agdb: it reads torch's GraphModules directly and imports nothing of agdb.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

BACKEND_ENV = "FX_CORPUS_BACKEND"
RECORDING = "agdb_test_recording"


def plain(v: Any) -> Any:
    """A `custom` value as JSON data; an object that is not plain data as `{"__object__": its type's name}`."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return {"__object__": type(v).__name__}


def node_record(n: Any) -> dict:
    meta = n.meta
    return {"name": n.name, "op": n.op, "seq_nr": meta.get("seq_nr"), "partitioner_tag": meta.get("partitioner_tag"),
            "is_gradient_acc": bool(meta.get("is_gradient_acc", False)), "custom": plain(meta.get("custom"))}


def recording_backend(received: list[dict]) -> Any:
    """An aot_autograd backend whose forward (and inference) and backward compilers append what they receive."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition

    def compiler(kind: str) -> Any:
        def compile_graph(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
            received.append({"kind": kind, "graphs": [
                {"path": path, "nodes": [node_record(n) for n in m.graph.nodes]}
                for path, m in gm.named_modules() if isinstance(m, torch.fx.GraphModule)]})
            return make_boxed_func(gm.forward)
        return compile_graph

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        partition_fn=default_partition)


def _child(script: Path, out_dir: Path) -> int:
    from torch._dynamo.backends.registry import register_backend

    from agdb.app.cli import main

    stem = out_dir / script.stem
    for fd, suffix in ((1, ".out"), (2, ".err")):
        os.dup2(os.open(str(stem) + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    received: list[dict] = []
    register_backend(recording_backend(received), RECORDING)
    os.environ[BACKEND_ENV] = RECORDING
    rc = main(["fx", "--torch", str(script), "--json"])
    sys.stdout.flush()
    Path(str(stem) + ".received.json").write_text(json.dumps(received))
    return rc


def run(out_dir: Path, scripts: list[Path]) -> None:
    import torch  # noqa: F401  (imported once, before the forks)
    import torch._dynamo  # noqa: F401
    import torch._functorch.aot_autograd  # noqa: F401

    import agdb.app.cli  # noqa: F401
    import agdb.app.fx_torch  # noqa: F401
    import agdb.tracer.sources.torch.fx_run  # noqa: F401

    for script in scripts:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            rc = 99
            try:
                rc = _child(script, out_dir)
            except BaseException:  # noqa: BLE001 - the test reads it from STEM.err
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        _, status = os.waitpid(pid, 0)
        (out_dir / f"{script.stem}.rc").write_text(str(os.waitstatus_to_exitcode(status)))


if __name__ == "__main__":
    run(Path(sys.argv[1]), [Path(s).resolve() for s in sys.argv[2:]])
