"""Shared pytest setup: one OpenMP thread for torch, the hypothesis profile, bytecode and rewritten test modules
compiled once, the order that lets the longest tests overlap the rest, and a check that no test leaves process-wide
state behind (`no_global_state_left`).

OMP_NUM_THREADS=1 (unless set already), before anything imports torch: its value reaches the xdist workers and
every child process a test starts. torch's intra-op pool otherwise has one OpenMP thread per core, which spin
while they wait for work: with two workers on two cores, each running torch, the spinning threads take the cores
from the threads with work to do (tests/engine's real programs and layer and class parity under `-n 2`: 43-65 s of
user CPU and 25-56 s wall with the default pool, 20-21 s and 14 s with one thread). No test depends on torch's
intra-op parallelism: agdb observes the autograd engine, whose threads OpenMP does not make.

Importing the strategies module registers and loads the hypothesis profile. Tests marked `long` (tens of
seconds of one core or more) are moved to the front: under pytest-xdist (`make test` runs a worker per core and
one more) they then start at once while the other workers share the rest, instead of one of them starting last and
keeping the run going alone.
"""
from __future__ import annotations

import compileall
import fnmatch
import gc
import os
import sys
import threading
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before the imports below, any of which may import torch

# A full collection in a test process walks torch, the suite's modules and items (0.3-0.5 s each). With the default
# third threshold (10), the three workers made 62 of them, 28 s of the suite's CPU. With 100, a full collection waits
# for 100 gen1 collections instead of 10 (and still for a quarter of the long-lived objects to be new): 26 of them,
# 16 s. The younger generations, and a test's own gc.collect(), are as before.
gc.set_threshold(700, 10, 100)

import pytest  # noqa: E402

from tests import strategies  # noqa: E402, F401  (registers and loads the "ci" / "dev" hypothesis profiles)

ROOT = Path(__file__).resolve().parent.parent
COMPILED = ("app", "engine", "tracer", "widgets", "tests", "bench")
"""The checkout's folders of Python modules: agdb's packages (installed in editable mode, so imported from here),
the tests' helpers and the benchmarks the smoke tests run."""


def pytest_configure(config: pytest.Config) -> None:
    """Write the checkout's bytecode once, in the main pytest process before any xdist worker starts.

    Where PYTHONDONTWRITEBYTECODE is set, Python writes no `.pyc` of its own, so every worker and every `agdb` child
    process a test starts (a few hundred) would compile agdb's modules from source again: 0.6 s of CPU for an
    `agdb record` of a three-line script against 0.35 s with the bytecode there. Reading `.pyc` files is not
    affected by that variable; compileall writes them whatever it says, and skips the ones already up to date.
    """
    _one_final_collection(config)
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the main process did it
    for name in COMPILED:
        compileall.compile_dir(ROOT / name, quiet=2)  # a file that fails to compile is the tests' to report
    _rewrite_test_modules_once(config)


def _rewrite_test_modules_once(config: pytest.Config) -> None:
    """Cache the test modules as pytest's assertion rewriting makes them, once, before any xdist worker starts.

    pytest rewrites the asserts of each test module it imports and caches the result beside Python's `.pyc` files,
    but not where PYTHONDONTWRITEBYTECODE is set: there every worker parsed and rewrote all ~190 test modules again
    (3.7 s of CPU each). Workers read a cached module whatever that variable says. This writes the cache as pytest's
    own import hook would (its private helpers, hence the guard: without them, workers rewrite as before).
    """
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):
        return
    if config.getoption("assertmode") != "rewrite":
        return
    patterns = config.getini("python_files")  # the test modules pytest rewrites, with the conftests
    for fn in sorted((ROOT / "tests").rglob("*.py")):
        if fn.name != "conftest.py" and not any(fnmatch.fnmatch(fn.name, p) for p in patterns):
            continue
        pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(fn, pyc) is not None:
            continue
        try:
            pyc.parent.mkdir(exist_ok=True)
            source_stat, co = rewrite._rewrite_test(fn, config)
        except Exception:  # noqa: BLE001 - a module that does not parse is the tests' to report, not this cache's
            continue
        rewrite._write_pyc(state, co, source_stat, pyc)


