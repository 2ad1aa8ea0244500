"""Read a campaign directory (``units/*/``) into pandas frames.

Test-case rows come from each unit's ``results.jsonl``, search runs from
``searches.jsonl``, generation traces from ``traces/``, localizations (the RQ2 stage) from
``localize/*.json`` and consistent cases' change rates from ``localize/consistent.jsonl``.
Shards write disjoint units into the same directory, so merging is reading every unit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from audee.errors import AudeeError
from audee.report.dedup import level_of
from audee.store import ResultsTable


@dataclass
class CampaignData:
    cases: pd.DataFrame      # one row per test case run
    searches: pd.DataFrame   # one row per search run
    traces: dict[str, dict]  # search id -> trace document
    localized: pd.DataFrame = field(default_factory=pd.DataFrame)   # one row per localized inconsistency
    consistent: pd.DataFrame = field(default_factory=pd.DataFrame)  # top-1 change rates of consistent cases


def _unit_dirs(root: Path) -> list[Path]:
    units = root / "units"
    if units.is_dir():
        return sorted(p for p in units.iterdir() if p.is_dir())
    if (root / "results.jsonl").is_file():  # a single `audee fuzz` output directory
        return [root]
    raise AudeeError("no units/ and no results.jsonl: not a campaign or fuzz directory", source=str(root))


def _seed_of(unit_dir: Path) -> str | None:
    """The seed a fuzz run was for, from the config.json it wrote first."""
    try:
        return json.loads((unit_dir / "config.json").read_text()).get("seed")
    except (OSError, json.JSONDecodeError):
        return None


def load_campaign_dir(root: str | Path) -> CampaignData:
    root = Path(root)
    case_rows, search_rows, traces, localized, consistent = [], [], {}, [], []
    for d in _unit_dirs(root):
        searches = {r["id"]: r for r in ResultsTable(d / "searches.jsonl").rows()}
        seed = _seed_of(d)
        for r in searches.values():
            search_rows.append({**r, "unit": d.name, "seed": seed})
        for r in ResultsTable(d / "results.jsonl").rows():
            sid = r.get("search_id")
            case_rows.append({**r, "unit": d.name, "level": level_of(r, searches),
                              "search": searches[sid]["search"] if sid in searches else None,
                              "target": searches[sid].get("target") if sid in searches else None})
        for p in sorted((d / "traces").glob("*.json")) if (d / "traces").is_dir() else []:
            try:
                traces[p.stem] = json.loads(p.read_text())
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
                        pd.DataFrame(localized), pd.DataFrame(consistent))
