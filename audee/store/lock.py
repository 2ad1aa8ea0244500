"""One writer per output directory: advisory ``flock`` locks that name their holder.

``audee fuzz --out OUT`` holds ``OUT/.audee.lock``; a campaign shard holds
``OUT/locks/shard-I-of-N.lock`` and, while it works on a unit, ``OUT/units/<id>/.audee.lock``
(the same file ``audee fuzz --out OUT/units/<id>`` would take), so two processes never write
one results table at once, whatever their shard layouts.  A second process fails at once
with one line naming the holder's pid and host, before writing anything.

The lock is released by the kernel when its holder dies (even by SIGKILL), so a stale lock
file never blocks a rerun.  Within one process the same path may be taken again (nested
``with``): a campaign's unit lock and ``fuzz()``'s own lock on that directory do not clash.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import Iterator
from contextlib import contextmanager

from audee.core.errors import AudeeError

LOCK_NAME = ".audee.lock"

_held: dict[str, tuple[int, int]] = {}   # resolved path -> (fd, depth) held by this process


def _holder(fd: int) -> str:
    """``pid N on HOST`` from the lock file (the holder writes it right after locking)."""
    text = ""
    for _ in range(20):  # the holder may be between its flock and its write
        try:
            text = os.pread(fd, 256, 0).decode(errors="replace").strip()
        except OSError:
            break
        if text:
            break
        time.sleep(0.025)
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    if "pid" not in fields:
        return "another process"
    return f"pid {fields['pid']}" + (f" on {fields['host']}" if fields.get("host") else "")


def acquire(path: str | Path, what: str) -> str:
    """Take the lock file ``path`` (non-blocking); raise AudeeError naming the holder if taken.
    Returns the key to give to :func:`release`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = str(path.resolve())
        if key in _held:
            fd, depth = _held[key]
            _held[key] = (fd, depth + 1)
            return key
        fd = os.open(key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise AudeeError(f"cannot lock {what}: {exc.strerror or exc}", source=str(path)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        holder = _holder(fd)
        os.close(fd)
        raise AudeeError(f"{what} is in use by {holder} (lock {path}); wait for it to finish or stop it, "
                         "then rerun to resume") from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={os.getpid()} host={socket.gethostname()} since={time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
                  .encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    _held[key] = (fd, 1)
    return key


def release(key: str) -> None:
    fd, depth = _held[key]
    if depth > 1:
        _held[key] = (fd, depth - 1)
        return
    del _held[key]
    try:
        os.ftruncate(fd, 0)  # still locked: nobody reads a stale holder
    except OSError:
        pass
    os.close(fd)  # closing the only descriptor releases the flock


@contextmanager
def locked(path: str | Path, what: str) -> Iterator[Path]:
    """``with locked(OUT / LOCK_NAME, f"output directory {OUT}"):`` -- one writer at a time."""
    key = acquire(path, what)
    try:
        yield Path(key)
    finally:
        release(key)


def dir_lock(out: str | Path):
    """The lock of one output directory (an ``audee fuzz --out`` or a campaign unit)."""
    return locked(Path(out) / LOCK_NAME, f"output directory {out}")
