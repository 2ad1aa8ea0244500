"""Campaign configs: a YAML file expanded into deterministic work units.

    name: rq1-cpu
    defaults: {variants: 20, batch: 16, rng: 0, timeout: 120}
    runs:
      - seeds: [lenet5, lstm]
        backends: [[tensorflow, torch], [tensorflow, onnxruntime]]
        rngs: [0, 1]
        search: {level: input, fitness: inconsistency, search: [ga, random], budget: 30s, ga_on_consistent: 2}
        localize: {consistent: 10}      # RQ2: localize every unique inconsistency of the unit


Every combination of seed x backend set x rng in a run is one unit, with a stable id;
units are sorted by id, so shard i of N is the same on every machine and every rerun.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audee.errors import ConfigError
from audee.search.config import check_fields, parse_duration
from audee.yamlio import read_yaml_mapping

UNIT_KEYS = {"variants", "batch", "rng", "timeout", "invalid_prob", "layer_rate", "max_layers", "tie_margin"}
RUN_KEYS = {"seeds", "backends", "rngs", "search", "localize"} | UNIT_KEYS
LOCALIZE_KEYS = {"max_cases": int, "consistent": int, "t1": (int, float), "t2": (int, float), "ga_iter": int,
                 "max_inputs": int, "max_rounds": int, "max_values": int}
SEARCH_KEYS = {"search", "ga_on_consistent", "budget", "input_index"}


@dataclass(frozen=True)
class Unit:
    id: str
    seed: str
    backends: tuple[str, ...]
    settings: dict[str, Any] = field(hash=False)
    search: dict[str, Any] | None = field(default=None, hash=False)
    localize: dict[str, Any] | None = field(default=None, hash=False)


@dataclass
class Campaign:
    name: str
    units: list[Unit]
    source: str

    def shard(self, index: int, count: int) -> list[Unit]:
        return [u for k, u in enumerate(self.units) if k % count == index]


def load_campaign(path: str | Path) -> Campaign:
    source = str(path)
    data = read_yaml_mapping(path, "a campaign mapping")
    unknown = sorted(set(data) - {"name", "defaults", "runs"})
    if unknown:
        raise ConfigError("unknown key (known: defaults, name, runs)", source=source, field=unknown[0])
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError("expected a campaign name", source=source, field="name")
    defaults = _settings(data.get("defaults") or {}, source, "defaults")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ConfigError("expected a non-empty list of runs", source=source, field="runs")
    units: dict[str, Unit] = {}
    for k, run in enumerate(runs):
        where = f"runs[{k}]"
        if not isinstance(run, dict):
            raise ConfigError("expected a mapping", source=source, field=where)
        bad = sorted(set(run) - RUN_KEYS)
        if bad:
            raise ConfigError(f"unknown key (known: {', '.join(sorted(RUN_KEYS))})", source=source,
                              field=f"{where}.{bad[0]}")
        seeds = _str_list(run.get("seeds"), source, f"{where}.seeds")
        backend_sets = run.get("backends")
        if not isinstance(backend_sets, list) or not backend_sets:
            raise ConfigError("expected a list of backend lists", source=source, field=f"{where}.backends")
        backend_sets = [tuple(_str_list(b, source, f"{where}.backends[{i}]")) for i, b in enumerate(backend_sets)]
        settings = {**defaults, **_settings({k2: v for k2, v in run.items() if k2 in UNIT_KEYS}, source, where)}
        rngs = run.get("rngs", [settings.get("rng", 0)])
        if not isinstance(rngs, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in rngs):
            raise ConfigError("expected a list of integers", source=source, field=f"{where}.rngs")
        search = _search(run.get("search"), source, f"{where}.search")
        localize = _localize(run.get("localize"), source, f"{where}.localize")
        for seed, backends, rng in itertools.product(seeds, backend_sets, rngs):
            tag = f"-{search['level']}-{search['fitness']}" if search else ""
            uid = f"{seed}--{'+'.join(b.replace(':', '.') for b in backends)}--r{rng}{tag}"
            units[uid] = Unit(uid, seed, backends, {**settings, "rng": rng}, search, localize)
    return Campaign(name, [units[k] for k in sorted(units)], source)


def _str_list(value: Any, source: str, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError("expected a non-empty list of names", source=source, field=where)
    return list(value)


def _settings(raw: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping", source=source, field=where)
    types = {"variants": int, "batch": int, "rng": int, "timeout": (int, float), "invalid_prob": (int, float),
             "layer_rate": (int, float), "max_layers": int, "tie_margin": (int, float)}
    out = {}
    for key, value in raw.items():
        if key not in types:
            raise ConfigError(f"unknown setting (known: {', '.join(sorted(types))})", source=source,
                              field=f"{where}.{key}")
        if not isinstance(value, types[key]) or isinstance(value, bool):
            raise ConfigError(f"expected a number, got {value!r}", source=source, field=f"{where}.{key}")
        out[key] = value
    return out


def _search(raw: Any, source: str, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping", source=source, field=where)
    plan = {k: raw[k] for k in SEARCH_KEYS if k in raw}
    cfg = {k: v for k, v in raw.items() if k not in SEARCH_KEYS}
    cfg = check_fields(cfg, f"{source}: {where}")
    if "level" not in cfg:
        raise ConfigError("a search needs a level (input, weight, input-weight)", source=source, field=f"{where}.level")
    cfg.setdefault("fitness", "inconsistency")
    kinds = plan.get("search", ["ga"])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(kinds, list) or not kinds or any(k not in ("ga", "random") for k in kinds):
        raise ConfigError("expected ga, random or [ga, random]", source=source, field=f"{where}.search")
    budget = parse_duration(plan.get("budget", 60), field=f"{where}.budget")
    k = plan.get("ga_on_consistent", 1)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError("expected a positive integer", source=source, field=f"{where}.ga_on_consistent")
    return {**cfg, "searches": kinds, "budget_s": budget, "on_consistent": k, "input_index": plan.get("input_index")}


def _localize(raw: Any, source: str, where: str) -> dict[str, Any] | None:
    """``localize: true`` or a mapping of the stage's settings (see audee.campaign.localize_stage)."""
    if raw is None or raw is False:
        return None
    if raw is True:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError("expected true or a mapping of localization settings", source=source, field=where)
    out = {}
    for key, value in raw.items():
        if key not in LOCALIZE_KEYS:
            raise ConfigError(f"unknown setting (known: {', '.join(sorted(LOCALIZE_KEYS))})", source=source,
                              field=f"{where}.{key}")
        if not isinstance(value, LOCALIZE_KEYS[key]) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"expected a non-negative number, got {value!r}", source=source, field=f"{where}.{key}")
        out[key] = value
    return out
