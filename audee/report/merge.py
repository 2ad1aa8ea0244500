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

import pandas as pd
from pydantic import ValidationError

from audee.core.bounded import MAX_TEXT_BYTES, read_bytes
from audee.core.errors import AudeeError
from audee.records.localization import LocalizationRecord
from audee.records.rows import PlacedRow, ResultRow
from audee.records.search import SearchTrace
from audee.report.dedup import dnn_of, level_of
from audee.store import ResultsTable, RunStore
from audee.store.campaigndir import CampaignDir, Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnitTrace:
    """A search run's trace with the unit and seed it belongs to (Figure 3's colours)."""

    trace: SearchTrace
    unit: str
    seed: str | None


@dataclass
class CampaignData:
    cases: pd.DataFrame      # one row per test case run
    searches: pd.DataFrame   # one row per search run
    traces: dict[str, UnitTrace]  # "unit/search id" -> trace (with its unit and seed)
    localized: pd.DataFrame = field(default_factory=pd.DataFrame)   # one row per localized inconsistency
    consistent: pd.DataFrame = field(default_factory=pd.DataFrame)  # top-1 change rates of consistent cases
    units: pd.DataFrame = field(default_factory=pd.DataFrame)       # one row per unit: seed, backends, pairs, dir
    rows: list[PlacedRow] = field(default_factory=list)  # the typed rows behind ``cases``, where each was read
    progress: Progress | None = None  # how far a campaign ran (None: one `audee fuzz` directory)

    def coverage_line(self) -> str:
        """What the counts of a report cover: the campaign's units by how far they ran, and the test cases."""
        cases = f"{len(self.cases)} test case{'s' if len(self.cases) != 1 else ''}"
        return f"{cases}; {self.progress.line()}" if self.progress is not None else cases


def _unit_dirs(root: Path) -> list[Path]:
    if CampaignDir(root).is_campaign():
        return CampaignDir(root).unit_dirs()
    if RunStore(root).has_results():  # a single `audee fuzz` output directory
        return [root]
    raise AudeeError("no units/ and no results.jsonl: not a campaign or fuzz directory", source=str(root))


def _labels_of(config: dict) -> list[str]:
    return [str(b.get("label") if isinstance(b, dict) else b) for b in config.get("backends") or []]


def resigned(row: ResultRow, case_path: str | None) -> ResultRow:
    """``row`` with its bug signatures made again from its case file by today's rules
    (audee.triage.signature.case_signatures): a run recorded before a classification rule changed
    counts as today's audee would.  A row without a case file, or whose case file cannot be
    read (a warning naming it), keeps what it recorded: one lost file loses no recount."""
    from audee.core.errors import CaseFileError
    from audee.triage.signature import case_signatures
    from audee.store.caserecord import CaseRecord

    if not case_path or not row.signatures:
        return row
    try:
        record = CaseRecord.from_file(case_path)
    except CaseFileError as exc:
        log.warning("%s; case %s keeps its recorded signatures", exc, row.id)
        return row
    sigs = case_signatures(record.verdict, record.spec or None, record.meta, record.meta.get("localization"))
    return row.model_copy(update={"signatures": [s.to_json() for s in sigs]})


def load_campaign_dir(root: str | Path, resign: bool = False) -> CampaignData:
    """Every unit's rows (a row that is no test case: a warning naming its file and line, and
    skipped), search runs, traces and localizations; the frames are the rows' JSON objects
    with the unit, the case file's path, and the level, search and DNN of each row.
    ``resign``: each failing row's signatures made again from its case file (:func:`resigned`)."""
    root = Path(root)
    case_rows, search_rows, traces, localized, consistent, units = [], [], {}, [], [], []
    placed: list[PlacedRow] = []
    for d in _unit_dirs(root):
        store, here = RunStore(d), RunStore(d.resolve())
        searches = store.last_search_runs()
        config = store.config()
        seed = config.get("seed")
        labels = _labels_of(config)
        units.append({"unit": d.name, "seed": seed, "backends": labels, "dir": str(here.root),
                      "pairs": [f"{a}|{b}" for a, b in combinations(labels, 2)]})
        for run in searches.values():
            search_rows.append({**run.to_json(), "unit": d.name, "seed": seed})
        for r in store.rows():
            run = searches.get(r.search_id) if r.search_id else None
            if seed is None:
                units[-1]["seed"] = seed = r.seed
            at = here.placed(r, d.name)
            if resign:
                r = resigned(r, at.case_path)
                at = here.placed(r, d.name)
            placed.append(at)
            case_rows.append({**r.to_json(), "unit": d.name, "unit_dir": str(here.root), "case_path": at.case_path,
                              "level": level_of(r, searches), "dnn": dnn_of(r, searches),
                              "search": run.search if run is not None else None,
                              "target": run.target if run is not None else None})
        for t in store.traces():  # written atomically: only a foreign file could fail to read
            traces[f"{d.name}/{t.id}"] = UnitTrace(t, d.name, seed)
        ldir = d / "localize"
        if ldir.is_dir():
            for p in sorted(ldir.glob("*--*.json")):
                try:
                    doc = LocalizationRecord.from_json(json.loads(read_bytes(p, MAX_TEXT_BYTES)))
                except AudeeError as exc:  # a pipe or a device where a report should be: never read
                    log.warning("%s; skipped", exc)
                    continue
                except (json.JSONDecodeError, UnicodeDecodeError, ValidationError):
                    continue
                # the full report stays in the file; the tables need the summary
                localized.append({**doc.summary(), "unit": d.name})
            consistent += [{**r, "unit": d.name} for r in ResultsTable(ldir / "consistent.jsonl").rows()]
    progress = CampaignDir(root).progress() if CampaignDir(root).is_campaign() else None
    return CampaignData(pd.DataFrame(case_rows), pd.DataFrame(search_rows), traces,
                        pd.DataFrame(localized), pd.DataFrame(consistent), pd.DataFrame(units), placed, progress)
