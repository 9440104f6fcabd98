"""Benchmark: how fast agdb's TUI paints: first paint, a step key's repaint and a jump's, on a large trace.

Run it from the repository root:

    .venv/bin/python bench/tui.py                  # full run: 100k nodes, ~1M events, 200 repeats, then a
                                                   # 1M-node trace (~6 minutes)
    .venv/bin/python bench/tui.py --quick          # 2k nodes, ~20k events, 20 repeats: ~20 s
    .venv/bin/python bench/tui.py --nodes 20000 --repeats 50 --json out.json
    .venv/bin/python bench/tui.py --only-big --big-trace big.agdb   # part 4 alone, on a trace saved before
                                                   # (made and saved by the first run if it does not exist)

Options of this benchmark: ``--nodes N`` (backward nodes; default 100,000, ``--quick`` 2,000), ``--events E``
(events wanted; default 10 per node), ``--repeats R`` (timed samples of every key and jump measurement;
default 200, ``--quick`` 20), ``--only-big`` (part 4 alone), ``--big-nodes N`` (part 4's nodes when it records
its trace; default 1,000,000, ``--quick`` 20,000), ``--big-trace PATH`` (part 4's trace: loaded
from PATH if it exists, else recorded and saved there, so that runs of two versions of agdb can share it); and
the shared ones: ``--reps`` (first-paint runs of each kind; default 3,
``--quick`` 1), ``--quick`` and ``--json PATH``.

The trace
---------
bench/tracer.py's graph (``build_graph``: a leaf x of shape (4,), branches of cheap ops cycling through
``*1.0001``, ``+0.5`` and ``sin``, summed): 100 branches (fewer below 100k nodes) sized to ``--nodes``, recorded
forward and backward by a ``Recorder``. That graph gives 7 events per node; to reach ``--events`` (the
issue's 100k nodes / 1M events) every backward node also gets identity pre-hooks (``Node.register_prehook``,
returning None), each recorded as a HookRan event. The trace is saved to bytes once; every app below opens
a fresh copy (``tracefile.loads``), so no run inherits another's lazily built indexes.

What is measured
----------------
All in one process, ``AgdbApp(trace=trace).run_test(size=(120, 40))`` (headless Textual, a 120x40 screen), the
garbage collector left on (as for a user). "Repaint" below means: the screen's pending layout and partial
update done (``Screen._on_timer_update``, what Textual's update timer does) and then a forced full render of
the screen (``screen._compositor.render_update(full=True)``: every visible widget renders its visible lines,
the strips are chopped; in a headless app nothing is written to a terminal, so ANSI encoding is not counted).

Two ways to drive the app are timed, side by side:

* **direct** (the figures checked against the targets): the key event is posted to the app
  (``app.post_message(events.Key(...))``, as the driver does), then the app is *settled*: the benchmark
  yields to the event loop (``asyncio.sleep(0)``, never a real sleep) until the app and every widget of the
  screen have an empty message queue and wait for the next message; then the repaint. (Pilot's
  ``_wait_for_screen`` would post a callback to each of the ~45 widgets and wait for them all, ~5 ms a round
  that the app never spends on a key.)
* **pilot**: ``await pilot.press(key)``, ``await pilot.pause()``, then the forced full render. Pilot waits for
  the process to look idle (``wait_for_idle``: sleeps of 20 ms until less than 1 ms of CPU was used in one):
  press sleeps at least twice and pause once, so a pilot figure is at least ~60 ms and moves in ~20 ms steps.
  Its fixed overhead is measured with a key bound to nothing (``f9``) and, for jumps, ``pause`` + render with
  nothing changed; the "minus overhead" figures subtract the median overhead from every sample. The direct
  way has its own (small) overhead, the unbound key measured the same way: shown, not subtracted.

1. **First paint** (target: 500 ms), ``--reps`` runs of each way: from calling ``run_test`` (app start-up,
   TraceLoaded, StepScreen constructed and pushed) until ``isinstance(app.screen, StepScreen)``, then settled
   and repainted (direct) or ``pilot.pause()`` and the full render (pilot). Also shown: the time spent in
   ``StepScreen.__init__`` and in ``StepScreen.on_mount`` (the first ``state_at`` and every panel's ``show``),
   timed by wrapping these two methods in this process; and, on one more fresh trace, the three parts of
   ``__init__`` in its order: ``Replay(trace)``, ``trace.steps_of(NodeStarted)``, ``culprits.of_trace(trace)``.
   Each run checks that the painted screen shows the title and "step 0/". The same first paint, direct, is
   also timed on a training loop's trace: 1,000 small backward calls (``--quick``: 30), ~0.97M events, made
   by bench/tracer.py's ``record_training_loop`` (target: 500 ms, the median of ``--reps`` runs).
2. **Step repaint** (target: 22 ms, one 60 fps frame + 5 ms): keys ``l`` (next event) and ``n`` (next node
   run), each ``--repeats`` times, each from a random step set untimed just before (``screen.step = k``,
   settled and repainted; ``l`` from any step but the last, ``n`` from one before the last node run). The
   state after ``k`` is then in the Replay's cache, the one after the key usually not.
   Keys and jumps are timed with the graph panel's drawing on screen: a trace this large is laid out in a
   worker once the user pauses (widgets/graph_canvas.py), and the benchmark waits for it, untimed, first.
3. **Jump** (target: 25 ms): ``screen.step = s`` and the repaint, ``--repeats`` times: *warm*, ``s`` a random
   step whose state the Replay has cached (``replay.state_at(s)`` called untimed just before: as when going back
   to a step seen a moment ago); *cold*, ``s`` a step never visited, the Replay's ``_cache`` cleared first.

4. **A 1M-node trace** (issue 17 item 8; ``--quick``: 20k nodes): bench/tracer.py's graph of ``--big-nodes``
   nodes recorded plainly (7 events a node, ~7M events), saved and loaded: the first paint, direct, as in
   part 1 (target: 1 s), then the first ``l`` key, direct (target: one frame, 22 ms), once each; then at once
   the first ``n`` (the first step inside the backward). Then, each on a fresh app of a freshly loaded trace,
   right after the first paint: the first ``n`` (target: one frame, 22 ms: answered from indexes of a prefix of
   the trace, NOTE [prefix indexes] in tracer/store/indexes.py), the first ``G`` (information: a jump to the last
   event, which needs the whole trace's node runs and history; its queues start where every queue is empty,
   NOTE [empty queues] in tracer/replay/replay.py) and a second ``n`` after the first (information: what a step into
   the backward costs once its indexes exist). All come before the graph panel's layout worker starts (it
   waits for a pause): the panel says it is laying out. Last, on one more fresh app: 20 ``n`` keys in a row
   right after the first paint (target: their p95 within one frame, 22 ms: a step costs what the screen shows,
   not what the graph task counts, NOTE [counts at a step] in tracer/store/tasks.py and NOTE [stepping the states]
   in tracer/replay/node_states.py), then, once the graph panel has drawn its (folded) layout, 20 more (same target).

One repeat times every measurement once, in both ways, interleaved, so that the machine's load hits them
alike (seed 0). p50, p95, p99 and max are reported; a target is checked against the direct p95 (for first
paint: the median of the direct runs). A missed target is reported, not raised: this is a benchmark, not a test.
The load average is printed: the machine is shared and other work moves these numbers.
"""
from __future__ import annotations