def _one_final_collection(config: pytest.Config) -> None:
    """At the end of a session pytest runs the cycle collector five times over to find exceptions raised in
    finalizers (unraisable exceptions, reported as warnings, never failures). Each full collection of a worker's
    heap (torch, the suite's modules and items) costs 0.2-0.5 s of CPU and finds the same nothing; one still reports
    what the first collection frees. The setting is pytest's private stash key: without it, pytest's default."""
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:
        return
    config.stash[gc_collect_iterations_key] = 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` first, each group in collection order (the same on every xdist worker)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


_GLOBAL_MODULE_HOOKS = ("_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_pre_hooks",
                        "_global_forward_hooks", "_global_forward_hooks_always_called",
                        "_global_forward_hooks_with_kwargs")
"""torch.nn.modules.module's process-wide hook tables (any entry makes `_has_any_global_hook()` true)."""


def _patch_points() -> dict:
    """What a recording patches or sets while attached (trace functions, the engine's observers, the functions of
    torch and of the engine that the bridge and the Recorder wrap), as now: name -> (value, how to put a value back);
    a module not imported yet is left out."""
    points: dict = {"sys.settrace": (sys.gettrace(), sys.settrace),
                    "sys.setprofile": (sys.getprofile(), sys.setprofile),
                    "threading.settrace": (threading._trace_hook, threading.settrace),
                    "threading.setprofile": (threading._profile_hook, threading.setprofile)}
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "autograd") and hasattr(torch, "nn"):
        for name, owner in (("torch.nn.Module.__call__", torch.nn.Module),
                            ("torch.autograd.Function.apply", torch.autograd.Function),
                            ("torch.autograd.backward", torch.autograd), ("torch.autograd.grad", torch.autograd),
                            ("torch.Tensor.backward", torch.Tensor)):
            points[name] = _attribute(owner, name.rpartition(".")[2])
    module = sys.modules.get("agdb.engine.nn.module")
    if module is not None:
        points["engine Module.__call__"] = _attribute(module.Module, "__call__")
    observer = sys.modules.get("agdb.engine._observer")
    if observer is not None:
        points["engine observers"] = (tuple(observer.observers), lambda value: observer._rebuild_with(list(value)))
    return points


def _attribute(owner, attr: str) -> tuple:
    """`owner`'s own `attr` (a class's from its __dict__: a classmethod stays one), and how to put a value back."""
    return vars(owner).get(attr), lambda value: setattr(owner, attr, value)


@pytest.fixture(autouse=True)
def no_global_state_left():
    """Fails a test that leaves process-wide state behind, and puts it back, so that no test changes the ones after
    it on its worker:

    - torch's global module hook tables: hooks left there run in every later test, and any later
      `torch.compile(module)` warns of them (torch's handle of a `with_kwargs=True` global forward hook leaves its id
      behind when removed);
    - what a recording patches or sets while attached (`_patch_points`): left in place, it would go on recording, or
      slow, every later test; the same check says that agdb's recordings detach in full, however a test ends them.
    """
    before = _patch_points()
    yield
    after = _patch_points()
    if "engine observers" in after:  # the engine imported during the test started with none
        before.setdefault("engine observers", ((), after["engine observers"][1]))
    changed = sorted(name for name in before.keys() & after.keys()
                     if (old := before[name][0]) is not (new := after[name][0]) and old != new)
    for name in changed:
        value, put_back = before[name]
        put_back(value)
    module = sys.modules.get("torch.nn.modules.module")
    hooks = {name: dict(table) for name in _GLOBAL_MODULE_HOOKS if (table := getattr(module, name, None))} \
        if module is not None else {}
    for name in hooks:
        getattr(module, name).clear()
    if changed or hooks:
        pytest.fail(f"the test left process-wide state behind: {', '.join(changed)}"
                    f"{'; ' if changed and hooks else ''}{f'torch global module hooks {hooks}' if hooks else ''}")
