"""SIGTERM (a SLURM cancel or time limit, ``kill``, a container stop) ends audee the way
Ctrl-C does: as an exception, so every ``with`` block unwinds -- temporary directories are
removed, output locks released, backend workers killed.  Without this, Python's default
SIGTERM action ends the process on the spot and skips all cleanup.

:func:`install` is called once by ``audee.cli.main``; the process then exits with 143
(128 + SIGTERM).  While unwinding, :func:`terminating` is true: ``Worker.stop`` kills a
worker at once instead of waiting for a busy one to finish its request.
"""
from __future__ import annotations

import atexit
import os
import signal
import threading
from typing import Any

from audee.core.exitcodes import ExitCode

EXIT_TERMINATED = int(ExitCode.TERMINATED)  # 128 + SIGTERM

_terminating = False
_announce = True   # print the one "terminated" line (a campaign's slot processes leave it to their shard)
_exiting = False   # the interpreter runs its exit handlers: everything has unwound already


class Terminated(SystemExit):
    """Raised in the main thread by SIGTERM; exits with 143 once the cleanup has run."""

    def __init__(self) -> None:
        super().__init__(EXIT_TERMINATED)


def terminating() -> bool:
    """True once SIGTERM arrived: cleanup should be quick (kill, do not wait)."""
    return _terminating


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminating
    if _terminating or _exiting:
        # a second SIGTERM while unwinding, or one during the exit handlers (a parent stopping
        # a process that is already ending): let the cleanup finish (SIGKILL still works); an
        # exception raised in an exit handler would only print a traceback
        _terminating = True
        return
    _terminating = True
    if _announce:
        try:
            os.write(2, b"audee: terminated (SIGTERM); cleaning up. Rerun the same command to resume\n")
        except OSError:
            pass
    raise Terminated()


def install(announce: bool = True) -> None:
    """Make SIGTERM raise :class:`Terminated` in the main thread (no-op elsewhere).
    ``announce=False``: unwind without the line on stderr, for a process its parent stops
    (a campaign shard's slot processes), so one stop or one error stays one line."""
    global _announce
    _announce = announce
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
        atexit.register(finished)  # runs before the handlers registered earlier (logging's)


def finished() -> None:
    """The process's work has unwound: a SIGTERM from now on has nothing to clean up and is
    ignored.  Called where the main function ends, because the interpreter joins threads
    (``threading._shutdown``) before it runs the exit handlers: a parent stopping a process in
    that window would otherwise print an "Exception ignored" traceback to the shared stderr."""
    global _exiting
    _exiting = True
