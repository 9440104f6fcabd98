"""The bridge proper: records a real PyTorch run through the TraceBuilder. Imports torch, through its parts (only
ever imported by `make_source` in tracer/sources/source.py when a recording starts, so nothing else pulls torch in).

What is observed, and how (docs/torch-bridge.md says it for users):
- seq_nr culprits: the thread's counter (`torch.autograd._get_sequence_nr()`) is read at every line of the user's
  code (lines.py, NOTE [line culprits]; or, under a debugger's trace function, around each torch call by a
  TorchFunctionMode); an increment is put on the user's line (the first frame outside torch, agdb and Python's own
  library) and its nodes are named from the tensors that line kept (or the call's outputs) and what they reach
  within the new range (forward.py). Increments neither can see are caught where they happen: `Function.apply`
  (patched while recording: its PyNode takes the counter's value at entry), the GraphRoot of a several-root
  backward and the Identity of an unreachable `inputs=` leaf (named by rule when the call begins), the node hidden
  inside CopySlices (named after the in-place op).
  Anything else shows up as a gap in the counter and is named once a graph walk meets the node.
- the graph and every backward/autograd.grad call: `torch.autograd._engine_run_backward`, through which both
  go, is wrapped while recording (patching.py); it walks the graph from the roots (walk.py), puts one pre- and
  one post-hook on each node that has none of ours yet (so once per graph, not once per backward; hooks.py), and
  removes them all at the end (backward.py).
- what torch hides: model.EngineModel, fed by the hooks (NOTE [the model and the observed order]), run after the
  call (reconstruct.py).

The parts share one BridgeState (state.py), which owns what they all read and write; Bridge composes them.
"""
from __future__ import annotations

import logging
import sys
from typing import Callable

from agdb.tracer.recording.builder import TraceBuilder
from agdb.tracer.sources.torch.backward import Backward
from agdb.tracer.sources.torch.compiling import compiled_function_rows
from agdb.tracer.sources.torch.ddp import DdpModels
from agdb.tracer.sources.torch.forward import Forward
from agdb.tracer.sources.torch.hooks import Hooks
from agdb.tracer.sources.torch.naming import LeafNames
from agdb.tracer.sources.torch.patching import Patches
from agdb.tracer.sources.torch.reconstruct import Reconstruction, by_row
from agdb.tracer.sources.torch.state import NODE, BridgeState, release_freed_memory
from agdb.tracer.sources.torch.walk import Walker
from agdb.tracer.store.schema import Kind
from agdb.tracer.store.trace import Trace

OBSERVED = (Kind.SEQ_NR_BUMPED, Kind.NODE_CREATED, Kind.GRAPH_TASK_STARTED, Kind.HOOK_RAN, Kind.NODE_STARTED,
            Kind.NODE_FINISHED, Kind.GRAD_ACCUMULATED, Kind.ERROR_RAISED, Kind.GRAPH_TASK_FINISHED)
RECONSTRUCTED = (Kind.DEPENDENCIES_COMPUTED, Kind.EXEC_INFO_COMPUTED, Kind.TASK_PUSHED, Kind.TASK_POPPED,
                 Kind.BUFFER_WRITTEN, Kind.GRAD_CAPTURED)
PROVENANCE = {**{k: "observed" for k in OBSERVED}, **{k: "reconstructed" for k in RECONSTRUCTED}}
"""HookRan events are the user's tensor hooks (tensor_hooks.py; the bridge's own Node hooks are not the user's);
a node's creation is its seq_nr increment, or, for a node that took none (AccumulateGrad) or was made before
recording, the walk that first met it."""


