"""Reading YAML inputs (API configs, search settings, campaigns) with one-line errors."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from audee.errors import ConfigError


def read_yaml_mapping(path: str | Path, what: str = "a mapping") -> dict[str, Any]:
    """The top-level mapping of a YAML file; unreadable files, syntax errors (with their
    line) and non-mappings raise a :class:`ConfigError` naming the file."""
    source = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        raise ConfigError(f"not valid YAML{where}" + (f": {problem}" if problem else ""), source=source) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected {what} at the top level", source=source)
    return data
