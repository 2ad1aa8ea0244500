"""The search stage of the training phase: Algorithm 1's GA over the
inputs and/or weights of a target, with the gradient-distance fitness.

``audee fuzz --phase train --level input|weight|input-weight`` searches each target (the
seed, or the first K variants that passed) after the network stage, as the inference
search does, on its engine (:class:`audee.search.engine.Search`: DEAP, the same draws,
selection and stopping): one chromosome per individual (:class:`audee.search.encoding.Encoding`: the
batch's inputs, every weight, or both; Cauchy noise at a share of each input's range or
weight's spread), the best ``parents`` kept, children by uniform crossover and Cauchy
mutation, until the budget (or ``max_iter`` generations).  An individual is one training
step of the target on every backend that trains, all at once (the step compiled once per
target: weights and inputs are its arguments); its fitness is
:func:`audee.fitness.gradient.gradient_fitness`, the largest pair's normalized distance
over the output, the loss and every weight's gradient.  An individual above 1 is a
suspect: confirmed by the full training-phase oracles and diagnosis
(:class:`audee.engine.train.TrainExecutor`), its case file written like any other.  The
search's setup (loss, optimizer, targets) is the target case's own.  Rows go to
``searches.jsonl`` as the inference search's (fitness ``gradient``).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from audee.cases.case import TestCase
from audee.fitness.gradient import gradient_fitness
from audee.records.search import SearchRun
from audee.search.engine import Search, SearchOutcome
from audee.search.evaluate import Evaluation
from audee.settings import SearchPlan, SearchSettings
from audee.store.runstore import RunStore
from audee.engine.train import TrainExecutor, TrainResult
from audee.train.setup import TrainSetup, train_spec

log = logging.getLogger(__name__)
SEARCH_ROWS = 8   # inputs of a training search's batch (the batch statistics need more than one)
FITNESS = "gradient"
SUSPECT = "train_deviation"   # what an individual above 1 is suspected of (confirmed by the full oracles)


class TrainStepEvaluator:
    """Each individual as one training step of the target on every backend that trains (a
    step compiled once per target: weights and inputs are its arguments), its fitness the
    gradient distance (:func:`audee.fitness.gradient.gradient_fitness`)."""

    def __init__(self, ex: TrainExecutor, search: Search, setup: TrainSetup):
        self.ex = ex
        self.encoding = search.encoding
        self.spec = train_spec(search.case.spec).spec
        self.once = TrainSetup(setup.loss, setup.optimizer, setup.learning_rate, 1, setup.target_seed,
                               setup.from_logits)
        self.labels = ex.trainers
        self.evaluations = 0

    def evaluate(self, population: list[np.ndarray],
                 meanwhile: Callable[[], Any] | None = None) -> list[Evaluation]:
        out = []
        for i, genes in enumerate(population):
            got = self.ex._train_on(self.spec, self.encoding.weights_of(genes), self.encoding.inputs_of(genes),
                                    self.once, self.labels)
            if i == 0 and meanwhile is not None:
                meanwhile()   # the next generation's draws, while the backends train the rest
            value, pair = gradient_fitness(got, self.ex.tolerances)
            out.append(Evaluation(value, pair, [SUSPECT] if value > 1.0 else []))
        if not population and meanwhile is not None:
            meanwhile()
        self.evaluations += len(population)
        return out


class TrainSearch(Search):
    """Algorithm 1 (the engine of :mod:`audee.search.engine`: DEAP, Cauchy noise, the same
    selection, crossover and stopping) with the training step as its evaluation; a
    suspect is confirmed by :class:`TrainExecutor` and written as a training case."""

    def __init__(self, ex: TrainExecutor, case: TestCase, cfg: SearchSettings,
                 on_failure: Callable[[TrainResult], str] | None, case_prefix: str):
        self.setup = ex.setup_for(case)
        case = TestCase(case.id, case.spec, case.weights, case.inputs,
                        {**(case.meta or {}), "train": self.setup.to_json()})
        super().__init__(ex, case, cfg, ex.trainers, on_failure, case_prefix, profile_layers=False)

    @property
    def fitness_name(self) -> str:
        return FITNESS

    def make_evaluator(self) -> TrainStepEvaluator:
        return TrainStepEvaluator(self.ex, self, self.setup)


def train_search(ex: TrainExecutor, case: TestCase, cfg: SearchSettings, on_failure: Callable[[TrainResult], str],
                 search_id: str) -> SearchOutcome:
    """One GA (or random) search over ``case`` (module docstring)."""
    return TrainSearch(ex, case, cfg, on_failure, search_id).run()


def run_train_searches(ex: TrainExecutor, targets: list[Any], inputs: dict[str, np.ndarray], plan: SearchPlan,
                       store: RunStore, save: Callable[[TrainResult, dict[str, Any]], str],
                       progress: Callable[[int], Any] | None = None) -> list[SearchRun]:
    """Every (target, search kind) not searched yet; their ``searches.jsonl`` rows."""
    done = {r.id for r in store.search_runs() if r.stopped != "interrupted"}
    rows = []
    n = int(next(iter(inputs.values())).shape[0])
    cfg = plan.config
    for t_index, target in enumerate(targets):
        start = (plan.input_index if plan.input_index is not None else t_index * SEARCH_ROWS) % n
        idx = [(start + k) % n for k in range(min(SEARCH_ROWS, n))]
        x = {k: v[idx] for k, v in inputs.items()}
        for kind in plan.searches:
            sid = f"{target.id}-{kind}-{cfg.level}-{FITNESS}-r{cfg.rng}"
            if sid in done:
                continue
            scfg = cfg.model_copy(update={"search": kind})
            case = TestCase(target.id, target.spec, target.weights, x, {**target.meta})

            def on_failure(result: TrainResult, sid: str = sid, scfg: SearchSettings = scfg) -> str:
                return save(result, {"search_id": sid, "search": scfg.model_dump(), "input_row": idx[0]})

            log.info("training search %s: %s at %s level on %s, budget %s s", sid, kind, cfg.level, target.id,
                     cfg.budget_s)
            got = train_search(ex, case, scfg, on_failure, sid)
            row = SearchRun(id=sid, target=target.id, search=kind, level=cfg.level, fitness=FITNESS,
                            input_row=idx[0], stopped=got.stopped, generations=got.generations,
                            evaluations=got.evaluations, seconds=round(got.seconds, 3),
                            first_failure_s=got.first_failure_s, failures=got.failures, best_fitness=got.best_fitness,
                            evals_per_s=round(got.evaluations / got.seconds, 3) if got.seconds else 0.0)
            store.append_search(row)
            rows.append(row)
            if progress is not None:
                progress(1)
    return rows


__all__ = ["FITNESS", "SEARCH_ROWS", "TrainSearch", "TrainStepEvaluator", "run_train_searches", "train_search"]