class Bridge:
    """Records a real PyTorch run while attached; `finish()` detaches and returns the Trace.

    NOTE [observe now, reconstruct later]
    While a backward runs, the hooks only append what they see to the thread's log (a tuple each: the node, its
    grads, the counter), so that a recorded backward costs about what bare Python hooks cost. Walking the
    model of the engine, summarising grads and writing events happens afterwards: by default when the recording
    ends, so that no backward call of the program pays for it (`defer=False`: when the outermost backward call
    returns). A waiting log keeps every grad it saw alive, so it is replayed earlier once the process has grown by
    WAITING_BYTES (NOTE [what a waiting log holds] in state.py), looked at when a call returns and every PART
    entries inside one (NOTE [replay in parts] in reconstruct.py). Increments of the counter seen while a log
    is pending go into the log too, so the trace keeps the order in which things happened.

    Options (`agdb.tracer.record("torch", **options)`):
    values: keep each grad's first values and NaN/inf flags (False: shapes and dtypes only, a little faster).
    defer: reconstruct what torch hides when the recording ends (True, the default), or before each outermost
    backward call returns (False: each call pays for its own reconstruction, and the trace holds its events as
    soon as it returns, and a long backward is replayed every PART entries: NOTE [replay in parts]).
    single_threaded: run backward calls with autograd multithreading disabled (as
    `torch.autograd.set_multithreading_enabled(False)` does), so that torch's own execution order of each is
    recorded as a second witness (docs/torch-bridge.md). On the CPU it changes nothing in what runs.
    culprits: how the forward's seq_nr increments are put on lines: "lines" (the default) reads the counter at
    each line of the user's code through `sys.settrace` (NOTE [line culprits] in lines.py); "mode" reads it
    around each torch call through a TorchFunctionMode (dearer: docs/torch-bridge.md). A trace function already
    set, such as a debugger's or coverage's, keeps its place, and the mode is used.
    modules: name the module call that made each op in its culprit (`model.fc1`; NOTE [module paths] in
    tracer/recording/module_calls.py): each module call then costs a little more (docs/benchmarks.md).
    Deep graphs: run the recorded code in `run_with_big_stack` (torch frees a deep graph recursively).
    """

    def __init__(self, values: bool = True, defer: bool = True, single_threaded: bool = False,
                 culprits: str = "lines", modules: bool = True) -> None:
        if culprits not in ("lines", "mode"):
            raise ValueError(f"culprits must be 'lines' or 'mode', not {culprits!r}")
        self.values = values
        self.defer = defer
        self.single_threaded = single_threaded
        self.culprits = culprits  # how the forward is seen: by line (NOTE [line culprits]) or by a mode
        # pack_nodes: a million-node graph's facts in columns (NOTE [packed node facts] in node_table.py)
        self.shared = BridgeState(TraceBuilder(source="torch", provenance=PROVENANCE, pack_nodes=True), values, defer)
        self.forward = Forward(self.shared)
        self.leaf_names = LeafNames(self.shared)
        self.hooks = Hooks(self.shared)
        self.walker = Walker(self.shared, self.hooks, self.forward, self.leaf_names)
        self.reconstruction = Reconstruction(self.shared, self.forward, self.walker)
        self.backward = Backward(self.shared, self.forward, self.walker, self.hooks, self.reconstruction)
        self.patches = Patches(self.shared, self.forward, self.backward, single_threaded, modules)
        self.ddp = DdpModels(self.shared, self.walker.leaf_key)  # NOTE [DDP's parameters] in ddp.py
        self.leaf_names.on_leaf = self.ddp.leaf

    def attach(self) -> Bridge:
        """Start recording on this thread (the mode is per thread; backward calls are caught on any)."""
        self.forward.log_culprits = logging.getLogger("agdb.seq_nr").isEnabledFor(logging.INFO)  # as the engine's
        self.culprits = self.patches.attach(self.culprits)
        self.ddp.attach()
        return self

    def detach(self) -> None:
        """Stop recording, reconstruct what is pending, and remove every hook the bridge put on a node."""
        self.ddp.detach()
        self.patches.detach()
        for state in self.shared.states:
            state.log.limit = sys.maxsize  # a backward running elsewhere replays no more parts (NOTE [replay in parts])
        for state in self.shared.states:
            self.forward.write_seen(state)
            if state.owner is not state:
                continue  # a pool thread's log is its caller's (NOTE [pool thread] in state.py)
            if state.log and not state.calls:
                self.reconstruction.replay(state)
            elif state.calls:  # a backward still running on its thread: its log is not replayed, but the nodes
                for entry in list(state.log):  # its walks met are made, so that no edge points at nothing
                    if entry[0] == NODE:
                        self.walker.node(entry[1], -1, *entry[2:])
            for call in state.calls:  # its graph's hooks come off now, as the retained graphs' do
                self.hooks.unhook(call.hooked)
        self.hooks.unhook_all()
        self.walker.forget()

    @property
    def num_events(self) -> int:
        """How many events were recorded so far (TraceSource)."""
        return self.shared.b.num_events

    def finish(self, progress: Callable[[int, int], None] | None = None) -> Trace:
        """Detach and freeze the trace; what the model found (divergences, by node index) goes in its meta."""
        self.detach()
        shared = self.shared
        raw = shared.raw
        index = {}
        if shared.divergences or self.ddp.keys or shared.compiled_functions:  # every key: only when rows are named
            index = {key: i for i, key in enumerate(sorted(set(raw.nodes.keys()) | set(raw.bumps)))}
        release_freed_memory()
        trace = shared.b.finish(progress)
        if shared.failures:
            trace.meta["bridge_errors"] = shared.failures[:20]
        trace.meta["divergences"] = [by_row(d, index) for d in shared.divergences]
        trace.meta["graph_tasks"] = self.reconstruction.graph_tasks
        trace.meta.update(self.ddp.meta(index))
        if shared.compile_time_calls:  # NOTE [compile-time calls] in backward.py: kept apart, not recorded as tasks
            trace.meta["compile_time_calls"] = list(shared.compile_time_calls)
        if shared.compile_seqs:  # NOTE [numbers taken while compiling] in compiling.py
            trace.meta["compile_time_seq_nrs"] = sorted([row, a, b] for row, ranges in shared.compile_seqs.items()
                                                        for a, b in ranges)
        if shared.compiled_functions:  # NOTE [compiled function nodes] in compiling.py
            trace.meta["compiled_functions"] = compiled_function_rows(trace, shared.compiled_functions,
                                                                      shared.seq_keys, index)
        dynamo_config = sys.modules.get("torch._dynamo.config")
        if dynamo_config is not None and getattr(dynamo_config, "compiled_autograd", False):
            # compiled autograd runs backward inside a compiled graph: autograd's engine runs no graph task, so
            # there is none to record (docs/torch-bridge.md, "Compiled programs")
            trace.meta["compiled_autograd"] = True
        return trace
