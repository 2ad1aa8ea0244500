"""Search settings from a YAML file and the command line (command line wins).

The YAML file holds any SearchConfig field, e.g.::

    level: input-weight
    fitness: inconsistency
    population: 30
    parents: 8
    crossover_rate: 0.5
    mutation_rate: 0.8
    input_scale: 0.1
    budget_s: 300
"""
from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from audee.errors import ConfigError
from audee.search.engine import SearchConfig
from audee.yamlio import read_yaml_mapping

_TYPES = {f.name: f.type for f in fields(SearchConfig)}


def parse_duration(text: str | float | int, *, field: str = "--budget") -> float:
    """'300', '300s', '5m', '1.5h' -> seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", str(text))
    if not m:
        raise ConfigError(f"expected a duration like 300s, 5m or 1h, got {text!r}", field=field)
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def load_search_config(path: str | Path) -> dict[str, Any]:
    return check_fields(read_yaml_mapping(path, "a mapping of search settings"), str(path))


def check_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _TYPES:
            raise ConfigError(f"unknown setting (known: {', '.join(sorted(_TYPES))})", source=source, field=key)
        typ = str(_TYPES[key])
        if key == "budget_s":
            value = parse_duration(value, field=key)
        elif typ.startswith("int") and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"expected an integer, got {value!r}", source=source, field=key)
        elif typ.startswith("float") and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise ConfigError(f"expected a number, got {value!r}", source=source, field=key)
        elif typ.startswith("bool") and not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {value!r}", source=source, field=key)
        elif typ.startswith("str") and not (isinstance(value, str) or (value is None and "None" in typ)):
            raise ConfigError(f"expected a string, got {value!r}", source=source, field=key)
        out[key] = float(value) if typ.startswith("float") else value
    return out


def make_config(file_values: dict[str, Any], cli_values: dict[str, Any], source: str = "command line") -> SearchConfig:
    merged = {**file_values, **{k: v for k, v in cli_values.items() if v is not None}}
    cfg = SearchConfig(**merged)
    try:
        cfg.check()
    except ValueError as exc:
        name, _, msg = str(exc).partition(": ")
        raise ConfigError(msg, source=source, field=name) from None
    return cfg
