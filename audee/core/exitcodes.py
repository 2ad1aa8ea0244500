"""The exit codes of every ``audee`` command, in one place.

Each :class:`ExitCode` member carries its meaning: a short one for ``--help`` texts
(:func:`describe`) and the full one of the README's table, which :func:`markdown_table`
renders from the members (``python -m audee.core.exitcodes`` prints it; a test holds the
README equal to it).  The table, as rendered from the enum:

"""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """An exit code with its meaning: ``brief`` (``--help``) and ``meaning`` (the README)."""

    brief: str
    meaning: str

    def __new__(cls, value: int, brief: str, meaning: str) -> "ExitCode":
        obj = int.__new__(cls, value)
        obj._value_ = value
        obj.brief = brief
        obj.meaning = meaning
        return obj

    OK = (0, "success",
          "the command did what was asked (for `reproduce`: the verdict holds; for `localize`: localized; "
          "for `recheck`: every script that could be tested here reproduces; for `bisect`: an environment computes the case differently "
          "from the oldest, the first is printed)")
    NOT_REPRODUCED = (1, "the case no longer fails as recorded",
                      "the case no longer fails as recorded (`reproduce`, `localize`, `repro`); `recheck`: a "
                      "script says NOT REPRODUCED (fixed) and none is broken")
    BAD_INPUT = (2, "bad input (a file, a field or an option)",
                 "a bad file, field or option; one line on stderr names it")
    NOT_LOCALIZED = (3, "the case reproduces but nothing was localized",
                     "the case reproduces but nothing was localized (`localize`)")
    BACKEND_UNAVAILABLE = (4, "a backend worker could not start",
                           "a backend worker could not start, whichever command started it (`fuzz`, `campaign`, "
                           "`reproduce`, `localize`, `repro`, `backends`, a `.keras` seed's TensorFlow worker); "
                           "one line on stderr names each backend and its error")
    COVERAGE_GAP = (5, "apis --coverage: a parameter or layer without a config or a reason",
                    "`apis --coverage`: a constructor parameter or a Keras layer has neither a config nor a reason")
    UNIT_ERRORS = (6, "campaign: some units stopped on an internal error; rerun resumes them",
                   "`campaign`: a unit stopped on an internal error (`OUT/units/<id>/ERROR.json`, traceback "
                   "inside); the other units ran, and rerunning resumes it")
    SCRIPTS_BROKEN = (7, "recheck: a script errored, timed out or printed neither verdict line",
                      "`recheck`: a script is broken: it errored, timed out, or printed neither REPRODUCED nor "
                      "NOT REPRODUCED (its row says which, with its last line); the others' rows are written too")
    NO_CHANGE = (8, "bisect: every environment computes the case as the oldest does",
                 "`bisect`: every environment of the list computes the case as the oldest does (no release "
                 "changed it)")
    INTERRUPTED = (130, "interrupted; rerun the same command to resume",
                   "interrupted (Ctrl-C); rerun the same command to resume")
    BROKEN_PIPE = (141, "stdout was closed early (piped into head)",
                   "stdout was closed early (`audee seeds | head -1`), as for a tool killed by SIGPIPE "
                   "(128 + SIGPIPE)")
    TERMINATED = (143, "terminated (SIGTERM); rerun the same command to resume",
                  "SIGTERM (`scancel`, a time limit, `kill`): cleaned up, then exit (128 + SIGTERM); "
                  "rerun to resume")


def describe(*codes: ExitCode) -> str:
    """``"exit codes: 0 success, 2 bad input ..."`` for the given codes (all when none given)."""
    return "exit codes: " + ", ".join(f"{int(c)} {c.brief}" for c in (codes or tuple(ExitCode)))


def markdown_table() -> str:
    """The README's exit-code table, rendered from the enum (the one source of it)."""
    rows = ["| code | name | meaning |", "|---|---|---|"]
    rows += [f"| {int(c)} | `{c.name}` | {c.meaning.replace('|', chr(92) + '|')} |" for c in ExitCode]
    return "\n".join(rows) + "\n"


__doc__ = (__doc__ or "") + markdown_table()

if __name__ == "__main__":
    print(markdown_table(), end="")
