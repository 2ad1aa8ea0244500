"""The search stage of the training phase (issue 29, part 4): Algorithm 1's GA over the
inputs and/or weights of a target, with the gradient-distance fitness.

``audee fuzz --phase train --level input|weight|input-weight`` searches each target (the
seed, or the first K variants that passed) after the network stage, as the inference
search does: one chromosome per individual (:class:`audee.search.encoding.Encoding`: the
batch's inputs, every weight, or both; Cauchy noise at a share of each input's range or
weight's spread), the best ``parents`` kept, children by uniform crossover and Cauchy
mutation, until the budget (or ``max_iter`` generations).  An individual is one training
step of the target on every backend that trains, all at once (the step compiled once per
target: weights and inputs are its arguments); its fitness is
:func:`audee.fitness.gradient.gradient_fitness`, the largest pair's normalized distance
over the output, the loss and every weight's gradient.  An individual above 1 is a
suspect: confirmed by the full training-phase oracles and diagnosis
(:class:`audee.train.run.TrainExecutor`), its case file written like any other.  The
search's setup (loss, optimizer, targets) is the target case's own.  Rows go to
``searches.jsonl`` as the inference search's (fitness ``gradient``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from audee.case import TestCase
from audee.fitness.gradient import gradient_fitness
from audee.records.search import SearchRun
from audee.search.encoding import Encoding, cauchy_draw, scaled_noise
from audee.settings import SearchPlan, SearchSettings
from audee.store.runstore import RunStore
from audee.train.run import TrainExecutor, TrainResult
from audee.train.setup import TrainSetup, train_spec

log = logging.getLogger(__name__)
SEARCH_ROWS = 8   # inputs of a training search's batch (the batch statistics need more than one)
FITNESS = "gradient"


@dataclass
class TrainSearchOutcome:
    stopped: str = "budget"
    generations: int = 0
    evaluations: int = 0
    seconds: float = 0.0
    best: float = 0.0
    pair: str = ""
    first_failure_s: float | None = None
    failures: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)


def train_search(ex: TrainExecutor, case: TestCase, cfg: SearchSettings, on_failure: Callable[[TrainResult], str],
                 search_id: str) -> TrainSearchOutcome:
    """One GA (or random) search over ``case`` (module docstring)."""
    rng = np.random.default_rng(cfg.rng)
    setup = ex.setup_for(case)
    once = TrainSetup(setup.loss, setup.optimizer, setup.learning_rate, 1, setup.target_seed, setup.from_logits)
    spec = train_spec(case.spec).spec
    enc = Encoding(cfg.level, case.inputs, case.weights, case.spec.inputs, masks=case.spec.mask_inputs())
    scales = enc.scales(cfg.input_scale, cfg.weight_scale)
    base = enc.encode()
    labels = ex.trainers
    out = TrainSearchOutcome()
    t0 = time.perf_counter()
    recorded = 0

    def evaluate(genes: np.ndarray) -> float:
        got = ex._train_on(spec, enc.weights_of(genes), enc.inputs_of(genes), once, labels)
        out.evaluations += 1
        value, pair = gradient_fitness(got, ex.tolerances)
        if value > out.best:
            out.best, out.pair = value, pair
        return value

    def mutate(genes: np.ndarray) -> np.ndarray:
        draw = cauchy_draw(rng, enc.size, cfg.gene_rate)
        return enc.repair(genes + scaled_noise(draw, scales, genes, cfg.relative_scale or 0.0))

    def fresh() -> np.ndarray:
        return mutate(base.copy())

    population = [base.copy()] + [fresh() for _ in range(cfg.population - 1)]
    fitness: list[float | None] = [None] * len(population)
    while True:
        for i, genes in enumerate(population):
            if fitness[i] is None:
                fitness[i] = evaluate(genes)
        order = sorted(range(len(population)), key=lambda i: -float(fitness[i] or 0.0))
        out.generations += 1
        found = 0
        for i in order:
            if (fitness[i] or 0.0) <= 1.0 or found >= cfg.max_cases_per_generation \
                    or recorded >= cfg.max_cases_per_kind:
                break
            suspect = TestCase(f"{search_id}-g{out.generations}-i{i}", case.spec, enc.weights_of(population[i]),
                               enc.inputs_of(population[i]), {"train": setup.to_json()})
            result = ex.run(suspect)
            if result.verdict.failed:
                out.failures.append(on_failure(result))
                out.first_failure_s = out.first_failure_s or time.perf_counter() - t0
                found += 1
                recorded += 1
        out.trace.append({"generation": out.generations, "best": float(fitness[order[0]] or 0.0),
                          "mean": float(np.mean([f or 0.0 for f in fitness])), "pair": out.pair,
                          "evaluated": len(population), "failures": found,
                          "elapsed_s": round(time.perf_counter() - t0, 3)})
        out.seconds = time.perf_counter() - t0
        if out.failures and cfg.stop_at_first:
            out.stopped = "first_finding"
            break
        if cfg.max_iter is not None and out.generations >= cfg.max_iter:
            out.stopped = "max_iter"
            break
        if out.seconds >= cfg.budget_s:
            out.stopped = "budget"
            break
        if cfg.search == "random":
            population = [base.copy()] + [fresh() for _ in range(cfg.population - 1)]
            fitness = [fitness[0]] + [None] * (cfg.population - 1)
            continue
        keep = order[: cfg.parents]
        parents = [population[i] for i in keep]
        children, child_fitness = list(parents), [fitness[i] for i in keep]
        while len(children) < cfg.population:
            a, b = rng.choice(len(parents), 2)
            take = rng.random(enc.size) < cfg.crossover_rate
            child = np.where(take, parents[a], parents[b])
            if rng.random() < cfg.mutation_rate:
                child = mutate(child)
            children.append(enc.repair(child))
            child_fitness.append(None)
        population, fitness = children, child_fitness
    return out


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
                            first_failure_s=got.first_failure_s, failures=got.failures, best_fitness=got.best,
                            evals_per_s=round(got.evaluations / got.seconds, 3) if got.seconds else 0.0)
            store.append_search(row)
            rows.append(row)
            if progress is not None:
                progress(1)
    return rows


__all__ = ["FITNESS", "SEARCH_ROWS", "TrainSearchOutcome", "run_train_searches", "train_search"]
