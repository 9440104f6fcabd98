"""Runs compiled programs under `agdb fx --torch SCRIPT --json` with a recording backend of the test's own.

`python -m tests.tracer.fx.compiled_runner OUT_DIR SCRIPT...` imports torch and agdb once (with the modules a first
torch.compile imports: `import_before_fork`), then runs each script in a forked child (torch.compile's state is per
process, so each program starts from a fresh one without paying for the imports again). In the child, the script's
backend (named by FX_CORPUS_BACKEND) is a recording backend: `aot_autograd` with the default partitioner and
compilers that keep, for the graph they receive and every GraphModule in it, each node's name, op, seq_nr,
partitioner_tag, is_gradient_acc and custom. agdb's capture rides on that same compile. For each script STEM the
child writes STEM.out (agdb's stdout), STEM.err (stderr), STEM.rc (agdb's exit status) and STEM.received.json (what
the recording compilers received, in the order they received it). The recording is independent of agdb: it reads
torch's GraphModules directly and imports nothing of agdb.
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

FIRST_COMPILE_IMPORTS = (
    "torch._dynamo.repro.after_aot", "torch._dynamo.repro.after_dynamo", "torch._dynamo.dce_extra_outputs",
    "torch._inductor.scheduler", "torch._inductor.debug", "torch._inductor.compiler_bisector",
    "torch._inductor.fx_passes.dedupe_symint_uses", "torch.export._trace", "torch._export.passes._node_metadata_hook",
    "torch._functorch._aot_autograd.subclass_codegen", "torch._subclasses.schema_check_mode",
    "torch._higher_order_ops.passes.inline_invoke_subgraph", "torch.fx.experimental.validator",
    "torch.nn.attention.flex_attention", "torch.distributed.tensor.experimental",
    "agdb.app.cli", "agdb.app.fx_torch", "agdb.app.fx_report", "agdb.tracer.sources.torch.fx_run",
    "agdb.tracer.views.joint", "agdb.tracer.fx.python_op_view", "agdb.tracer.fx.seq_map",
    "agdb.tracer.fx.family_map", "agdb.tracer.replay.node_states",
)
"""Modules a process's first torch.compile (aot_autograd, a backward, agdb's capture and report) imports on the
way, in torch 2.13: imported in the parent, each forked child finds them there (about 0.15 s of CPU a child). What
a child compiles and reports is the same either way (compared output for output: only the modules' addresses in
nn_module_stack differ); a name another torch version moved is skipped."""


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


def import_before_fork() -> None:
    """Import torch, Dynamo's backends and FIRST_COMPILE_IMPORTS, for children forked after to share."""
    import importlib

    import torch._dynamo
    import torch._functorch.aot_autograd  # noqa: F401

    torch._dynamo.list_backends()  # imports every backend module, as a child's first backend lookup would
    for name in FIRST_COMPILE_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def run(out_dir: Path, scripts: list[Path]) -> None:
    import_before_fork()
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
