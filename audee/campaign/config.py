"""Campaign configs: a YAML file expanded into deterministic work units.

    name: rq1-cpu
    defaults: {variants: 20, batch: 16, rng: 0, timeout: 120}
    runs:
      - seeds: [lenet5, lstm]
        backends: [[tensorflow, torch], [tensorflow, onnxruntime]]
        rngs: [0, 1]
        search: {level: input, fitness: inconsistency, search: [ga, random], budget: 30s, ga_on_consistent: 2}
        localize: {consistent: 10}      # RQ2: localize every unique inconsistency of the unit
      - seeds: [my/spec.json, my/model.keras]   # a user's models: any keras.layers layer
        inputs: {my/spec.json: my/x.npz}        # or one .npz for all; default: inputs.npz beside, else generated
        backends: [[tensorflow, torch]]
      - apis: all                       # API-level fuzzing: one unit per API (api_group: N per unit)
        backends: [[tensorflow, torch, jax, onnxruntime]]
        variants: 40                    # cases per API
      - ops: all                        # op-level fuzzing (docs/ops.md): one unit per op (op_group: N per unit)
        backends: [[tensorflow, torch, jax]]
        variants: 20                    # calls per op


Every combination of seed (or API group) x backend set x rng in a run is one unit, with a stable id;
units are sorted by id, so shard i of N is the same on every machine and every rerun.
"""
from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from audee.core.errors import ConfigError
from audee.reference.run import KERAS_BACKENDS, candidates
from audee.settings import MAX_UNITS, CampaignSearch, CampaignSettings, ShardSettings, validate_settings
from audee.core.yamlio import read_yaml_mapping

PLAN_KEYS = ("search", "budget", "budget_s", "ga_on_consistent", "input_index")


@dataclass(frozen=True)
class Unit:
    id: str
    seed: str
    backends: tuple[str, ...]
    settings: dict[str, Any] = field(hash=False)
    search: dict[str, Any] | None = field(default=None, hash=False)
    localize: dict[str, Any] | None = field(default=None, hash=False)
    apis: tuple[str, ...] | None = None   # an API-level unit: these APIs instead of a seed
    ops: tuple[str, ...] | None = None    # an op-level unit: these keras.ops functions instead of a seed
    inputs: str | None = field(default=None, hash=False)  # the run's inputs .npz for this seed (None: the seed's)
    origin: str = field(default="", hash=False, compare=False)  # the run's field naming the seed: runs[0].seeds[1]
    # the campaign's environments (envs:): name -> interpreter, for backends such as torch@prev
    envs: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass
class Campaign:
    name: str
    units: list[Unit]
    source: str
    node: ShardSettings = field(default_factory=ShardSettings)  # how a shard shares its node (top-level settings)

    def shard(self, index: int, count: int) -> list[Unit]:
        return [u for k, u in enumerate(self.units) if k % count == index]


def load_campaign(path: str | Path) -> Campaign:
    """Validate the whole file (audee.settings.CampaignSettings: every setting, every
    backend name of every run, the number of units) before anything runs."""
    source = str(path)
    cfg = validate_settings(CampaignSettings, read_yaml_mapping(path, "a campaign mapping"), source)
    groups = [_api_groups(run, source, k) for k, run in enumerate(cfg.runs)]
    total = 0
    for k, run in enumerate(cfg.runs):
        total += len(groups[k] or run.seeds or []) * len(run.backends) * len(run.rngs or [0])
        if total > MAX_UNITS:
            raise ConfigError(f"the runs up to this one expand into {total:,} units (seeds x backend sets x rngs); "
                              f"at most {MAX_UNITS:,} per campaign: split it into several campaigns",
                              source=source, field=f"runs[{k}]")
    name = cfg.name
    defaults = cfg.defaults.given()
    units: dict[str, Unit] = {}
    made_by: dict[str, str] = {}  # unit id -> the run that made it: two runs never share one

    def add(unit: Unit, where: str) -> None:
        if unit.id in units:
            raise ConfigError(f"unit {unit.id} is made twice (also by {made_by[unit.id]}): one of the two would "
                              "be lost; give the runs different backends, rngs or targets", source=source, field=where)
        units[unit.id], made_by[unit.id] = unit, where

    for k, run in enumerate(cfg.runs):
        settings = {**defaults, **run.unit_settings()}
        backend_sets = [tuple(b) for b in run.backends]
        if settings.get("reference", "none") != "none":  # a reference nothing computes: said before any unit
            for j, backends in enumerate(backend_sets):
                if not candidates(list(backends), settings.get("reference_backend", "auto")):
                    raise ConfigError("no backend of this set computes the float64 reference (a built-in Keras "
                                      f"backend: {', '.join(KERAS_BACKENDS)}); name one with reference_backend",
                                      source=source, field=f"runs[{k}].backends[{j}]")
        rngs = run.rngs if run.rngs is not None else [settings.get("rng", 0)]
        phase = "" if settings.get("phase", "inference") == "inference" else f"-{settings['phase']}"  # its own units
        if groups[k] is not None:
            ops = run.ops is not None
            for group, backends, rng in itertools.product(groups[k], backend_sets, rngs):
                tag = _api_tag(group, "op" if ops else "api")
                uid = f"{tag}--{'+'.join(_backend_tag(b) for b in backends)}--r{rng}{phase}"
                add(Unit(uid, tag, backends, {**settings, "rng": rng}, apis=None if ops else group,
                         ops=group if ops else None), f"runs[{k}]")
            continue
        seeds = run.seeds or []
        search = _search(run.search)
        localize = run.localize.given() if run.localize is not None else None
        for (i, seed), backends, rng in itertools.product(enumerate(seeds), backend_sets, rngs):
            tag = f"-{search['level']}-{search['fitness']}" if search else ""
            uid = f"{_seed_tag(seed)}--{'+'.join(_backend_tag(b) for b in backends)}--r{rng}{tag}{phase}"
            inputs = run.inputs.get(seed) if isinstance(run.inputs, dict) else run.inputs
            add(Unit(uid, seed, backends, {**settings, "rng": rng}, search, localize,
                     inputs=inputs, origin=f"runs[{k}].seeds[{i}]"), f"runs[{k}].seeds[{i}]")
    node = ShardSettings(**{k: getattr(cfg, k) for k in cfg.model_fields_set if k in ShardSettings.model_fields})
    return Campaign(name, [replace(units[k], envs=dict(cfg.envs)) for k in sorted(units)], source, node)


