"""Logging for audee: one console handler (stderr) and optionally one log file.

Every module logs through ``logging.getLogger(__name__)``, under the ``audee`` logger.
Results and summaries stay on stdout (``print``); the log says what the run did and
when: run start and end, units, searches, worker starts, restarts, timeouts and kills,
and (at debug level) each test case's verdict.

Console levels: ``-q`` ERROR, default WARNING, ``-v`` INFO, ``-vv`` DEBUG.  A log file
(``OUT/logs/audee.log`` for ``audee fuzz``, ``OUT/logs/shard-I-of-N/audee.log`` for a
campaign shard) records INFO and up (DEBUG with ``-vv``) whatever the console shows.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

ROOT = "audee"
FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_CONSOLE_FORMAT = "audee: %(levelname)s: %(message)s"
_TAG = "_audee_handler"   # marks the handlers this module installed, so a second call replaces them
_state = {"verbosity": 0}


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (a test's capture, a redirected stream)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def level_for(verbosity: int) -> int:
    """-1 (``-q``) ERROR, 0 WARNING, 1 (``-v``) INFO, 2+ (``-vv``) DEBUG."""
    if verbosity < 0:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)


def verbosity() -> int:
    """The console verbosity set last (-v count; -1 for -q): what a child process repeats."""
    return int(_state["verbosity"])


def setup_logging(verbosity: int | None = 0, log_file: str | Path | None = None) -> logging.Logger:
    """Configure the ``audee`` logger; return it.

    ``verbosity`` sets the console level (``None`` keeps the one set before).  With
    ``log_file``, records also go to that file (appended; its directory is created),
    replacing any log file set before, so a process writes one log at a time.
    """
    if verbosity is not None:
        _state["verbosity"] = verbosity
    verbosity = _state["verbosity"]
    logger = logging.getLogger(ROOT)
    console_level = level_for(verbosity)
    file_level = logging.DEBUG if verbosity >= 2 else logging.INFO
    keep_file = None
    for h in list(logger.handlers):
        if getattr(h, _TAG, None) == "console" or (getattr(h, _TAG, None) == "file" and log_file is not None):
            logger.removeHandler(h)
            h.close()
        elif getattr(h, _TAG, None) == "file":
            keep_file = h
    console = _Stderr()
    console.setLevel(console_level)
    console.setFormatter(logging.Formatter(_CONSOLE_FORMAT))
    setattr(console, _TAG, "console")
    logger.addHandler(console)
    if log_file is not None:
        path = Path(log_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        keep_file = logging.FileHandler(path, mode="a", encoding="utf-8")
        keep_file.setFormatter(logging.Formatter(FORMAT))
        setattr(keep_file, _TAG, "file")
        logger.addHandler(keep_file)
    if keep_file is not None:
        keep_file.setLevel(file_level)
    logger.setLevel(min(console_level, file_level) if keep_file is not None else console_level)
    logger.propagate = False
    return logger


def close_log_file() -> None:
    """Detach and close the log file set by :func:`setup_logging` (the console stays)."""
    logger = logging.getLogger(ROOT)
    for h in list(logger.handlers):
        if getattr(h, _TAG, None) == "file":
            logger.removeHandler(h)
            h.close()
    logger.setLevel(level_for(_state["verbosity"]))