import asyncio
import functools
import gc
import math
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import textual
from _common import bench_main, load_bench_module, print_target_table
from textual import events

from agdb.app.app import AgdbApp
from agdb.app.screens.step import StepScreen
from agdb.tracer.recording import culprits as culprits_mod
from agdb.tracer.replay.replay import Replay
from agdb.tracer.sources.engine import Recorder
from agdb.tracer.store import tracefile
from agdb.tracer.store.schema import Kind

bench_tracer = load_bench_module("tracer")

FIRST_PAINT_TARGET_MS = 500.0
STEP_TARGET_MS = 22.0
JUMP_TARGET_MS = 25.0
SIZE = (120, 40)
CHAINS = 100
PLAIN_EVENTS_PER_NODE = 7  # per build_graph node: bump, created, pushed, popped, buffer written, started, finished
EVENTS_PER_NODE = 10
UNBOUND_KEY = "f9"
SETTLE_ROUNDS = 100_000
SCREEN_TIMEOUT_S = 300.0

BIG_PAINT_TARGET_MS = 1_000.0
BIG_PRESSES = 20
"""n keys pressed in a row on the big trace, right after the first paint and again with the graph drawn."""
FULL = {"nodes": 100_000, "repeats": 200, "paint_reps": 3, "loop_calls": 1_000, "big_nodes": 1_000_000}
QUICK = {"nodes": 2_000, "repeats": 20, "paint_reps": 1, "loop_calls": 30, "big_nodes": 20_000}


# -- the trace ---------------------------------------------------------------------------------------------
def _noop_prehook(grad_outputs: Any) -> None:
    """An identity pre-hook: each call is one HookRan event."""
    return None


def _graph_nodes(root: Any) -> list:
    seen = {id(root): root}
    stack = [root]
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return list(seen.values())


