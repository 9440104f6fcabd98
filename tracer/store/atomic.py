"""Writing a file atomically: whoever reads the path sees the old file or the new one, never half of one.

Never imports the engine, textual or rich.

NOTE [temporary files of a save]
A save writes `.<name>.agdb-tmp-<pid>-<n>` beside the file, fsyncs it and renames it over the file. A save
killed before the rename (SIGKILL, a power cut) leaves its temporary behind, and a trace's temporary can be
gigabytes, so every save first removes the stale temporaries of the same file. Which ones are stale is
decided by a lock, not by the pid in the name (pids are reused, and two threads of one process may save the
same path): the writer holds an exclusive `flock` on its temporary until the rename, the kernel drops that
lock when the writer dies however it dies, so a temporary whose lock can be taken has no live writer. A
cleaner could take the lock in the instant between a writer creating its file and locking it; the writer
therefore checks, once it holds the lock, that the name still leads to its file, and starts again if not.
Without `fcntl` (Windows) nothing is cleaned, and the save is still atomic.
"""
from __future__ import annotations

import errno
import itertools
import os
import stat
from typing import Iterable

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_TMP_MARK = ".agdb-tmp-"
_numbers = itertools.count()  # with the pid, a name no other live save uses


def temporary_prefix(path: str | os.PathLike) -> str:
    """The name every temporary of a save to `path` starts with (in the folder of the file it replaces)."""
    return f".{os.path.basename(write_target(path))}{_TMP_MARK}"


def write_target(path: str | os.PathLike) -> str:
    """The file a save to `path` replaces: a symlink's target (the link stays a link), else `path` itself."""
    path = os.fspath(path)
    return os.path.realpath(path) if os.path.islink(path) else path


def write_atomically(path: str | os.PathLike, chunks: Iterable[bytes | memoryview], durable: bool = True,
                     replace_read_only: bool = False) -> None:
    """Write `chunks` to `path` through a temporary file renamed over it (NOTE [temporary files of a save]).

    The new file gets the permissions of the user's umask, as `open` would give it. A symlink at `path` is
    written through: its target is replaced and the link kept. A read-only file at `path` is refused (the rename
    would replace it without a word) unless `replace_read_only`. With `durable`, the data and the rename reach
    the disk (fsync) before this returns. On any error the old file is left as it was and the temporary is
    removed; an OSError names `path` (a full disk's error names no file of its own).
    """
    target = write_target(path)
    if not replace_read_only:
        refuse_read_only(path)
    folder = os.path.dirname(target) or "."
    remove_stale_temporaries(target)
    try:
        fd, tmp = _create_locked(folder, temporary_prefix(target))
    except OSError as e:
        raise _naming(e, path) from None
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _naming(e, path) from None
        raise
    finally:
        os.close(fd)  # only now: the lock keeps cleaners away until the rename is done
    if durable:
        _fsync_folder(folder)


def is_read_only(path: str | os.PathLike) -> bool:
    """Whether `path` is a file that is read-only: no write permission for anyone (even for root, who may write
    anything), or none for this user. No file there is not read-only."""
    target = write_target(path)
    try:
        mode = os.stat(target).st_mode
    except OSError:  # no file yet, or one the write itself will report
        return False
    return stat.S_ISREG(mode) and (not mode & 0o222 or not os.access(target, os.W_OK))


def refuse_read_only(path: str | os.PathLike) -> None:
    """Raise PermissionError, naming `path`, when it is a read-only file: a rename would replace it without a
    word, where `cp` and editors refuse."""
    if is_read_only(path):
        raise PermissionError(errno.EACCES, "the file is read-only, so agdb leaves it as it is: make it writable "
                                            "or remove it first", os.fspath(path))


def _naming(error: OSError, path: str | os.PathLike) -> OSError:
    """`error` as one that names `path` (the file the user named, not the temporary) and says the old file is
    left as it was."""
    reason = error.strerror or str(error)
    return OSError(error.errno, f"{reason} (the file there, if any, is left as it was)", os.fspath(path))


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporaries that killed saves to `path` left behind; returns their names."""
    if fcntl is None:
        return []
    target = write_target(path)
    folder = os.path.dirname(target) or "."
    prefix = temporary_prefix(target)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return []
    removed = []
    for name in names:
        tmp = os.path.join(folder, name)
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live save holds it
            if _same_file(tmp, fd):
                os.unlink(tmp)
                removed.append(name)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def _create_locked(folder: str, prefix: str) -> tuple[int, str]:
    """A new temporary file in `folder`, opened for writing and locked (NOTE [temporary files of a save])."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(folder, f"{prefix}{os.getpid()}-{next(_numbers)}")
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask decides, as for any new file
        except FileExistsError:  # left by a dead process that had this pid: take the next number
            continue
        if fcntl is None:
            return fd, tmp
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(tmp, fd):
                return fd, tmp
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # a cleaner removed it before we held the lock: start again


def _same_file(path: str, fd: int) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); a folder that cannot be opened is left to the OS."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
