"""The search stage of ``audee fuzz``: GA (and/or random search) on chosen targets.

A target is the seed or a network-level variant that showed no failure (the paper's
flow: network mutation first, then fine-grained search where it found nothing).  Each
search run is one row in ``searches.jsonl`` and one trace in ``traces/``; every confirmed
failure is a case file and a row in ``results.jsonl`` the moment it is found.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from audee.case import TestCase
from audee.execute import Executor, Result
from audee.search.engine import Search, SearchConfig, SearchOutcome
from audee.spec import ModelSpec, Weights
from audee.store import ResultsTable
from audee.store.atomic import write_atomic

log = logging.getLogger(__name__)


@dataclass
class SearchPlan:
    config: SearchConfig
    searches: list[str] = field(default_factory=lambda: ["ga"])   # "ga", "random", or both
    on_consistent: int = 1          # K: how many failure-free targets get a search
    input_index: int | None = None  # seed input to start from (default: rotate per target)

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config.model_dump(), "searches": list(self.searches),
                "on_consistent": self.on_consistent, "input_index": self.input_index}


@dataclass
class Target:
    id: str
    spec: ModelSpec
    weights: Weights
    meta: dict[str, Any]


def run_searches(ex: Executor, targets: list[Target], inputs: dict[str, np.ndarray], plan: SearchPlan,
                 out: Path, table: ResultsTable, save: Callable[[Result, dict[str, Any]], str],
                 progress: Callable[[int], Any] | None = None) -> list[dict[str, Any]]:
    """Run every (target, search kind) not yet in ``searches.jsonl``; return their rows."""
    searches = ResultsTable(out / "searches.jsonl")
    done = searches.done_ids()
    rows = []
    n_inputs = int(next(iter(inputs.values())).shape[0])
    cfg = plan.config
    for t_index, target in enumerate(targets):
        row_index = plan.input_index if plan.input_index is not None else t_index
        x = {k: v[row_index % n_inputs: row_index % n_inputs + 1] for k, v in inputs.items()}
        for kind in plan.searches:
            sid = f"{target.id}-{kind}-{cfg.level}-{cfg.fitness}-r{cfg.rng}"
            if sid in done:
                continue
            scfg = cfg.model_copy(update={"search": kind})
            case = TestCase(target.id, target.spec, target.weights, x, {**target.meta, "search_id": sid})

            def on_failure(result: Result, sid: str = sid, scfg: SearchConfig = scfg) -> str:
                return save(result, {"search_id": sid, "search": scfg.model_dump(), "input_row": row_index})

            search = Search(ex, case, scfg, ex.pool.labels, on_failure, sid)
            log.info("search %s: %s search on %s at %s level, fitness %s, budget %s s", sid, kind, target.id,
                     cfg.level, cfg.fitness, cfg.budget_s)
            outcome: SearchOutcome = search.run()
            write_atomic(out / "traces" / f"{sid}.json",
                         json.dumps({"id": sid, "config": scfg.model_dump(), "trace": outcome.trace}, indent=1).encode())
            row = {"id": sid, "target": target.id, "search": kind, "level": cfg.level, "fitness": cfg.fitness,
                   "input_row": row_index, **{k: v for k, v in outcome.to_json().items() if k != "trace"}}
            searches.append(row)
            rows.append(row)
            log.info("search %s done: %s generations, %s evaluations, %d failures, best fitness %s", sid,
                     row.get("generations"), row.get("evaluations"), len(row.get("failures") or []),
                     row.get("best_fitness"))
            if progress is not None:
                progress(1)
    return rows
