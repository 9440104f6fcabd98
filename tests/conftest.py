"""Shared pytest setup: one OpenMP thread for torch, the hypothesis profile, bytecode compiled once, and the order
that lets the longest tests overlap the rest.

OMP_NUM_THREADS=1 (unless set already), before anything imports torch: its value reaches the xdist workers and
every child process a test starts. torch's intra-op pool otherwise has one OpenMP thread per core, which spin
while they wait for work: with two workers on two cores, each running torch, the spinning threads take the cores
from the threads with work to do (tests/engine's real programs and layer and class parity under `-n 2`: 43-65 s of
user CPU and 25-56 s wall with the default pool, 20-21 s and 14 s with one thread). No test depends on torch's
intra-op parallelism: agdb observes the autograd engine, whose threads OpenMP does not make.

Importing the strategies module registers and loads the hypothesis profile. Tests marked `long` (tens of
seconds of one core or more) are moved to the front: under pytest-xdist (`make test` runs `-n auto`) they then
start at once while the other workers share the rest, instead of one of them starting last and keeping the run
going alone.
"""
from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before the imports below, any of which may import torch

import pytest  # noqa: E402

from tests import strategies  # noqa: F401  (registers and loads the "ci" / "dev" hypothesis profiles)

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
    for fn in sorted((ROOT / "tests").rglob("*.py")):
        if not (fn.name.startswith("test_") or fn.name == "conftest.py"):  # python_files' default and conftests
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


@pytest.fixture(autouse=True)
def no_global_module_hooks_left():
    """Fails a test that leaves anything in torch's global module hook tables, and empties them: left there, the
    hooks run in every later test of the worker, and any later `torch.compile(module)` warns of them (torch's handle
    of a `with_kwargs=True` global forward hook leaves its id behind when removed)."""
    yield
    module = sys.modules.get("torch.nn.modules.module")
    if module is None:
        return
    left = {name: dict(table) for name in _GLOBAL_MODULE_HOOKS if (table := getattr(module, name, None))}
    if left:
        for name in left:
            getattr(module, name).clear()
        pytest.fail(f"the test left torch's global module hooks behind: {left}")
