"""Algorithm 1 of the paper on DEAP, and the random-search baseline with the same noise.

GA, per generation: evaluate the individuals whose fitness is unknown; confirm and
record every suspected failure at once (a full oracle run, then a case file); keep the
best ``m`` (``tools.selBest``); fill up to ``n`` with gene-wise crossover of two random
parents (rate r1: the share of genes taken from the first parent) followed, with rate
r2, by Cauchy-noise mutation.  Random search draws a fresh population around the seed
every generation.  Both stop at the wall-clock budget, at ``max_iter`` generations when
one is set (no cap by default), or after the first recorded failure when asked; the
outcome says which (:data:`STOP_REASONS`), or ``interrupted`` when Ctrl-C or SIGTERM
ended it (:attr:`Search.outcome` then holds the generations done).
"""
from __future__ import annotations

import hashlib
import itertools
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
from deap import base, creator, tools

from audee.cases.case import NONFINITE_SPECIALS, TestCase
from audee.engine.execute import Executor, Result
from audee.oracle.compute_dtype import consumer_compute_dtypes
from audee.oracle.distance import layer_distances
from audee.mutation import special
from audee.search.encoding import Encoding, cauchy_draw, scaled_noise
from audee.core.errors import AudeeError
from audee.reference.run import Reference
from audee.search.evaluate import Evaluation, PopulationEvaluator, ReferenceLane
from audee.settings import SearchSettings

if not hasattr(creator, "AudeeFitness"):
    creator.create("AudeeFitness", base.Fitness, weights=(1.0,))
    creator.create("AudeeIndividual", np.ndarray, fitness=creator.AudeeFitness)


@dataclass
class ChildDraws:
    """The random draws that make one child of the next generation, drawn before the
    fitness that picks its parents is known: which of the sorted parents (``pick``), the
    crossover's genes from the first (``take_a``, as :func:`uniform_crossover`'s mask),
    and the Cauchy mutation's standard values (None: not mutated; special values are
    drawn at mutation, from the genes)."""

    pick: tuple[int, int]
    take_a: np.ndarray
    cauchy: np.ndarray | None
    special: bool = False


def crossover_mask(take_a: np.ndarray) -> np.ndarray:
    """A uniform crossover's choice of genes (True: from the first parent) as the mask
    :func:`uniform_crossover` selects with: all 64 bits set where True."""
    return -take_a.view(np.int8).astype(np.int64)


