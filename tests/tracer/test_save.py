"""Saving a trace like a good Unix tool: the new file gets the user's umask, a symlink is written through, and a
save killed at any moment (SIGKILL, in a subprocess) leaves the old or the new file whole and no temporary
after the next save (NOTE [temporary files of a save] in tracer/store/atomic.py).
"""
from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agdb.tracer.store.tracefile import load, save
from tests.tracer.loader_fuzz import seeds

ROOT = Path(__file__).resolve().parents[2]
fcntl = pytest.importorskip("fcntl")


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".agdb-tmp-" in p.name)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_saved_file_gets_the_users_umask(umask, tmp_path):
    """A new trace file is 0666 less the umask (0644 under 022), as any file the user makes, not always 0600."""
    old = os.umask(umask)
    try:
        save(seeds()[0][0], tmp_path / "t.agdb", durable=False)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "t.agdb").stat().st_mode) == 0o666 & ~umask


def test_a_symlink_is_written_through(tmp_path):
    """Saving to a symlink replaces the file it points to and keeps the link (in another folder too)."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "trace.agdb"
    target.write_bytes(b"old")
    link = tmp_path / "latest.agdb"
    link.symlink_to(target)
    save(seeds()[0][0], link, durable=False)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert list(load(target)) == list(seeds()[0][0])
    assert _temporaries(tmp_path) == [] and _temporaries(tmp_path / "real") == []


def test_a_dangling_symlink_gets_its_target_made(tmp_path):
    """A symlink to a file that does not exist yet: the save makes that file and the link then leads to it."""
    link = tmp_path / "latest.agdb"
    link.symlink_to(tmp_path / "made.agdb")
    save(seeds()[0][0], link, durable=False)
    assert link.is_symlink() and (tmp_path / "made.agdb").is_file()
    assert list(load(link)) == list(seeds()[0][0])


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path):
    """A save removes temporaries of the same file whose writer is gone, and keeps one a live save holds locked,
    and those of other files."""
    path = tmp_path / "t.agdb"
    stale = tmp_path / ".t.agdb.agdb-tmp-999999999-0"
    stale.write_bytes(b"x" * 1000)
    live = tmp_path / ".t.agdb.agdb-tmp-1-0"
    live.write_bytes(b"y")
    other = tmp_path / ".u.agdb.agdb-tmp-999999999-0"
    other.write_bytes(b"z")
    with open(live, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as the writer of a save in progress holds it
        save(seeds()[0][0], path, durable=False)
        assert _temporaries(tmp_path) == sorted([live.name, other.name])
    save(seeds()[0][0], path, durable=False)  # its writer is done now
    assert _temporaries(tmp_path) == [other.name]


# -- SIGKILL during saves ----------------------------------------------------------------------------------------
_CHILD = textwrap.dedent("""\
    import sys, time
    from agdb.tracer.store.tracefile import load, save
    a, b, target = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
    print("ready", flush=True)
    i = 0
    while True:
        # a short pause per column makes the save spend its time writing its temporary, where kills count
        save((a, b)[i % 2], target, progress=lambda done, total: time.sleep(0.0005))
        i += 1
""")


def _bigger_trace():
    """A trace of ~30k events (~0.5 MB): a save takes long enough to be killed in the middle."""
    from agdb import engine, tracer
    from tests.engine.helpers import run_in_thread

    def record():
        x = engine.tensor([0.5, 1.0], requires_grad=True)
        with tracer.record() as rec:
            y = x
            for _ in range(1500):
                y = (y * 1.0001).sin()
            y.sum().backward()
        return rec.trace

    return run_in_thread(record)


def test_saves_killed_at_random_moments_leave_a_whole_file_and_no_temporary(tmp_path):
    """30 saves killed with SIGKILL at seeded random moments (6 processes at a time, each saving to its own
    file): each file is always exactly the old or the new trace, and the next save removes every temporary the
    kills left."""
    a_path, b_path = tmp_path / "a.agdb", tmp_path / "b.agdb"
    save(seeds()[1][0], a_path, durable=False)
    save(_bigger_trace(), b_path, durable=False)
    versions = {a_path.read_bytes(), b_path.read_bytes()}
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    rng = random.Random(20240617)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    left_behind = 0
    for batch in range(5):
        targets = [tmp_path / f"out{batch}-{i}" / "trace.agdb" for i in range(6)]
        children = []
        for target in targets:
            target.parent.mkdir()
            target.write_bytes(a_path.read_bytes())
            children.append(subprocess.Popen([sys.executable, str(script), str(a_path), str(b_path), str(target)],
                                             stdout=subprocess.PIPE, cwd=ROOT, env=env))
        try:
            for child in children:
                assert child.stdout.readline().strip() == b"ready"
            started = time.monotonic()
            for delay, child in sorted(((rng.uniform(0.0, 0.2), c) for c in children), key=lambda p: p[0]):
                time.sleep(max(0.0, started + delay - time.monotonic()))
                child.send_signal(signal.SIGKILL)
        finally:
            for child in children:
                child.kill()
                child.wait(timeout=30)
                child.stdout.close()
        for target in targets:
            assert target.read_bytes() in versions, "a killed save left a file that is neither the old nor the new"
            left_behind += bool(_temporaries(target.parent))
            save(seeds()[0][0], target, durable=False)
            assert _temporaries(target.parent) == [], "the next save left a killed save's temporary"
    assert left_behind > 0, "no kill landed inside a save: the test did not test the cleanup"
