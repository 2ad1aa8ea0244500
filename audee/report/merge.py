"""Read a campaign directory (``units/*/``) into pandas frames.

Units (seed, backends) come from each unit's ``config.json``, test-case rows from its
``results.jsonl``, search runs from ``searches.jsonl``, generation traces from ``traces/``, localizations (the RQ2 stage) from
``localize/*.json`` and consistent cases' change rates from ``localize/consistent.jsonl``.
Shards write disjoint units into the same directory, so merging is reading every unit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from audee.errors import AudeeError
from audee.report.dedup import level_of
from audee.store import ResultsTable


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
        for r in ResultsTable(d / "results.jsonl").rows():
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
