"""What audee takes from outside itself, bounded: text a backend says and files a user or a
run directory holds.

A framework's error message is data, not text audee can trust: it may hold a lone surrogate
(a Latin-1 path decoded with ``surrogateescape``), bytes that are no UTF-8 at all, or ten
megabytes of a dumped graph.  :func:`clean_text` makes it valid, bounded text once, where it
enters audee; hashing, storing, printing and matching it can then never fail on it.

A file named by a user or by a results row may be a named pipe (``open`` blocks until a
writer comes), ``/dev/zero`` (read until memory runs out) or a huge file: every reader opens
it through :func:`read_bytes` or :func:`open_regular`, which refuse anything but a regular
file within a size bound, in one line naming it, before reading a byte.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import BinaryIO

from audee.core.errors import AudeeError

#: characters of a backend's message kept (head and tail): an exception's words fit many times
MESSAGE_LIMIT = 4000
#: characters of a traceback or a worker's log tail kept (head and tail)
TRACEBACK_LIMIT = 20000
#: bytes of a text file (config, spec, known issues, JSON document) read at most
MAX_TEXT_BYTES = 64 << 20
#: bytes of a binary input (an ``.npz`` of inputs or weights, a ``.keras`` model) read at most
MAX_DATA_BYTES = 8 << 30

_SURROGATE = re.compile("[\ud800-\udfff]")
_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def clean_text(text: object, limit: int | None = MESSAGE_LIMIT) -> str:
    """``text`` as valid UTF-8 text of at most about ``limit`` characters: bytes decoded and
    lone surrogates replaced (U+FFFD), a longer text cut to its head and tail with a line
    saying how much was left out (the exception's type leads a message, its last words end a
    traceback).  Any object is taken (``str()`` of it); None stays ''."""
    if text is None:
        return ""
    if isinstance(text, (bytes, bytearray, memoryview)):
        s = bytes(text).decode("utf-8", "replace")
    else:
        s = text if isinstance(text, str) else str(text)
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates have no UTF-8: each one replaced
            s = _SURROGATE.sub("\ufffd", s)
    if limit is not None and len(s) > limit:
        head = limit * 3 // 4
        tail = limit - head
        s = f"{s[:head]}\n[... {len(s) - head - tail:,} characters left out by audee ...]\n{s[-tail:]}"
    return s


def utf8(text: object) -> bytes:
    """``text`` cleaned (:func:`clean_text`, no length bound) and encoded: bytes to hash or
    write that never raise on what a backend said."""
    return clean_text(text, None).encode("utf-8")


def _refuse(path: str | Path, mode: int, max_bytes: int | None, size: int, error: type[AudeeError]) -> None:
    for test, what in _KINDS:
        if test(mode):
            raise error(f"not a regular file ({what}); refused unread", source=str(path))
    if not stat.S_ISREG(mode):
        raise error("not a regular file; refused unread", source=str(path))
    if max_bytes is not None and size > max_bytes:
        raise error(f"file of {size:,} bytes is larger than the {max_bytes:,} bytes audee reads; refused unread",
                    source=str(path))


def _unreadable(exc: OSError) -> str:
    """The one wording of a file that cannot be looked at (audee's "no such file" for a
    missing one, as every reader said before)."""
    return "no such file" if isinstance(exc, FileNotFoundError) else f"cannot read: {exc.strerror or exc}"


def check_regular(path: str | Path, max_bytes: int | None, error: type[AudeeError] = AudeeError) -> int:
    """The size of ``path`` once it is known to be a regular file of at most ``max_bytes``
    bytes, looked at without opening it: for a file handed whole to a library that opens it
    by name (Keras's ``load_model``); anything else raises ``error`` naming the file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(_unreadable(exc), source=str(path)) from None
    _refuse(path, st.st_mode, max_bytes, st.st_size, error)
    return st.st_size


def open_regular(path: str | Path, max_bytes: int | None, error: type[AudeeError] = AudeeError) -> BinaryIO:
    """``path`` opened for reading in binary, once it is known to be a regular file of at most
    ``max_bytes`` bytes (None: any size, for readers that stream it line by line); anything
    else raises ``error`` naming the file.  A named pipe is never opened blocking: the file is
    looked at first, opened with ``O_NONBLOCK`` (a pipe opens at once then) and looked at again
    on its descriptor, so a swap in between is caught too."""
    try:
        st = os.stat(path)
        _refuse(path, st.st_mode, max_bytes, st.st_size, error)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(_unreadable(exc), source=str(path)) from None
    try:
        st = os.fstat(fd)
        _refuse(path, st.st_mode, max_bytes, st.st_size, error)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, max_bytes: int, error: type[AudeeError] = AudeeError) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (:func:`open_regular`); a file that
    grows past the bound while it is read is refused too."""
    with open_regular(path, max_bytes, error) as f:
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:
            raise error(_unreadable(exc), source=str(path)) from None
    if len(data) > max_bytes:
        raise error(f"file grew past the {max_bytes:,} bytes audee reads; refused", source=str(path))
    return data