def uniform_crossover(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.where(take_a, a, b)`` for float64 genes, as a bitwise select of their int64
    views under :func:`crossover_mask`: exact (bits are moved, never computed), and 0.09
    against 0.25 ms for LeNet-5's 61,706 weights (``where`` branches on a random mask);
    a generation makes its children serially, while the backends wait."""
    ai, bi = np.asarray(a, np.float64).view(np.int64), np.asarray(b, np.float64).view(np.int64)
    return (bi ^ ((ai ^ bi) & mask)).view(np.float64)


# Every knob of the search: one pydantic model (types, ranges, defaults, descriptions) in
# audee.settings, shared with the CLI flags, --search-config files and campaign configs.
SearchConfig = SearchSettings


BUDGET, MAX_ITER, FIRST_FINDING, INTERRUPTED = "budget", "max_iter", "first_finding", "interrupted"
#: why a search run stopped: its wall-clock budget spent, ``max_iter`` generations made, its
#: first recorded failure (``stop_at_first``), or an interrupt (Ctrl-C, SIGTERM)
STOP_REASONS = (BUDGET, MAX_ITER, FIRST_FINDING, INTERRUPTED)


@dataclass
class SearchOutcome:
    stopped: str | None = None      # one of STOP_REASONS once the run ends
    generations: int = 0
    evaluations: int = 0
    seconds: float = 0.0
    first_failure_s: float | None = None
    failures: list[str] = field(default_factory=list)   # case ids written
    trace: list[dict[str, Any]] = field(default_factory=list)
    best_fitness: float = 0.0

    @property
    def evals_per_s(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["evals_per_s"] = round(self.evals_per_s, 2)
        return d


OnFailure = Callable[[Result], str]


class Evaluator(Protocol):
    """Each individual's :class:`Evaluation` (fitness, the pair that made it, the failure
    kinds it is suspected of); ``meanwhile`` is called once while the backends compute."""

    def evaluate(self, population: list[np.ndarray],
                 meanwhile: Callable[[], Any] | None = None) -> list[Evaluation]: ...


def reference_lane(executor: Executor, case: TestCase) -> ReferenceLane:
    """The float64 reference a ``precision`` search evaluates on: the executor's reference
    (one with the defaults when the run has none: the search's suspects are confirmed by
    the executor, and a precision finding needs it), run once on the search's seed case to
    find the backend that computes it.  A one-line error when no backend does."""
    if executor.reference is None:
        executor.reference = Reference()
    rec, wide, tensors = executor.reference.run(executor, case)
    if not tensors or rec.backend is None:
        why = "; ".join(f"{b}: {m}" for b, m in rec.refused.items()) or "no backend answered"
        raise AudeeError(f"the precision fitness needs a backend that runs the model in float64 ({why})",
                         field="--fitness")
    return ReferenceLane(rec.backend, wide.spec, wide.dtype)


class Search:
    """One search run over one (spec, seed input, weights).

    ``on_failure`` gets every confirmed failure (a full oracle run) and returns the id it
    was recorded under; without it the search only maximizes its fitness: suspects are
    neither confirmed nor recorded (localization's amplification).  ``profile_layers``
    adds the best individual's per-layer profile to each generation of the trace."""

    def __init__(self, executor: Executor, case: TestCase, cfg: SearchConfig, labels: list[str],
                 on_failure: OnFailure | None = None, case_prefix: str = "search", *, profile_layers: bool = True):
        cfg.check()
        self.ex = executor
        self.case = case
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.rng)
        self.encoding = Encoding(cfg.level, case.inputs, case.weights, case.spec.inputs,
                                 special=cfg.special_rate > 0 and cfg.level != "weight",
                                 masks=case.spec.mask_inputs())
        # the nan fitness looks for a NaN the model makes: a NaN or Inf put into the input is no find
        self.special_kinds = [k for k in special.KINDS
                              if cfg.fitness != "nan" or k not in NONFINITE_SPECIALS]
        self.labels = labels
        self.evaluator = self.make_evaluator()
        self.scales = self.encoding.scales(cfg.input_scale, cfg.weight_scale)
        self.seed_genes = self.encoding.encode()
        self.on_failure = on_failure
        self.prefix = case_prefix
        self.profile_layers = profile_layers
        self.outcome = SearchOutcome()  # the last run's; what was done when an interrupt ended it
        self._seen: set[str] = set()
        self._per_kind: dict[tuple, int] = {}
        tb = base.Toolbox()
        tb.register("individual", self._individual)
        tb.register("mate", self._crossover)
        tb.register("mutate", self._mutate)
        tb.register("select", tools.selBest)
        self.toolbox = tb

    @property
    def fitness_name(self) -> str:
        """The fitness a case found by this search records."""
        return self.cfg.fitness

    def make_evaluator(self) -> Evaluator:
        """What gives each individual its fitness: the population on the backends, judged
        by the inference oracles (:class:`PopulationEvaluator`).  Another phase's search
        (the training phase's, :mod:`audee.search.train`) gives its own and keeps the rest
        of the engine."""
        cfg, ex = self.cfg, self.ex
        return PopulationEvaluator(ex.pool, self.case.spec, self.encoding, fitness=cfg.fitness, labels=self.labels,
                                   nan_backend=cfg.nan_backend, layer=cfg.layer, tie_margin=ex.tie_margin,
                                   tolerances=ex.tolerances,
                                   reference=reference_lane(ex, self.case) if cfg.fitness == "precision" else None)

    # ---- operators ---------------------------------------------------------------------------
    def _individual(self, genes: np.ndarray) -> Any:
        """``genes`` (a new array, never a parent's: it is repaired in place) as an individual."""
        # a view, not DEAP's list-based constructor: chromosomes can hold millions of genes
        ind = self.encoding.repair(np.asarray(genes, np.float64)).view(creator.AudeeIndividual)
        ind.fitness = creator.AudeeFitness()
        return ind

    def _fresh(self, draw: np.ndarray | None = None) -> Any:
        """An individual around the seed (``draw``: its :func:`cauchy_draw`, drawn ahead)."""
        if draw is None:
            draw = cauchy_draw(self.rng, self.seed_genes.shape[0], self.cfg.gene_rate)
        return self.toolbox.individual(self.seed_genes + scaled_noise(draw, self.scales))

    def _crossover(self, a: np.ndarray, b: np.ndarray, take_a: np.ndarray) -> np.ndarray:
        """The child's genes (the parents are valid: so is any mix of their genes)."""
        return uniform_crossover(take_a, a, b)

    def _mutate(self, genes: np.ndarray, draw: np.ndarray, special_values: bool = False) -> Any:
        """``genes`` (a child's, changed in place) plus Cauchy noise, as an individual."""
        genes += scaled_noise(draw, self.scales, genes, self.cfg.relative_scale)
        if special_values:
            inputs, _ = special.inject(self.encoding.inputs_of(genes), self.case.spec.inputs, self.rng, 1.0,
                                       self.special_kinds, masks=self.encoding.masks,
                                       dtypes=consumer_compute_dtypes(self.case.spec))
            genes = self.encoding.with_inputs(genes, inputs)
        return self.toolbox.individual(genes)

    def _draw_generation(self) -> list[Any]:
        """Every random draw of the next generation that does not depend on this one's
        fitness, in a fixed order (the same rng seed gives the same search).  It runs on a
        thread while the backends evaluate this generation: at the weight level the draws
        (two vectors of every weight per child) took a fifth of a generation's wall time,
        with the backends idle.  Random search: each individual's noise; GA: one
        :class:`ChildDraws` per child."""
        cfg, size = self.cfg, self.seed_genes.shape[0]
        if cfg.search == "random":
            return [cauchy_draw(self.rng, size, cfg.gene_rate) for _ in range(cfg.population)]
        parents = min(cfg.parents, cfg.population)
        out = []
        for _ in range(cfg.population - parents):
            i, j = self.rng.choice(parents, 2, replace=parents < 2)
            take_a = crossover_mask(self.rng.random(size) < cfg.crossover_rate)
            mutated = self.rng.random() < cfg.mutation_rate
            out.append(ChildDraws(
                (int(i), int(j)), take_a,
                cauchy_draw(self.rng, size, cfg.gene_rate) if mutated else None,
                bool(mutated and self.encoding.special and self.rng.random() < cfg.special_rate)))
        return out

    def _next_generation(self, pop: list, draws: list[Any]) -> list:
        if self.cfg.search == "random":
            return [self._fresh(d) for d in draws]
        parents = self.toolbox.select(pop, self.cfg.parents)
        nxt = list(parents)
        for d in draws:
            genes = self.toolbox.mate(parents[d.pick[0]], parents[d.pick[1]], d.take_a)
            nxt.append(self.toolbox.individual(genes) if d.cauchy is None
                       else self.toolbox.mutate(genes, d.cauchy, d.special))
        return nxt

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> SearchOutcome:
        """The search to its end; on an interrupt :attr:`outcome` holds what was done,
        stopped ``interrupted``, and the interrupt goes on."""
        self.outcome = SearchOutcome()
        t0 = time.perf_counter()
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="audee-search-draws") as drawer:
                return self._run(drawer, self.outcome, t0)
        except KeyboardInterrupt:
            self.outcome.stopped = INTERRUPTED
            self.outcome.seconds = time.perf_counter() - t0
            raise

    def _run(self, drawer: ThreadPoolExecutor, out: SearchOutcome, t0: float) -> SearchOutcome:
        cfg = self.cfg
        pop = [self._fresh() for _ in range(cfg.population)]
        for gen in (range(cfg.max_iter) if cfg.max_iter is not None else itertools.count()):
            todo = [ind for ind in pop if not ind.fitness.valid]
            t_eval = time.perf_counter()
            last = cfg.max_iter is not None and gen + 1 >= cfg.max_iter
            # the next generation's draws, while the backends compute (nothing else draws from the rng meanwhile)
            pending: list[Future] = []
            evals = self.evaluator.evaluate(todo, meanwhile=None if last else (
                lambda: pending.append(drawer.submit(self._draw_generation))))
            draws = pending[0] if pending else None
            eval_s = time.perf_counter() - t_eval
            for ind, ev in zip(todo, evals):
                ind.fitness.values = (ev.fitness if np.isfinite(ev.fitness) else 1e300,)
                ind.pair, ind.suspect, ind.ref = ev.pair, ev.suspect, ev.ref
            found = self._record_failures(pop, gen)
            out.evaluations += len(todo)
            if found and out.first_failure_s is None:
                out.first_failure_s = time.perf_counter() - t0
            out.failures += found
            best = max(pop, key=lambda ind: ind.fitness.values[0])
            fits = np.array([ind.fitness.values[0] for ind in pop])
            out.trace.append({"generation": gen, "best": float(best.fitness.values[0]),
                              "mean": float(np.mean(fits[np.isfinite(fits)])) if np.isfinite(fits).any() else None,
                              "pair": getattr(best, "pair", ""), "evaluated": len(todo),
                              "eval_s": round(eval_s, 4), "failures": len(found),
                              "elapsed_s": round(time.perf_counter() - t0, 4),
                              "layers": self._layer_profile(best) if self.profile_layers else {}})
            out.generations = gen + 1
            out.best_fitness = float(best.fitness.values[0])
            out.stopped = (FIRST_FINDING if cfg.stop_at_first and out.failures else MAX_ITER if draws is None
                           else BUDGET if time.perf_counter() - t0 >= cfg.budget_s else None)
            if out.stopped is not None:
                break
            pop = self._next_generation(pop, draws.result())
        out.seconds = time.perf_counter() - t0
        return out

    def _record_failures(self, pop: list, gen: int) -> list[str]:
        """Confirm suspects with a full oracle run and write each as a case file now."""
        written: list[str] = []
        if self.on_failure is None:
            return written
        suspects = [ind for ind in pop if getattr(ind, "suspect", None)]
        suspects.sort(key=lambda ind: -ind.fitness.values[0])
        for ind in suspects:
            if len(written) >= self.cfg.max_cases_per_generation:
                break
            kind = tuple(sorted(ind.suspect))
            if self._per_kind.get(kind, 0) >= self.cfg.max_cases_per_kind:
                continue  # this kind of failure is already recorded enough times in this run
            digest = hashlib.sha1(np.ascontiguousarray(ind).tobytes()).hexdigest()[:12]
            if digest in self._seen:
                continue
            self._seen.add(digest)
            inputs = self.encoding.inputs_of(ind)
            carried = special.describe(inputs, self.case.spec.inputs)
            case = TestCase(f"{self.prefix}-g{gen:03d}-{digest}", self.case.spec,
                            self.encoding.weights_of(ind), inputs,
                            {**self.case.meta, "generation": gen, "level": self.cfg.level,
                             "fitness": self.fitness_name, "search": self.cfg.search,
                             **({"special_values": carried} if carried else {})})
            result = self.ex.run(case)
            if result.verdict.failed:
                self._per_kind[kind] = self._per_kind.get(kind, 0) + 1
                written.append(self.on_failure(result))
        return written

    def _layer_profile(self, best: Any) -> dict[str, float]:
        """Per-layer view of the best individual (the data behind the paper's Figure 3):
        layer distances for the inconsistency fitness, max-min spreads for NaN.  The
        outputs come from the workers' kept runs: no forward pass is repeated, and an
        individual that stays best keeps its profile."""
        if getattr(best, "profile", None) is not None:
            return best.profile
        pair = getattr(best, "pair", "")
        labels = pair.split("|") if pair else [self.evaluator.nan_backend]
        tag, row = best.ref
        try:
            got = self.ex.pool.call_many(labels, "kept_layers", tag=tag, rows=[row])
        except RuntimeError:
            return {}
        layers = [got[label] for label in labels]
        if any(v is None for v in layers):
            return {}
        if len(layers) == 2:
            profile = {k: float(v) for k, v in layer_distances(layers[0], layers[1]).items()}
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                profile = {k: float(np.nanmax(v).astype(np.float64) - np.nanmin(v).astype(np.float64)) if v.size and np.issubdtype(v.dtype, np.floating)
                           else 0.0 for k, v in layers[0].items()}
        best.profile = profile
        return profile
