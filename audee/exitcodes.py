"""The exit codes of every ``audee`` command, in one place.

=====  ===================  ==========================================================
code   name                 meaning
=====  ===================  ==========================================================
0      OK                   the command did what was asked
1      NOT_REPRODUCED       the case no longer fails as recorded (reproduce, localize)
2      BAD_INPUT            bad input: a file, a field or an option (one-line error)
3      NOT_LOCALIZED        the case reproduces but nothing was localized (localize)
4      BACKEND_UNAVAILABLE  a backend worker could not start (backends)
130    INTERRUPTED          interrupted (Ctrl-C); rerun the same command to resume
141    BROKEN_PIPE          stdout was closed early (``audee seeds | head -1``), as SIGPIPE
143    TERMINATED           SIGTERM (scancel, a time limit, kill); cleaned up, rerun to resume
=====  ===================  ==========================================================
"""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    #: the case no longer fails as recorded
    NOT_REPRODUCED = 1
    #: a file, a field or an option is wrong (one line on stderr names it)
    BAD_INPUT = 2
    #: the case reproduces but no (layer, parameter) source was found
    NOT_LOCALIZED = 3
    #: a backend worker could not start
    BACKEND_UNAVAILABLE = 4
    #: ``audee apis --coverage``: a constructor parameter or a Keras layer without a config or a reason
    COVERAGE_GAP = 5
    #: ``audee campaign``: some units stopped on an internal error (``units/<id>/ERROR.json``); the others ran
    UNIT_ERRORS = 6
    #: interrupted (SIGINT); rerun the same command to resume
    INTERRUPTED = 130
    #: stdout was closed early (piped into ``head``): 128 + SIGPIPE, as the shell reports a tool killed by it
    BROKEN_PIPE = 141
    #: SIGTERM (a SLURM cancel or time limit, ``kill``): 128 + SIGTERM, after the cleanup (audee.signals)
    TERMINATED = 143


#: One line per code, for ``--help`` texts and the README.
MEANING = {
    ExitCode.OK: "success",
    ExitCode.NOT_REPRODUCED: "the case no longer fails as recorded",
    ExitCode.BAD_INPUT: "bad input (a file, a field or an option)",
    ExitCode.NOT_LOCALIZED: "the case reproduces but nothing was localized",
    ExitCode.BACKEND_UNAVAILABLE: "a backend worker could not start",
    ExitCode.COVERAGE_GAP: "apis --coverage: a parameter or layer without a config or a reason",
    ExitCode.UNIT_ERRORS: "campaign: some units stopped on an internal error; rerun resumes them",
    ExitCode.INTERRUPTED: "interrupted; rerun the same command to resume",
    ExitCode.BROKEN_PIPE: "stdout was closed early (piped into head)",
    ExitCode.TERMINATED: "terminated (SIGTERM); rerun the same command to resume",
}


def describe(*codes: ExitCode) -> str:
    """``"exit codes: 0 success, 2 bad input ..."`` for the given codes (all when none given)."""
    return "exit codes: " + ", ".join(f"{int(c)} {MEANING[c]}" for c in (codes or tuple(ExitCode)))
