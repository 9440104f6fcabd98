"""A main thread with a stack big enough for real PyTorch to free a deep graph, for a script agdb runs on it.

NOTE [the main thread's stack]
PyTorch frees a graph recursively in C++: a 1M-deep chain whose nodes Python touched needs about 1 GiB of stack
(`torch_source.BIG_STACK`), and the main thread's usual 8 MiB crashes at about 50k. The script must run on the main
thread all the same (NOTE [signals and the script] in signals.py), so agdb gives that thread a big stack the way
Linux allows: the kernel places the memory map below the stack at exec time, leaving room for the stack limit
then in force, and grows the stack on demand up to that limit. So `agdb` raises its soft RLIMIT_STACK to BIG_STACK
(no higher than the hard limit) and executes itself again, once, before anything runs. The new process puts the
default stack of the threads it starts (the script's, torch's pool) back to the size the old limit gave them, as
glibc sizes it from the limit; processes the script starts inherit the raised limit. Where the hard limit is lower,
agdb runs with what it may have, and says how deep a graph that allows.

Never imports textual or rich.
"""
from __future__ import annotations

import ctypes
import os
import resource
import sys

from agdb.tracer.sources.torch import BIG_STACK

_ORIGINAL = "AGDB_ORIGINAL_STACK"
"""Set in the process executed again: the soft stack limit agdb was started with, in bytes."""


def ensure_big_stack() -> str:
    """Execute agdb again with a BIG_STACK stack limit unless it has one; returns a note ("" when all is well) when
    the hard limit does not allow it. Call before anything runs: it does not return when it executes agdb again."""
    original = os.environ.pop(_ORIGINAL, None)
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if original is not None:
        _thread_stacks_as_before(original)
    if soft == resource.RLIM_INFINITY or soft >= BIG_STACK:
        return ""
    wanted = BIG_STACK if hard == resource.RLIM_INFINITY else min(hard, BIG_STACK)
    if original is not None or wanted <= soft:
        return (f"the stack limit is {soft >> 20} MiB (ulimit -s) and the hard limit allows no more, so torch may "
                f"crash freeing a deep graph (a 1M-deep chain needs {BIG_STACK >> 20} MiB)")
    resource.setrlimit(resource.RLIMIT_STACK, (wanted, hard))
    os.environ[_ORIGINAL] = str(soft)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return ""  # not reached


def _thread_stacks_as_before(original: str) -> None:
    """Give new threads the default stack they had under the original limit (glibc takes it from the limit at start;
    without this every thread would reserve BIG_STACK of address space)."""
    try:
        libc = ctypes.CDLL(None)
        attr = ctypes.create_string_buffer(128)  # a pthread_attr_t (56 bytes on x86-64, 64 on aarch64)
        if libc.pthread_attr_init(attr) == 0:
            libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(int(original)))
            libc.pthread_setattr_default_np(attr)
            libc.pthread_attr_destroy(attr)
    except (AttributeError, OSError):
        pass  # not glibc: threads keep the platform's default
