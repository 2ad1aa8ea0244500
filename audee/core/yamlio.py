"""Reading a user's text inputs (API configs, search settings, campaigns, known issues,
specs) with one-line errors: one reader for the text, one for YAML on top of it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from audee.core.bounded import MAX_TEXT_BYTES, read_bytes
from audee.core.errors import AudeeError, ConfigError

#: libyaml's safe loader where PyYAML was built with it: the same documents as the pure-Python
#: one, about ten times faster (the shipped known-issues file: 0.12 -> 0.013 CPU-s, read once per run)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: str | Path, error: type[AudeeError] = AudeeError) -> str:
    """A file's text as UTF-8; an unreadable file, one that is no regular file or is larger
    than :data:`audee.core.bounded.MAX_TEXT_BYTES`, or bytes that are not UTF-8 (a Latin-1 or
    binary file given as a config or spec) raise ``error`` naming the file, never a
    traceback or a hang."""
    source = str(path)
    data = read_bytes(path, MAX_TEXT_BYTES, error)  # a pipe, a device or a huge file: refused unread
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                    "save it as UTF-8", source=source) from None


def read_yaml_mapping(path: str | Path, what: str = "a mapping") -> dict[str, Any]:
    """The top-level mapping of a YAML file; unreadable or non-UTF-8 files, syntax errors
    (with their line) and non-mappings raise a :class:`ConfigError` naming the file."""
    source = str(path)
    text = read_text(path, ConfigError)
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        raise ConfigError(f"not valid YAML{where}" + (f": {problem}" if problem else ""), source=source) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected {what} at the top level", source=source)
    return data
