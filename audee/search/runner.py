"""The search stage of ``audee fuzz``: GA (and/or random search) on chosen targets.

A target is the seed or a network-level variant that showed no failure (the paper's
flow: network mutation first, then fine-grained search where it found nothing).  Each
search run is one row in ``searches.jsonl`` and one trace in ``traces/``, both saying why
it stopped (``budget``, ``max_iter``, ``first_finding``, ``interrupted``: an interrupted run
is run again on resume); every confirmed failure is a case file and a row in
``results.jsonl`` the moment it is found.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from audee.cases.case import TestCase
from audee.engine.execute import Executor, Result
from audee.search.engine import INTERRUPTED, Search, SearchConfig, SearchOutcome
from audee.settings import SearchPlan  # the one shape of a search plan (re-exported here)
from audee.records.search import SearchRun, SearchTrace
from audee.cases.spec import ModelSpec, Weights
from audee.store import RunStore

log = logging.getLogger(__name__)


@dataclass
class Target:
    id: str
    spec: ModelSpec
    weights: Weights
    meta: dict[str, Any]


def run_searches(ex: Executor, targets: list[Target], inputs: dict[str, np.ndarray], plan: SearchPlan,
                 store: RunStore, save: Callable[[Result, dict[str, Any]], str],
                 progress: Callable[[int], Any] | None = None) -> list[SearchRun]:
    """Run every (target, search kind) not yet finished in the run's search runs; return
    their rows (``save``: writes a confirmed failure's case file and row, returns its id)."""
    done = finished_ids(store.search_runs())
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
            try:
                outcome: SearchOutcome = search.run()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM (audee.core.signals): say so, then unwind
                _record(store, sid, target, kind, scfg, row_index, search.outcome)
                raise
            rows.append(_record(store, sid, target, kind, scfg, row_index, outcome))
            if progress is not None:
                progress(1)
    return rows


def finished_ids(runs: Iterable[SearchRun]) -> set[str]:
    """The search runs a resumed run skips: those whose last row is not ``interrupted``
    (an interrupted one runs again, and its new row is the one readers keep)."""
    last = {r.id: r for r in runs}
    return {sid for sid, r in last.items() if r.stopped != INTERRUPTED}


def _record(store: RunStore, sid: str, target: Target, kind: str, scfg: SearchConfig,
            row_index: int, outcome: SearchOutcome) -> SearchRun:
    """A search run's trace and its row, both with why it stopped."""
    done = {k: v for k, v in outcome.to_json().items() if k != "trace"}
    store.write_trace(SearchTrace.model_validate({"id": sid, "config": scfg.model_dump(), "stopped": outcome.stopped,
                                                  "trace": outcome.trace}, strict=False))
    row = SearchRun.model_validate({"id": sid, "target": target.id, "search": kind, "level": scfg.level,
                                    "fitness": scfg.fitness, "input_row": row_index, **done}, strict=False)
    store.append_search(row)
    log.info("search %s %s: %s generations, %s evaluations, %d failures, best fitness %s", sid,
             f"stopped ({outcome.stopped})", row.generations, row.evaluations, len(row.failures), row.best_fitness)
    return row