def _api_groups(run: Any, source: str, k: int) -> list[tuple[str, ...]] | None:
    """A run's APIs or ops (``all``: every configured one, in name order) cut into groups of
    ``api_group`` / ``op_group``; None for a seed run.  An unknown name is an error naming it."""
    if run.apis is None and run.ops is None:
        return None
    from audee.apis import load_api_configs, load_op_configs

    ops = run.ops is not None
    known = load_op_configs() if ops else load_api_configs()
    given, field = (run.ops, "ops") if ops else (run.apis, "apis")
    names = sorted(known) if given == "all" else list(dict.fromkeys(given))
    for i, n in enumerate(names):
        if n not in known:
            raise ConfigError(f"unknown {'op' if ops else 'API'} {n!r} (see `audee apis{' --ops' if ops else ''}`)",
                              source=source, field=f"runs[{k}].{field}[{i}]")
    size = run.op_group if ops else run.api_group
    return [tuple(names[i:i + size]) for i in range(0, len(names), size)]


def _api_tag(group: tuple[str, ...], prefix: str = "api") -> str:
    """An API (or op) group's part of a unit id: ``api-Conv2D``, ``api-Add+Average``,
    ``op-cumsum``, or for a long group its first name, its size and a short hash of all names."""
    tag = f"{prefix}-" + "+".join(group)
    if len(tag) <= 80:
        return tag
    return f"{prefix}-{group[0]}-{len(group)}{prefix}s-{hashlib.sha256(','.join(group).encode()).hexdigest()[:8]}"


_SAFE = re.compile(r"[A-Za-z0-9._+-]+")


def _seed_tag(seed: str) -> str:
    """The seed's part of a unit id: one safe path component (units live in OUT/units/<id>).
    A seed name (``lenet5``) is kept as is, so existing campaigns resume; a seed path
    becomes its directory's basename plus a short hash of the whole path."""
    if _SAFE.fullmatch(seed) and seed not in (".", ".."):
        return seed
    base = re.sub(r"[^A-Za-z0-9._+-]+", "_", Path(seed.rstrip("/\\")).name).strip("._") or "seed"
    return f"{base}-{hashlib.sha256(seed.encode()).hexdigest()[:8]}"


def _backend_tag(backend: str) -> str:
    """A backend's part of a unit id (``pkg.mod:Class`` -> ``pkg.mod.Class``; ``@device`` kept)."""
    return re.sub(r"[^A-Za-z0-9._+@-]", "_", backend.replace(":", "."))


def _search(raw: CampaignSearch | None) -> dict[str, Any] | None:
    """A run's validated ``search:`` mapping as a unit's search plan: the settings given
    (level and fitness always), the search kinds, budget, K and input index."""
    if raw is None:
        return None
    given = raw.given()
    cfg = {k: v for k, v in given.items() if k not in PLAN_KEYS}
    return {**cfg, "level": raw.level, "fitness": raw.fitness, "searches": list(raw.search),
            "budget_s": raw.budget if raw.budget is not None else raw.budget_s,
            "on_consistent": raw.ga_on_consistent, "input_index": raw.input_index}
