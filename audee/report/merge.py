"""Read a campaign directory (``units/*/``) into pandas frames.

Test-case rows come from each unit's ``results.jsonl``, search runs from
``searches.jsonl``, generation traces from ``traces/``.  Shards write disjoint units into
the same directory, so merging is reading every unit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from audee.errors import AudeeError
from audee.store import ResultsTable

LEVELS = {"input": "IN", "weight": "WT", "input-weight": "IN-WT"}


@dataclass
class CampaignData:
    cases: pd.DataFrame      # one row per test case run
    searches: pd.DataFrame   # one row per search run
    traces: dict[str, dict]  # search id -> trace document


def _unit_dirs(root: Path) -> list[Path]:
    units = root / "units"
    if units.is_dir():
        return sorted(p for p in units.iterdir() if p.is_dir())
    if (root / "results.jsonl").is_file():  # a single `audee fuzz` output directory
        return [root]
    raise AudeeError("no units/ and no results.jsonl: not a campaign or fuzz directory", source=str(root))


def load_campaign_dir(root: str | Path) -> CampaignData:
    root = Path(root)
    case_rows, search_rows, traces = [], [], {}
    for d in _unit_dirs(root):
        searches = {r["id"]: r for r in ResultsTable(d / "searches.jsonl").rows()}
        for r in searches.values():
            search_rows.append({**r, "unit": d.name})
        for r in ResultsTable(d / "results.jsonl").rows():
            sid = r.get("search_id")
            level = LEVELS.get(searches[sid]["level"], "?") if sid in searches else "NET"
            case_rows.append({**r, "unit": d.name, "level": level,
                              "search": searches[sid]["search"] if sid in searches else None})
        for p in sorted((d / "traces").glob("*.json")) if (d / "traces").is_dir() else []:
            try:
                traces[p.stem] = json.loads(p.read_text())
            except json.JSONDecodeError:
                continue  # written atomically: only a foreign file could be torn
    return CampaignData(pd.DataFrame(case_rows), pd.DataFrame(search_rows), traces)
