"""Atomic file writes: a reader never sees half a file, a kill never leaves one.

The file gets the mode ``0o666`` less the umask, like any file ``open()`` creates (0644
under the usual umask 022, 0600 under 077), so a case file, a status file and
``results.jsonl`` in one directory share a mode.  (``tempfile.mkstemp`` would make
every file 0600 whatever the umask.)
"""
from __future__ import annotations

import io
import os
import secrets
from pathlib import Path
from typing import BinaryIO, Callable

from audee.core.errors import AudeeError


def _create_temp(path: Path) -> tuple[int, str]:
    """A new, exclusive temp file beside ``path``, created with 0o666 so the umask decides its mode."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def write_atomic(path: str | Path, data: bytes) -> None:
    """A full disk (ENOSPC) or another OS error is an :class:`AudeeError` naming the file;
    the old content, if any, is kept."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_temp(path)
    except OSError as exc:
        raise AudeeError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise AudeeError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
        raise


def write_via(path: str | Path, fill: Callable[[BinaryIO], object]) -> None:
    """:func:`write_atomic` for writers that want a file object (a figure's ``savefig``,
    ``np.savez_compressed``): ``fill`` writes into memory, then the bytes land atomically."""
    buf = io.BytesIO()
    fill(buf)
    write_atomic(path, buf.getvalue())


def create_atomic(path: str | Path, data: bytes) -> bool:
    """Write ``path`` whole unless it exists (two writers racing: exactly one wins, and a
    reader sees either no file or all of it); True when this call created it."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.new"
    write_atomic(tmp, data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        raise AudeeError(f"cannot write: {exc.strerror or exc}", source=str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)
