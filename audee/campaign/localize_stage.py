"""The campaign's RQ2 stage: localize every unique inconsistency a unit found, and
measure the top-1 change rate of a sample of consistent test cases (the paper's Figure 4).

Runs after the unit's fuzz run, on the same workers, and writes into
``units/<id>/localize/``:

- ``<case id>--<pair>.json``: one per unique inconsistency (paper criteria, see
  :mod:`audee.report.dedup`): the localization report, its top-1 change rate, the
  localized (layer, parameter) pairs and CRADLE's flags.  Each file is written atomically
  and skipped on a rerun, so an interrupted stage resumes case by case.
- ``consistent.jsonl``: the top-1 change rate of up to ``consistent`` consistent
  network-level test cases (no label flip, no NaN, no crash; deviations allowed) per backend pair (rebuilt from ``variants/`` and the recorded
  weight seed and input rows).
- ``DONE.json``: the stage's commit point, with its counts.
"""
from __future__ import annotations

import json
import logging
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from audee.backends.pool import Pool
from audee.campaign.config import Unit
from audee.cases.case import Kind, TestCase
from audee.core.errors import AudeeError
from audee.cases.kinds import with_accumulated
from audee.localize.localizer import LocalizeConfig, Localizer, Report
from audee.localize.rates import top1_rate
from audee.records.localization import LocalizationRecord, LocalizedPair
from audee.records.rows import ResultRow
from audee.report.dedup import unique_inconsistencies
from audee.mutation.seeds import read_seed, with_inputs
from audee.store import ResultsTable, RunStore
from audee.store.atomic import write_atomic

log = logging.getLogger(__name__)
CONSISTENT_KINDS = set(with_accumulated(Kind.DEVIATION))  # no label flip, no NaN, every backend ran

DEFAULTS = {k: LocalizeConfig.model_fields[k].default for k in ("max_cases", "consistent")}


def localize_config(settings: dict[str, Any], rng: int) -> LocalizeConfig:
    known = {k: v for k, v in settings.items() if k in LocalizeConfig.model_fields}
    return LocalizeConfig(**{**known, "rng": rng})


def report_file(ldir: Path, case_id: str, pair: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in pair.replace("|", "."))
    return ldir / f"{case_id}--{safe}.json"


def pending(unit: Unit, udir: Path) -> bool:
    return unit.localize is not None and not (udir / "localize" / "DONE.json").is_file()


def localize_unit(unit: Unit, udir: Path, pool: Pool) -> dict[str, Any]:
    """Run the stage for one unit on ``pool`` (workers for the unit's backends)."""
    from audee.apis import load_api_configs
    from audee.localize.run import localize_case

    settings = {**DEFAULTS, **(unit.localize or {})}
    cfg = localize_config(settings, int(unit.settings.get("rng", 0)))
    ldir = udir / "localize"
    ldir.mkdir(parents=True, exist_ok=True)
    store = RunStore(udir)
    rows = list(store.rows())
    picks = [p for p in unique_inconsistencies(unit.id, rows, store.last_search_runs()) if p["case_file"]]
    picks = picks[: settings["max_cases"]]
    apis = load_api_configs()
    t0 = time.perf_counter()
    errors = 0
    log.info("unit %s: localizing %d unique inconsistencies", unit.id, len(picks))
    for pick in picks:
        path = report_file(ldir, pick["case_id"], pick["pair"])
        if path.is_file():
            continue
        t = time.perf_counter()
        doc = LocalizationRecord.of_pick(pick)
        try:
            report = localize_case(store.case_file_path(pick["case_file"]), cfg, pool=pool,
                                   pair=pick["pair"].split("|"), apis=apis)
            summarize_report(report, doc)
        except Exception as exc:  # noqa: BLE001 -- one case must not stop an hours-long stage
            # a case file that no longer loads, or a localizer error: recorded (the report
            # counts them), never retried in a loop; delete the file to retry the case
            errors += 1
            detail = str(exc) if isinstance(exc, AudeeError) else traceback.format_exc(limit=8)
            doc.error, doc.report = f"{type(exc).__name__}: {detail}"[:4000], None
            log.warning("unit %s: localizing %s failed: %s", unit.id, pick["case_id"], f"{type(exc).__name__}: {exc}")
        doc.seconds = round(time.perf_counter() - t, 3)
        write_atomic(path, json.dumps(doc.to_json(), indent=1, default=str).encode())
        log.debug("unit %s: localized %s (%s) in %.1f s", unit.id, pick["case_id"], pick["pair"], doc.seconds)
    sampled = _consistent_rates(unit, store, rows, pool, cfg, settings["consistent"])
    summary = {"unit": unit.id, "settings": settings, "unique_inconsistencies": len(picks),
               "consistent_sampled": sampled, "errors": errors, "seconds": round(time.perf_counter() - t0, 2)}
    write_atomic(ldir / "DONE.json", json.dumps(summary, indent=1).encode())
    log.info("unit %s: localization stage done in %.1f s (%d cases, %d errors)", unit.id, summary["seconds"],
             len(picks), errors)
    return summary


