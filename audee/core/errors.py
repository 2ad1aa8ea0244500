"""User-facing errors: one line, naming the file and the field that is wrong."""
from __future__ import annotations


class AudeeError(Exception):
    """An error caused by bad input; the CLI prints it as one line and exits 2."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        where = ""
        if source:
            where += f"{source}: "
        if field:
            where += f"{field}: "
        super().__init__(where + message)


class SpecError(AudeeError):
    """A model spec is malformed (unknown API, unknown input, cycle, bad parameter)."""


class ConfigError(AudeeError):
    """An API config or campaign config file is malformed."""


class CaseFileError(AudeeError):
    """A case file is unreadable, malformed, or was not written by audee."""


class BackendUnavailable(AudeeError):
    """A backend worker could not start (import failed, unknown plugin class, ...).

    Not bad input and not a verdict: the CLI exits with ``ExitCode.BACKEND_UNAVAILABLE`` (4)."""
