"""frames.is_agdb_code caches its answer by a code object's id: a code freed and another made at the same address
must still get its own answer."""
from __future__ import annotations

import os

from agdb.tracer.recording import frames


def test_codes_made_and_freed_in_turn_keep_their_own_answers():
    """Codes compiled under agdb's tracer/ and under a user's file, alternately, each freed at once (so the next
    may reuse its address), are each told apart by their file, not by what an earlier code at that id was."""
    inside_name = os.path.join(frames._AGDB_DIR, "tracer", "generated.py")
    answers = []
    for i in range(200):
        name = inside_name if i % 2 else "/home/user/train.py"
        answers.append(frames.is_agdb_code(compile(f"x = {i}", name, "exec")))
    assert answers == [bool(i % 2) for i in range(200)]