def record_trace(nodes: int, events: int) -> tuple[Any, dict]:
    """bench/tracer.py's graph with about `nodes` nodes, padded with pre-hooks to about `events` events."""
    chains = max(1, min(CHAINS, nodes // 1_000))
    length = max(1, math.ceil((nodes - chains - 1) / chains))
    t0 = time.perf_counter()
    recorder = Recorder().attach()
    loss = bench_tracer.build_graph(chains, length)
    graph = _graph_nodes(loss.grad_fn)
    extra = max(0, events - PLAIN_EVENTS_PER_NODE * len(graph))
    per, rest = divmod(extra, len(graph))
    for i, node in enumerate(graph):
        for _ in range(per + (i < rest)):
            node.register_prehook(_noop_prehook)
    loss.backward()
    trace = recorder.finish()
    del loss, graph, recorder
    gc.collect()
    return trace, {"chains": chains, "length": length, "nodes": int(trace.num_nodes), "events": len(trace),
                   "hooks": extra, "record_s": time.perf_counter() - t0}


# -- driving the app ---------------------------------------------------------------------------------------
def _now() -> int:
    return time.perf_counter_ns()


def _idle(pump: Any) -> bool:
    """Whether a message pump has handled everything sent to it: nothing queued or held back, and its task
    parked in the queue's get() (Textual's Queue waits on an asyncio.Event, whose `_waiters` holds the
    future of a task waiting on it until that task runs again)."""
    queue = pump._message_queue
    return queue.empty() and pump._pending_message is None and any(
        not w.done() for w in queue.ready_event._waiters)


async def _settle(app: Any, pilot: Any) -> None:
    """Yield to the event loop until the app and every widget of the screen are idle, without sleeping.

    Pilot's own `_wait_for_screen` sends a callback to each of the ~45 widgets and waits for all of them: about
    5 ms a round here, which the app never spends on a key. Looking at the queues costs ~50 us a round.
    """
    for _ in range(SETTLE_ROUNDS):
        await asyncio.sleep(0)
        if all(_idle(pump) for pump in (app, *app.screen.walk_children(with_self=True))):
            return
    raise RuntimeError(f"the app did not settle in {SETTLE_ROUNDS} rounds of the event loop")


def _update(app: Any) -> None:
    """The pending layout and partial repaint, as Textual's update timer does."""
    app.screen._on_timer_update()


def _full_render(app: Any) -> None:
    """Render the whole screen: every visible widget's visible lines, chopped into strips."""
    app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)


def _screen_text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def _direct(app: Any, pilot: Any, act: Callable[[], None]) -> list[int]:
    """Time act(), the settling, the update and the full render: [total, handle, update, full] ns."""
    t0 = _now()
    act()
    await _settle(app, pilot)
    t1 = _now()
    _update(app)
    t2 = _now()
    _full_render(app)
    t3 = _now()
    return [t3 - t0, t1 - t0, t2 - t1, t3 - t2]


async def _piloted(app: Any, pilot: Any, key: str | None, act: Callable[[], None] | None = None) -> int:
    """Time pilot.press(key) (or act()), pilot.pause() and the full render, ns."""
    t0 = _now()
    if key is not None:
        await pilot.press(key)
    if act is not None:
        act()
    await pilot.pause()
    _full_render(app)
    return _now() - t0


async def _go(app: Any, pilot: Any, step: int) -> None:
    """Untimed: move to `step`, settled and repainted."""
    app.screen.step = step
    await _settle(app, pilot)
    _update(app)
    _full_render(app)


def _key(name: str) -> events.Key:
    return events.Key(name, name if len(name) == 1 else None)


# -- 1. first paint ----------------------------------------------------------------------------------------
class _MethodTimer:
    """Wraps StepScreen.__init__ and on_mount in this process and records how long each call took."""

    NAMES = ("__init__", "on_mount")

    def __init__(self) -> None:
        self.ns: dict[str, list[int]] = {name: [] for name in self.NAMES}
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> _MethodTimer:
        for name in self.NAMES:
            original = StepScreen.__dict__[name]
            self.saved[name] = original

            def timed(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
                t0 = _now()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.ns[_name].append(_now() - t0)

            setattr(StepScreen, name, functools.wraps(original)(timed))
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, original in self.saved.items():
            setattr(StepScreen, name, original)


async def _first_paint(trace: Any, way: str) -> dict:
    """One app run: ms until StepScreen is the screen and until it is painted, `way` = direct or pilot."""
    app = AgdbApp(trace=trace)
    with _MethodTimer() as timer:
        t0 = _now()
        async with app.run_test(size=SIZE) as pilot:
            t_enter = _now()
            while not isinstance(app.screen, StepScreen):
                if _now() - t0 > SCREEN_TIMEOUT_S * 1e9:
                    raise RuntimeError("StepScreen never came")
                await asyncio.sleep(0)
            t_screen = _now()
            if way == "direct":
                await _settle(app, pilot)
                _update(app)
            else:
                await pilot.pause()
            _full_render(app)
            t_painted = _now()
            text = _screen_text(app)
    ms = 1e-6
    return {"way": way, "enter_ms": (t_enter - t0) * ms, "screen_ms": (t_screen - t0) * ms,
            "painted_ms": (t_painted - t0) * ms, "init_ms": sum(timer.ns["__init__"]) * ms,
            "on_mount_ms": sum(timer.ns["on_mount"]) * ms,
            "painted_ok": "agdb ·" in text and "step 0/" in text}


def _init_parts(trace: Any) -> dict:
    """The parts of StepScreen.__init__, in its order, on a fresh trace: ms."""
    gc.collect()
    t0 = _now()
    Replay(trace)
    t1 = _now()
    trace.steps_of(Kind.NODE_STARTED)
    t2 = _now()
    culprits_mod.of_trace(trace)
    t3 = _now()
    return {"Replay(trace)": (t1 - t0) / 1e6, "trace.steps_of(NodeStarted)": (t2 - t1) / 1e6,
            "culprits.of_trace(trace)": (t3 - t2) / 1e6}


async def _big_first_paint_and_step(trace: Any) -> dict:
    """Part 4: the first paint (direct), the first `l` key (direct), then at once the first `n` (direct) of one app
    on `trace`."""
    after: dict = {}

    async def keys(app: Any, pilot: Any) -> list[int]:
        first_l = await _direct(app, pilot, lambda: app.post_message(_key("l")))
        after["moved"] = app.screen.step == 1
        after["n_ns"] = (await _direct(app, pilot, lambda: app.post_message(_key("n"))))[0]
        return first_l

    paint = await _first_paint_then(trace, keys)
    paint["step_moved"] = after["moved"]
    paint["first_n_ms"] = after["n_ns"] / 1e6
    return paint


async def _big_first_keys(load: Callable[[], Any]) -> dict:
    """Part 4, right after the first paint of a fresh app on a freshly loaded trace each: the first n, the first G,
    and a second n after a first one (ms, direct)."""
    out: dict = {}
    for name, keys in (("first_n_after_paint_ms", ("n",)), ("first_G_after_paint_ms", ("G",)),
                       ("second_n_ms", ("n", "n"))):
        async def press(app: Any, pilot: Any, keys: tuple = keys) -> list[int]:
            timed: list[int] = []
            for key in keys:
                timed = await _direct(app, pilot, lambda key=key: app.post_message(_key(key)))
            return timed

        trace = load()
        gc.collect()
        out[name] = (await _first_paint_then(trace, press))["first_step_ms"]
        del trace
        gc.collect()
    return out


async def _big_consecutive_n(trace: Any, presses: int) -> dict:
    """Part 4: `presses` n keys in a row right after the first paint (direct, each timed), then, once the graph
    panel has drawn its layout (waited for untimed; the replay's warm-up runs meanwhile), as many again (ms)."""
    out: dict = {}

    async def press(app: Any, pilot: Any) -> list[int]:
        for phase in ("after_paint", "drawn"):
            if phase == "drawn":
                out["drawn_boxes"] = await _wait_for_graph_layout(app, pilot)
            timed = []
            for _ in range(presses):
                timed.append((await _direct(app, pilot, lambda: app.post_message(_key("n"))))[0] / 1e6)
            out[f"{phase}_ms"] = timed
        out["last_step"] = app.screen.step
        return [0]

    await _first_paint_then(trace, press)
    return out


async def _first_paint_then(trace: Any, then: Any) -> dict:
    app = AgdbApp(trace=trace)
    t0 = _now()
    async with app.run_test(size=SIZE) as pilot:
        while not isinstance(app.screen, StepScreen):
            if _now() - t0 > SCREEN_TIMEOUT_S * 1e9:
                raise RuntimeError("StepScreen never came")
            await asyncio.sleep(0)
        await _settle(app, pilot)
        _update(app)
        _full_render(app)
        painted = _now()
        ok = "step 0/" in _screen_text(app)
        step_ns = (await then(app, pilot))[0]
        moved = app.screen.step == 1
    return {"painted_ms": (painted - t0) / 1e6, "painted_ok": ok, "first_step_ms": step_ns / 1e6,
            "step_moved": moved}


# -- 2 and 3. keys and jumps -------------------------------------------------------------------------------
DIRECT = ("overhead: unbound key", "step l", "step n", "jump warm", "jump cold")
PILOT = ("overhead: unbound key", "overhead: pause", "step l", "step n", "jump warm", "jump cold")


async def _interaction(trace: Any, repeats: int) -> dict:
    rng = random.Random(0)
    n = len(trace)
    node_steps = trace.steps_of(Kind.NODE_STARTED)
    last_node_step = int(node_steps[-1]) if len(node_steps) else 0
    direct: dict[str, list[list[int]]] = {name: [] for name in DIRECT}
    pilot_ns: dict[str, list[int]] = {name: [] for name in PILOT}
    moved = {"l": 0, "n": 0, "tries": 0}
    visited: set[int] = set()

    def fresh_step() -> int:
        for _ in range(1000):
            s = rng.randrange(n)
            if s not in visited:
                visited.add(s)
                return s
        return rng.randrange(n)

    def before(limit: int) -> int:
        s = rng.randrange(max(1, limit))
        visited.add(s)
        return s

    app = AgdbApp(trace=trace)
    async with app.run_test(size=SIZE) as pilot:
        while not isinstance(app.screen, StepScreen):
            await asyncio.sleep(0)
        await _settle(app, pilot)
        graph_boxes = await _wait_for_graph_layout(app, pilot)
        screen = app.screen
        replay = screen.replay

        def jump_to(step: int) -> Callable[[], None]:
            def act() -> None:
                screen.step = step
            return act

        async def keyed(key: str, start: int, way: str) -> None:
            await _go(app, pilot, start)
            if way == "direct":
                direct[f"step {key}"].append(await _direct(app, pilot, lambda: app.post_message(_key(key))))
            else:
                pilot_ns[f"step {key}"].append(await _piloted(app, pilot, key))
            moved[key] += screen.step != start
            moved["tries"] += key == "l"

        async def jump(kind: str, way: str) -> None:
            target = fresh_step()
            if screen.step == target:
                await _go(app, pilot, (target + 1) % n)
            if kind == "warm":
                replay.state_at(target)
            else:
                bench_tracer._clear_cache(replay)
            if way == "direct":
                direct[f"jump {kind}"].append(await _direct(app, pilot, jump_to(target)))
            else:
                pilot_ns[f"jump {kind}"].append(await _piloted(app, pilot, None, jump_to(target)))

        for _ in range(repeats):
            for way in ("direct", "pilot"):
                await _go(app, pilot, fresh_step())
                if way == "direct":
                    direct["overhead: unbound key"].append(
                        await _direct(app, pilot, lambda: app.post_message(_key(UNBOUND_KEY))))
                else:
                    pilot_ns["overhead: unbound key"].append(await _piloted(app, pilot, UNBOUND_KEY))
                    pilot_ns["overhead: pause"].append(await _piloted(app, pilot, None))
                await keyed("l", before(n - 1), way)
                await keyed("n", before(last_node_step), way)
                await jump("warm", way)
                await jump("cold", way)
    return {"direct": direct, "pilot": pilot_ns, "moved": moved, "graph_boxes": graph_boxes}


async def _wait_for_graph_layout(app: Any, pilot: Any) -> int:
    """Wait, untimed, until the graph panel draws its layout, so that keys and jumps are timed with the drawn
    graph on screen: a large trace is laid out in a worker once the user pauses (widgets/graph_canvas.py,
    NOTE [layout when idle]). Returns how many boxes it draws."""
    graph = app.screen.query_one("#graph")
    t0 = time.perf_counter()
    while graph.picture is None:
        if time.perf_counter() - t0 > SCREEN_TIMEOUT_S:
            raise RuntimeError("the graph panel never finished its layout")
        await asyncio.sleep(0.05)
    await _settle(app, pilot)
    return graph.picture.num_boxes


# -- figures -----------------------------------------------------------------------------------------------
def _stats(ms: list[float]) -> dict:
    arr = np.asarray(ms, dtype=np.float64)
    return {"n": int(arr.size), "p50_ms": float(np.percentile(arr, 50)), "p95_ms": float(np.percentile(arr, 95)),
            "p99_ms": float(np.percentile(arr, 99)), "max_ms": float(arr.max()), "mean_ms": float(arr.mean())}


def _summarize(raw: dict) -> dict:
    out: dict[str, dict] = {}
    for name, samples in raw["direct"].items():
        arr = np.asarray(samples, dtype=np.float64) / 1e6  # columns: total, handle, update, full render
        out[f"{name}, direct"] = {**_stats(arr[:, 0].tolist()), "times_ms": arr[:, 0].tolist(),
                                  "parts_p50_ms": {part: float(np.median(arr[:, i]))
                                                   for i, part in enumerate(("handle", "update", "full_render"), 1)}}
    key_over = float(np.median(raw["pilot"]["overhead: unbound key"])) / 1e6
    pause_over = float(np.median(raw["pilot"]["overhead: pause"])) / 1e6
    for name, samples in raw["pilot"].items():
        ms = [s / 1e6 for s in samples]
        out[f"{name}, pilot"] = {**_stats(ms), "times_ms": ms}
        if not name.startswith("overhead"):
            over = key_over if name.startswith("step") else pause_over
            less = [t - over for t in ms]
            out[f"{name}, pilot minus overhead"] = {**_stats(less), "overhead_ms": over, "times_ms": less}
    return out


def run_big(sizes: dict, big_trace: str | None = None) -> dict:
    """Part 4: the big trace (recorded, or loaded from `big_trace` if that file exists, else saved there)."""
    if big_trace is not None and Path(big_trace).exists():
        info: dict = {"loaded_from": big_trace, "record_s": 0.0}
        path = Path(big_trace)
        probe = tracefile.load(path)
        info.update(nodes=int(probe.num_nodes), events=len(probe))
        del probe
        return {**info, **_big_runs(path)}
    trace, info = record_trace(sizes["big_nodes"], PLAIN_EVENTS_PER_NODE * sizes["big_nodes"])
    with tempfile.TemporaryDirectory(prefix="agdb-bench-tui-") as tmp:
        path = Path(big_trace) if big_trace is not None else Path(tmp) / "big.agdb"
        tracefile.save(trace, path)
        del trace
        gc.collect()
        return {**info, **_big_runs(path)}


def _big_runs(path: Path) -> dict:
    out = asyncio.run(_big_first_paint_and_step(tracefile.load(path)))
    out.update(asyncio.run(_big_first_keys(lambda: tracefile.load(path))))
    gc.collect()
    consecutive = asyncio.run(_big_consecutive_n(tracefile.load(path), BIG_PRESSES))
    out["consecutive_n"] = {"presses": BIG_PRESSES, "drawn_boxes": consecutive["drawn_boxes"],
                            "after_paint": _stats(consecutive["after_paint_ms"]),
                            "drawn": _stats(consecutive["drawn_ms"])}
    return out


def _big_rows(big_info: dict) -> list[tuple[str, float, float | None]]:
    nodes = f"{big_info['nodes']:,}-node trace"
    return [
        (f"first paint, {nodes} ({big_info['events']:,} events), direct", big_info["painted_ms"],
         BIG_PAINT_TARGET_MS),
        (f"first step l, {nodes}, direct", big_info["first_step_ms"], STEP_TARGET_MS),
        (f"  then the first n (into the backward), {nodes}", big_info["first_n_ms"], None),
        (f"first n right after the first paint, {nodes}, direct", big_info["first_n_after_paint_ms"],
         STEP_TARGET_MS),
        (f"  a second n after it, {nodes}", big_info["second_n_ms"], None),
        (f"first G (to the last event) right after the first paint, {nodes}", big_info["first_G_after_paint_ms"],
         None),
        *_consecutive_rows(big_info, nodes),
    ]


def _consecutive_rows(big_info: dict, nodes: str) -> list[tuple[str, float, float | None]]:
    """The rows of the consecutive n keys (absent from the results of an older bench/tui.py)."""
    runs = big_info.get("consecutive_n")
    if runs is None:
        return []
    count = runs["presses"]
    return [(f"{count} consecutive n right after the first paint, {nodes}, direct p95", runs["after_paint"]["p95_ms"],
             STEP_TARGET_MS),
            ("  their p50 (after the first paint)", runs["after_paint"]["p50_ms"], None),
            (f"{count} consecutive n, graph drawn ({runs['drawn_boxes']:,} boxes), {nodes}, direct p95",
             runs["drawn"]["p95_ms"], STEP_TARGET_MS),
            ("  their p50 (graph drawn)", runs["drawn"]["p50_ms"], None)]


def _checks(result: dict, rows: list[tuple[str, float, float | None]]) -> dict:
    """The target checks and the information rows of `rows` (name, value, target or None), into `result`."""
    result["checks"] = [{"name": name, "value": value, "unit": "ms", "target": target, "met": value <= target}
                        for name, value, target in rows if target is not None]
    result["info"] = [{"name": name, "value": value, "unit": "ms"} for name, value, target in rows
                      if target is None]
    result["table"] = [name for name, *_ in rows]
    return result


def run(quick: bool, reps: int | None, nodes: int | None = None, events: int | None = None,
        repeats: int | None = None, only_big: bool = False, big_trace: str | None = None,
        big_nodes: int | None = None) -> dict:
    sizes = dict(QUICK if quick else FULL)
    if big_nodes is not None:
        sizes["big_nodes"] = big_nodes
    if nodes is not None:
        sizes["nodes"] = nodes
    sizes["events"] = events if events is not None else EVENTS_PER_NODE * sizes["nodes"]
    if repeats is not None:
        sizes["repeats"] = repeats
    if reps is not None:
        sizes["paint_reps"] = reps
    load_before = os.getloadavg()
    started = time.perf_counter()
    if only_big:
        big_info = run_big(sizes, big_trace)
        result = {"meta": _meta(quick, sizes, load_before, started), "big": big_info}
        return _checks(result, _big_rows(big_info))

    trace, trace_info = record_trace(sizes["nodes"], sizes["events"])
    with tempfile.TemporaryDirectory(prefix="agdb-bench-tui-") as tmp:
        path = Path(tmp) / "bench.agdb"
        tracefile.save(trace, path)
        data = path.read_bytes()
    del trace
    gc.collect()

    def fresh() -> Any:
        return tracefile.loads(data)

    async def measure() -> tuple[list[dict], dict]:
        paints = []
        for _ in range(sizes["paint_reps"]):
            for way in ("direct", "pilot"):
                paints.append(await _first_paint(fresh(), way))
                gc.collect()
        return paints, await _interaction(fresh(), sizes["repeats"])

    paints, raw = asyncio.run(measure())
    loop_trace = bench_tracer.record_training_loop(sizes["loop_calls"])
    with tempfile.TemporaryDirectory(prefix="agdb-bench-tui-") as tmp:
        path = Path(tmp) / "loop.agdb"
        tracefile.save(loop_trace, path)
        loop_data = path.read_bytes()
    loop_info = {"calls": sizes["loop_calls"], "events": len(loop_trace), "nodes": loop_trace.num_nodes}
    del loop_trace

    async def measure_loop() -> list[dict]:
        out = []
        for _ in range(sizes["paint_reps"]):
            out.append(await _first_paint(tracefile.loads(loop_data), "direct"))
            gc.collect()
        return out

    loop_paints = asyncio.run(measure_loop())
    loop_info["first_paint_median_ms"] = float(np.median([p["painted_ms"] for p in loop_paints]))
    loop_info["painted_ok"] = all(p["painted_ok"] for p in loop_paints)
    parts = _init_parts(fresh())
    interaction = _summarize(raw)
    gc.collect()
    big_info = run_big(sizes, big_trace)

    direct_paint = [p["painted_ms"] for p in paints if p["way"] == "direct"]
    pilot_paint = [p["painted_ms"] for p in paints if p["way"] == "pilot"]
    pause_over = interaction["jump warm, pilot minus overhead"]["overhead_ms"]
    first = {
        "runs": paints, "init_parts_ms": parts,
        "direct_median_ms": float(np.median(direct_paint)), "pilot_median_ms": float(np.median(pilot_paint)),
        "pilot_minus_pause_median_ms": float(np.median(pilot_paint)) - pause_over,
        "init_median_ms": float(np.median([p["init_ms"] for p in paints])),
        "on_mount_median_ms": float(np.median([p["on_mount_ms"] for p in paints])),
        "painted_ok": all(p["painted_ok"] for p in paints),
    }
    moved = raw["moved"]
    result: dict = {
        "meta": _meta(quick, sizes, load_before, started),
        "targets": {"first_paint_ms": FIRST_PAINT_TARGET_MS, "step_ms": STEP_TARGET_MS, "jump_ms": JUMP_TARGET_MS},
        "trace": trace_info, "first_paint": first, "interaction": interaction, "training_loop": loop_info,
        "big": big_info,
        "keys_moved": {"l": moved["l"], "n": moved["n"], "presses": moved["tries"]},
        "graph_boxes": raw["graph_boxes"],
    }
    # (name, value, target or None): a None target is information, shown in the table but not checked.
    i = interaction
    rows = [
        ("first paint, direct (median)", first["direct_median_ms"], FIRST_PAINT_TARGET_MS),
        ("first paint, pilot (median)", first["pilot_median_ms"], None),
        ("  of which StepScreen.__init__", first["init_median_ms"], None),
        ("  of which StepScreen.on_mount", first["on_mount_median_ms"], None),
        (f"first paint, training loop of {loop_info['calls']:,} backward calls, {loop_info['events']:,} events "
         "(direct, median)", loop_info["first_paint_median_ms"], FIRST_PAINT_TARGET_MS),
        ("step l, direct p95", i["step l, direct"]["p95_ms"], STEP_TARGET_MS),
        ("step n, direct p95", i["step n, direct"]["p95_ms"], STEP_TARGET_MS),
        ("jump warm, direct p95", i["jump warm, direct"]["p95_ms"], JUMP_TARGET_MS),
        ("jump cold, direct p95", i["jump cold, direct"]["p95_ms"], JUMP_TARGET_MS),
        *_big_rows(big_info),
    ]  # the pilot figures stay in the listing above: quantized to Pilot's 20 ms sleeps, they check nothing
    return _checks(result, rows)


def _meta(quick: bool, sizes: dict, load_before: tuple, started: float) -> dict:
    return {
        "quick": quick, "sizes": sizes, "size": list(SIZE), "python": platform.python_version(),
        "numpy": np.__version__, "textual": textual.__version__, "platform": platform.platform(),
        "cpus": os.cpu_count(), "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
        "wall_s": time.perf_counter() - started,
        "note": "shared, noisy machine: other work moves these numbers; gc enabled",
    }


# -- report ------------------------------------------------------------------------------------------------
def _fmt(value: float) -> str:
    return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"


def print_report(result: dict) -> None:
    meta = result["meta"]
    print(f"agdb TUI benchmark ({'quick' if meta['quick'] else 'full'}; python {meta['python']}, textual "
          f"{meta['textual']}, numpy {meta['numpy']}, {meta['cpus']} CPUs, load average "
          f"{meta['loadavg_before'][0]:.2f} before / {meta['loadavg_after'][0]:.2f} after; {meta['wall_s']:.0f} s)")
    print(f"note: {meta['note']}")
    if "trace" not in result:  # --only-big
        _print_big(result["big"])
        print_target_table(result, lambda row: _fmt(row["value"]) + " ms", lambda row: f"<= {row['target']:g} ms",
                           target_width=12)
        return
    tr, first, inter = (result[k] for k in ("trace", "first_paint", "interaction"))
    sizes = meta["sizes"]
    print(f"trace: {tr['nodes']:,} nodes, {tr['events']:,} events ({tr['chains']} x {tr['length']} graph of "
          f"bench/tracer.py, {tr['hooks']:,} pre-hook events added; recorded in {tr['record_s']:.1f} s); "
          f"screen {meta['size'][0]}x{meta['size'][1]}, headless")
    print()
    runs = first["runs"]
    print(f"1. first paint, ms from run_test() to StepScreen painted ({sizes['paint_reps']} run(s) of each way):")
    for way in ("direct", "pilot"):
        mine = [r for r in runs if r["way"] == way]
        print(f"   {way:<7} " + "  ".join(
            f"[{r['painted_ms']:.0f} (screen up {r['screen_ms']:.0f}; __init__ {r['init_ms']:.0f}, on_mount "
            f"{r['on_mount_ms']:.0f})]" for r in mine))
    print(f"   pilot minus pause overhead (median): {first['pilot_minus_pause_median_ms']:.0f} ms; painted screen "
          f"shows the title and step 0: {first['painted_ok']}")
    print("   StepScreen.__init__ parts, once on a fresh trace: "
          + ", ".join(f"{k} {v:.0f} ms" for k, v in first["init_parts_ms"].items()))
    print()
    print(f"2-3. keys and jumps to the finished repaint, {sizes['repeats']} samples each (ms); "
          f"keys that moved the step: l {result['keys_moved']['l']}, n {result['keys_moved']['n']} "
          f"of {result['keys_moved']['presses']} presses; the graph panel draws {result['graph_boxes']:,} boxes")
    header = f"   {'measurement':<44}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}   direct p50 parts: handle/update/full"
    print(header)
    for name, s in inter.items():
        parts = s.get("parts_p50_ms")
        tail = "   " + " / ".join(f"{v:.2f}" for v in parts.values()) if parts else ""
        if "overhead_ms" in s:
            tail = f"   (minus {s['overhead_ms']:.1f})"
        print(f"   {name:<44}{_fmt(s['p50_ms']):>9}{_fmt(s['p95_ms']):>9}{_fmt(s['p99_ms']):>9}"
              f"{_fmt(s['max_ms']):>9}{tail}")
    print("   (pilot: press sleeps >= 2 x 20 ms and pause >= 20 ms until the process looks idle, so its figures "
          "move in ~20 ms steps,\n    and so does the median overhead subtracted from them: the 'minus overhead' "
          "figures are rough; direct: no sleeps)")
    print()
    _print_big(result["big"])
    print_target_table(result, lambda row: _fmt(row["value"]) + " ms", lambda row: f"<= {row['target']:g} ms",
                       target_width=12)
    if tr["events"] < 900_000 or tr["nodes"] < 90_000:
        print(f"(a {tr['nodes']:,}-node, {tr['events']:,}-event trace: the targets are for ~100k nodes and ~1M "
              f"events: run without --quick/--nodes)")


def _print_big(big: dict) -> None:
    made = f"loaded from {big['loaded_from']}" if big.get("loaded_from") else f"recorded in {big['record_s']:.0f} s"
    print(f"4. {big['nodes']:,}-node trace, {big['events']:,} events ({made}): first paint {big['painted_ms']:.0f} ms "
          f"(shows step 0: {big['painted_ok']}), then the first l key {big['first_step_ms']:.1f} ms (moved to step 1: "
          f"{big['step_moved']}), then the first n {big['first_n_ms']:.0f} ms; fresh apps, right after the first "
          f"paint: the first n {big['first_n_after_paint_ms']:.1f} ms (a second n {big['second_n_ms']:.1f} ms), the "
          f"first G {big['first_G_after_paint_ms']:.0f} ms")
    runs = big.get("consecutive_n")
    if runs is not None:
        for phase, what in (("after_paint", "right after the first paint"),
                            ("drawn", f"once the graph panel drew its {runs['drawn_boxes']:,} boxes")):
            s = runs[phase]
            print(f"   {runs['presses']} n keys in a row, {what}: p50 {s['p50_ms']:.1f}, p95 {s['p95_ms']:.1f}, "
                  f"max {s['max_ms']:.1f} ms")
    print()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line."""
    import argparse

    own = argparse.ArgumentParser(prog="bench/tui.py", add_help=False)
    own.add_argument("--nodes", type=int, default=None,
                     help="backward nodes of the trace (default 100,000; --quick 2,000)")
    own.add_argument("--events", type=int, default=None, help="events wanted (default 10 per node)")
    own.add_argument("--repeats", type=int, default=None,
                     help="timed samples of every key and jump measurement (default 200; --quick 20)")
    own.add_argument("--only-big", action="store_true", help="part 4 alone (the 1M-node trace)")
    own.add_argument("--big-nodes", type=int, default=None,
                     help="nodes of part 4's trace when it is recorded (default 1,000,000; --quick 20,000)")
    own.add_argument("--big-trace", metavar="PATH", default=None,
                     help="part 4's trace: loaded from PATH if it exists, else recorded and saved there")
    args, rest = own.parse_known_args(sys.argv[1:] if argv is None else argv)
    for name in ("nodes", "repeats", "big_nodes"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            own.error(f"--{name.replace('_', '-')} must be at least 1")
    if "-h" in rest or "--help" in rest:
        own.print_help()
        print()
    return bench_main(__doc__, functools.partial(_run_with, args), print_report,
                      quick_help="2k nodes, ~20k events, 20 repeats, 1 first-paint run of each way",
                      reps_help="first-paint runs of each way (default 3, quick 1)", argv=rest)


def _run_with(args: Any, quick: bool, reps: int | None) -> dict:
    return run(quick, reps, nodes=args.nodes, events=args.events, repeats=args.repeats, only_big=args.only_big,
               big_trace=args.big_trace, big_nodes=args.big_nodes)


if __name__ == "__main__":
    sys.exit(main())