def summarize_report(report: Report, doc: LocalizationRecord) -> LocalizationRecord:
    """What the campaign report needs from a localization, next to the full report, set on ``doc``."""
    table = report.rounds[0].table if report.rounds else []
    pairs: list[LocalizedPair] = []
    seen = set()
    for s in report.sources:  # best replacement first within a layer
        if (s.layer, s.param) not in seen:
            seen.add((s.layer, s.param))
            pairs.append(LocalizedPair(layer=s.layer, api=s.api, param=s.param, old=s.old, new=s.new))
    doc.reproduced, doc.note, doc.layers, doc.top1_rate = report.reproduced, report.note, len(table), top1_rate(table)
    doc.localized, doc.cradle, doc.report = pairs, report.cradle, report
    return doc


def _consistent_rates(unit: Unit, store: RunStore, rows: list[ResultRow], pool: Pool, cfg: LocalizeConfig,
                      limit: int) -> int:
    """Top-1 change rates of up to ``limit`` consistent network-level cases (chosen with the
    unit's rng), per backend pair; appended case by case, so a rerun continues."""
    table = ResultsTable(store.localize_dir / "consistent.jsonl")
    done = table.done_ids()
    # consistent in the paper's sense: every backend ran, no label flip and no NaN (a value
    # deviation is not a label flip: those cases belong to the consistent sample too)
    passing = sorted((r for r in rows if set(r.kinds) <= CONSISTENT_KINDS and r.search_id is None
                      and store.has_variant(r.id)), key=lambda r: r.id)
    if not passing or limit <= 0:
        return len(done)
    chosen = np.random.default_rng([int(unit.settings.get("rng", 0)), 4]).permutation(len(passing))[:limit]
    seed = with_inputs(read_seed(unit.seed), unit.inputs, field=None)  # the inputs its fuzz run used
    loc = Localizer(pool, {}, cfg)
    for k in sorted(int(i) for i in chosen):
        r = passing[k]
        for pair in sorted(r.pairs):
            rid = f"{r.id}@{pair}"
            if rid in done:
                continue
            spec = store.load_variant(r.id)
            rows_in = list(r.input_rows)[: cfg.max_inputs]
            case = TestCase(r.id, spec, dict(seed.weights or {}), {n: v[rows_in] for n, v in seed.inputs.items()})
            loc.ex.complete_weights(case, int(r.weight_seed))  # type: ignore[arg-type] # network rows have it
            got = loc.rate_table(spec, case.weights, case.inputs, pair.split("|"))
            row = {"id": rid, "case_id": r.id, "pair": pair, "seed": unit.seed, "unit": unit.id}
            if isinstance(got, str):
                row.update({"top1_rate": None, "error": got[:300]})
            else:
                row.update({"top1_rate": top1_rate(got[0]), "layers": len(got[0])})
            table.append(row)
    return len(table.done_ids())
