"""Read a campaign directory (``units/*/``) into pandas frames.

Units (seed, backends) come from each unit's ``config.json``, test-case rows from its
``results.jsonl``, search runs from ``searches.jsonl``, generation traces from ``traces/``, localizations (the RQ2 stage) from
``localize/*.json`` and consistent cases' change rates from ``localize/consistent.jsonl``.
Shards write disjoint units into the same directory, so merging is reading every unit.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from audee.errors import AudeeError
from audee.report.dedup import level_of
from audee.store import ResultsTable

log = logging.getLogger(__name__)

#: what a results row must hold to count as a test case (every row audee wrote has these,
#: old ones included): a row with an id but anything else is reported and skipped
STATUSES = ("pass", "fail", "rejected")
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "errors": dict, "pairs": dict, "nan": dict, "nan_finite": list, "nan_strong": bool,
    "propagated_nonfinite": bool, "inconsistent_pairs": list, "deviating_pairs": list, "signatures": list,
    "exercised": list, "seconds": (int, float), "phases": dict, "variant": int}


def case_row_problem(row: dict[str, Any]) -> str | None:
    """Why ``row`` is not a test case the report can count (its field and what is wrong),
    or None: the report reads these fields by type, so nonsense in one is a skipped row,
    not a miscount or a traceback later."""
    if not isinstance(row.get("id"), str) or not row["id"]:
        return f"id: expected a non-empty string, got {row.get('id')!r:.60}"
    if not isinstance(row.get("seed"), str) or not row["seed"]:
        return f"seed: expected the seed's name, got {row.get('seed')!r:.60}"
    if row.get("status") not in STATUSES:
        return f"status: expected one of {', '.join(STATUSES)}, got {row.get('status')!r:.60}"
    kinds = row.get("kinds")
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        return f"kinds: expected a list of finding kinds, got {kinds!r:.60}"
    backends = row.get("backends")
    if not isinstance(backends, dict) or not backends \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in backends.items()):
        return f"backends: expected an object of backend -> status, got {backends!r:.60}"
    for key, typ in _OPTIONAL.items():
        value = row.get(key)
        if value is not None and (not isinstance(value, typ) or (typ != bool and isinstance(value, bool))):
            return f"{key}: expected {getattr(typ, '__name__', 'a number')}, got {value!r:.60}"
    return None


def read_case_rows(path: Path) -> list[dict[str, Any]]:
    """The test-case rows of a results table; each row that is not one: a warning naming
    the file, its line and field, and the row skipped."""
    rows = []
    for n, row in ResultsTable(path).numbered_rows():
        problem = case_row_problem(row)
        if problem is None:
            rows.append(row)
        else:
            log.warning("%s:%d: skipping a row that is not a test case (%s)", path, n, problem)
    return rows


@dataclass
class CampaignData:
    cases: pd.DataFrame      # one row per test case run
    searches: pd.DataFrame   # one row per search run
    traces: dict[str, dict]  # "unit/search id" -> trace document (with its unit and seed)
    localized: pd.DataFrame = field(default_factory=pd.DataFrame)   # one row per localized inconsistency
    consistent: pd.DataFrame = field(default_factory=pd.DataFrame)  # top-1 change rates of consistent cases
    units: pd.DataFrame = field(default_factory=pd.DataFrame)       # one row per unit: seed, backends, pairs, dir


def _unit_dirs(root: Path) -> list[Path]:
    units = root / "units"
    if units.is_dir():
        return sorted(p for p in units.iterdir() if p.is_dir())
    if (root / "results.jsonl").is_file():  # a single `audee fuzz` output directory
        return [root]
    raise AudeeError("no units/ and no results.jsonl: not a campaign or fuzz directory", source=str(root))


def _config_of(unit_dir: Path) -> dict:
    """The config.json a fuzz run wrote first (seed, backends); {} when unreadable."""
    try:
        doc = json.loads((unit_dir / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _labels_of(config: dict) -> list[str]:
    return [str(b.get("label") if isinstance(b, dict) else b) for b in config.get("backends") or []]


def load_campaign_dir(root: str | Path) -> CampaignData:
    root = Path(root)
    case_rows, search_rows, traces, localized, consistent, units = [], [], {}, [], [], []
    for d in _unit_dirs(root):
        searches = {r["id"]: r for r in ResultsTable(d / "searches.jsonl").rows()}
        config = _config_of(d)
        seed = config.get("seed")
        labels = _labels_of(config)
        units.append({"unit": d.name, "seed": seed, "backends": labels, "dir": str(d.resolve()),
                      "pairs": [f"{a}|{b}" for a, b in combinations(labels, 2)]})
        for r in searches.values():
            search_rows.append({**r, "unit": d.name, "seed": seed})
        for r in read_case_rows(d / "results.jsonl"):
            sid = r.get("search_id")
            if seed is None:
                units[-1]["seed"] = seed = r.get("seed")
            case_rows.append({**r, "unit": d.name, "unit_dir": str(d.resolve()), "level": level_of(r, searches),
                              "search": searches[sid]["search"] if sid in searches else None,
                              "target": searches[sid].get("target") if sid in searches else None})
        for p in sorted((d / "traces").glob("*.json")) if (d / "traces").is_dir() else []:
            try:
                traces[f"{d.name}/{p.stem}"] = {**json.loads(p.read_text()), "unit": d.name, "seed": seed}
            except json.JSONDecodeError:
                continue  # written atomically: only a foreign file could be torn
        ldir = d / "localize"
        if ldir.is_dir():
            for p in sorted(ldir.glob("*--*.json")):
                try:
                    doc = json.loads(p.read_text())
                except json.JSONDecodeError:
                    continue
                doc.pop("report", None)  # the full report stays in the file; the tables need the summary
                localized.append({**doc, "unit": d.name})
            consistent += [{**r, "unit": d.name} for r in ResultsTable(ldir / "consistent.jsonl").rows()]
    return CampaignData(pd.DataFrame(case_rows), pd.DataFrame(search_rows), traces,
                        pd.DataFrame(localized), pd.DataFrame(consistent), pd.DataFrame(units))
