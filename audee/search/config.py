"""Search settings from a YAML file and the command line (command line wins).

The YAML file holds any SearchSettings field (see audee.settings, docs/search.md), e.g.::

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

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from audee.core.errors import ConfigError
from audee.settings import SearchSettings, parse_duration as _parse_duration, settings_error, validate_settings
from audee.core.yamlio import read_yaml_mapping

SearchConfig = SearchSettings


def parse_duration(text: str | float | int, *, field: str = "--budget") -> float:
    """'300', '300s', '5m', '1.5h' -> seconds."""
    try:
        return _parse_duration(text)
    except ValueError as exc:
        raise ConfigError(str(exc), field=field) from None


def load_search_config(path: str | Path) -> dict[str, Any]:
    return check_fields(read_yaml_mapping(path, "a mapping of search settings"), str(path))


def check_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The settings of ``data``, each checked (unknown keys, types, ranges); checks across
    fields (parents <= population) wait for :func:`make_config`, after the merge."""
    try:
        SearchSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["loc"] or first["type"] != "value_error":   # not the cross-field check
            raise settings_error(exc, SearchSettings, source) from None
    return dict(data) | ({"budget_s": _parse_duration(data["budget_s"])} if "budget_s" in data else {})


def make_config(file_values: dict[str, Any], cli_values: dict[str, Any], source: str = "command line",
                *, flags: bool = False) -> SearchSettings:
    """One SearchSettings from a file's values and the given flags; errors name the file,
    or the flag when ``source`` is the command line."""
    merged = {**file_values, **{k: v for k, v in cli_values.items() if v is not None}}
    if source == "command line":
        source, flags = None, True
    return validate_settings(SearchSettings, merged, source, flags=flags)
