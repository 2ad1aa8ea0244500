"""``audee fuzz``: network-level mutation of one seed (``--seed``), API-level cases built
around each layer API (``--api``) or ``keras.ops`` calls (``--op``), every test case run on
every backend.

One loop (:class:`FuzzLoop`) drives any case level (:mod:`audee.levels`): the level names
its case ids, makes its cases and gives its runner; the loop resumes by case id (ids
already in ``results.jsonl`` are skipped), keeps one case in flight, writes a row per case
and a case file per failing one, then the repro scripts and the summary.  Case ``i`` is drawn
from its own random stream, so a run is reproducible, resumable and shardable.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
from pydantic import ConfigDict, Field

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.cases.case import Kind, TestCase
from audee.core.errors import ConfigError
from audee.oracle.exercised import exercised
from audee.repro import write_bug_repros
from audee.engine.execute import Result, Submitted
from audee.levels import LEVELS, Level, Runner, level_named, run_level, source_name, targets_header
from audee.levels.base import judging, unbuildable
from audee.reference.run import reference_workers
from audee.mutation.seeds import Seed
from audee.cases.spec import weights_key
from audee.records.rows import ResultRow
from audee.records.search import SearchRun
from audee.store import CaseRecord, RunStore
from audee.store.results import PHASES_FIELD, phase_summary, phases_field
from audee.store.lock import dir_lock
from audee.settings import RESUME_ABSENT, RESUME_FREE, FuzzSettings, SearchPlan

log = logging.getLogger(__name__)


class FuzzConfig(FuzzSettings):
    """A fuzz run: the settings (types, ranges, defaults: audee.settings.FuzzSettings, the
    same model behind the `audee fuzz` flags and campaign unit settings), the backends and
    the output directory.  ``FuzzConfig(backends, out, variants=..., ...)``.  Frozen and
    passed down whole: every stage reads the one object."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    backends: list[BackendRef] = Field(strict=False)
    out: Path = Field(strict=False)

    def __init__(self, backends: list[BackendRef] | None = None, out: Path | str | None = None, /, **data: Any):
        if backends is not None:
            data["backends"] = backends
        if out is not None:
            data["out"] = out
        super().__init__(**data)

    def to_json(self) -> dict[str, Any]:
        """``config.json``'s settings: flat, as flags name them (the form every audee wrote, so
        an older run directory resumes), then the backends and the directory."""
        return {**self.flat(), "backends": [b.to_json() for b in self.backends], "out": str(self.out)}


@dataclass
class FuzzStats:
    run: int = 0
    skipped: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    pairs: dict[str, int] = field(default_factory=dict)
    failing_cases: int = 0
    seconds: float = 0.0
    searches: list[SearchRun] = field(default_factory=list)

    def add(self, result: Result) -> None:
        self.run += 1
        kinds = result.verdict.kinds()
        for k in kinds:
            self.by_kind[k] = self.by_kind.get(k, 0) + 1
        for f in result.verdict.findings:
            if f.kind == Kind.INCONSISTENCY:
                self.pairs[f.detail.pair] = self.pairs.get(f.detail.pair, 0) + 1
        self.failing_cases += int(result.verdict.failed)


def case_record(result: Result, pool: Pool, extra: dict[str, Any], *,
                tie_margin: float | None = None, tolerances: dict[str, Any] | None = None) -> CaseRecord:
    """Everything needed to re-run and to localize a case: the result, the pool's
    backends and versions, the tie margin and deviation tolerances it was judged with,
    ``extra`` as provenance."""
    if result.reference is not None:  # judged against float64: a re-run asks for the same reference
        extra = {**extra, "reference": result.reference.to_json()}
    # bfloat16 arrays are widened to float32 when written (audee.store.casefile.widen_reduced_floats)
    return CaseRecord.from_result(result, pool.refs, pool.versions(),
                                  tie_margin=tie_margin, tolerances=tolerances, meta=extra)


def executor(pool: Pool, cfg: FuzzSettings, source: str = "network") -> Runner:
    """The runner of a run whose cases ``source`` makes (:func:`audee.levels.run_level`: the
    training level's under ``--phase train``)."""
    return run_level(source, cfg.phase).runner(pool, cfg)


def _regressions(v: Any) -> dict[str, Any]:
    """A row's record of its regression findings: each version pair (older|newer where the
    versions order it) and the versions each side's worker reported; nothing without one."""
    found = [f for f in v.findings if f.kind == Kind.REGRESSION]
    if not found:
        return {}
    return {"regression_pairs": sorted("|".join(f.backends) for f in found),
            "versions": {b: dict(vs) for f in found for b, vs in sorted(f.detail.versions.items())}}


def result_row(result: Result, extra: dict[str, Any], *, meta: dict[str, Any] | None = None) -> ResultRow:
    """The results-table row of a case (``extra``: its provenance, audee.records.ResultRow's
    fields); ``meta``: its provenance with the mutation record as dicts (default: the case's
    own meta), read for the bug signatures."""
    from audee.triage.signature import case_signatures

    v = result.verdict
    backend_status = {}
    for label, o in result.outcomes.items():
        backend_status[label] = "ok" if o.ok else f"{o.failure.kind}:{o.failure.phase}"
    return ResultRow.build({
        "id": result.case.id,
        "status": v.status,
        "kinds": v.kinds(),
        "backends": backend_status,
        # one line per failing backend: rejected models get no case file, so this is where
        # a user reads why (the report's backend-errors table)
        "errors": {label: " ".join((o.failure.message or o.failure.kind).split())[:300]
                   for label, o in result.outcomes.items() if not o.ok},
        "pairs": result.pairs,
        # backend -> its first non-finite layer (rows before this read {layer: backend})
        "nan": {b: layer for f in v.findings if f.kind == Kind.NAN for b, layer in f.detail.first_layer.items()},
        "nan_finite": sorted({b for f in v.findings if f.kind == Kind.NAN for b in f.detail.finite_backends}),
        "nan_strong": any(f.detail.strong for f in v.findings if f.kind == Kind.NAN),
        # NaN/Inf in the input that every backend propagated identically: information, not a failure
        "propagated_nonfinite": any(f.kind == Kind.NAN_PROPAGATED for f in v.findings),
        "inconsistent_pairs": sorted(f.detail.pair for f in v.findings if f.kind == Kind.INCONSISTENCY),
        "deviating_pairs": sorted(f.detail.pair for f in v.findings if f.kind == Kind.DEVIATION),
        # one backend under two releases that differ: the pair and what each side runs (audee/oracle/regression.py)
        **_regressions(v),
        # the equivalence oracle: each rule applied to the case and its status (audee/equivalence/check.py)
        **({"equivalence": dict(result.equivalence)} if result.equivalence else {}),
        # the float64 reference: every backend's error against it (audee/reference)
        **({"reference": result.reference.to_json()} if result.reference is not None else {}),
        # one per failure finding (audee.triage.signature): summaries and reports count unique bugs by these
        "signatures": [sig.to_json() for sig in case_signatures(v, result.case.spec,
                                                                 result.case.meta if meta is None else meta)],
        # every (layer API, parameter, value) the case ran: the report's coverage tables (an op case: none)
        "exercised": exercised(result.case.spec) if result.case.spec is not None else [],
        # an op case: what its contract leaves undefined, not compared (audee.oracle.ops)
        **({"undefined": list(result.undefined)} if getattr(result, "undefined", None) else {}),
        "seconds": round(result.seconds, 4),
        PHASES_FIELD: phases_field(result.phases),  # where each backend's time went
        **extra,
    })


def start_pool(cfg: FuzzConfig, log_dir: Path) -> Pool:
    """Start the workers for ``cfg.backends`` (and the float64 reference's own, when the run
    asks for one and does not test the backends that compute it); a backend that cannot
    start is an error, and so is a reference nothing can compute."""
    reference = reference_workers(cfg, cfg.backends)
    return Pool(cfg.backends, log_dir, timeout=cfg.timeout, threads=cfg.threads, reference=reference).start_or_fail(
        logs=log_dir, field="--backends")


def run_config(cfg: FuzzConfig, header: dict[str, Any]) -> dict[str, Any]:
    """A run's ``config.json`` document (``header`` + the settings), as JSON reads it back."""
    return json.loads(json.dumps({**header, **cfg.to_json()}, default=str))


def resume_conflicts(old: dict[str, Any], new: dict[str, Any], free: tuple[str, ...] = RESUME_FREE) -> list[str]:
    """The settings of ``new`` that differ from a run directory's ``old`` ``config.json``,
    but those ``free`` to change on a resume (:data:`audee.settings.RESUME_FREE`) and the
    directory itself.  A setting ``old`` lacks (a file of an audee before it) is compared as
    the value that audee ran with (:data:`audee.settings.RESUME_ABSENT`), else not at all."""
    return [k for k in new if k not in free and k != "out" and _before(old, k) != new[k]
            and (k in old or k in RESUME_ABSENT)]


def _before(old: dict[str, Any], key: str) -> Any:
    """A setting's value in a run directory's ``config.json``, or the value an audee before
    the setting ran with (:data:`audee.settings.RESUME_ABSENT`) where the file lacks it."""
    return old[key] if key in old else RESUME_ABSENT.get(key)


def check_resume(store: RunStore, doc: dict[str, Any], *, finished: bool = False) -> None:
    """A run directory that holds a run (its ``config.json``) resumes only with that run's
    settings: another one is a :class:`ConfigError` naming each, ``config.json`` untouched
    (``finished``: a campaign unit committed, which ``variants`` cannot extend either).  A
    setting the file lacks and whose older behaviour is no one value is logged, not compared."""
    old = store.config()
    if not old or not any(_has_bytes(store.root / name) for name in ("results.jsonl", "searches.jsonl")):
        return  # no run there, or one that stopped before its first row: nothing to keep apart
    differ = resume_conflicts(old, doc, tuple(k for k in RESUME_FREE if not (finished and k == "variants")))
    if differ:
        shown = "; ".join(f"{k}: {_short(old[k]) if k in old else f'absent (an older audee: {_short(_before(old, k))})'}"
                          f" there, {_short(doc[k])} now" for k in differ)
        raise ConfigError(f"holds a run with other settings ({shown}); a rerun resumes with the same settings "
                          f"(only {', '.join(RESUME_FREE)} may change): give another --out for a new run",
                          source=str(store.root / "config.json"), field=", ".join(differ))
    unknown = [k for k in doc if k not in old and k not in RESUME_ABSENT and k not in RESUME_FREE and k != "out"]
    if unknown:
        log.warning("%s: written by an older audee without %s; resumed with %s", store.root / "config.json",
                    ", ".join(unknown), ", ".join(f"{k}={_short(doc[k])}" for k in unknown))


def _has_bytes(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _short(value: Any) -> str:
    """A setting's value in a one-line message: backends by their labels, long values cut."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and "label" in v for v in value):
        return ",".join(str(v["label"]) for v in value)
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _run(cfg: FuzzConfig, header: dict[str, Any], pool: Pool | None,
         body: Callable[[Pool, RunStore, FuzzStats], None]) -> FuzzStats:
    """One run directory, under its lock: ``config.json`` (``header`` + the settings; a
    directory holding a run with other settings is refused, :func:`check_resume`), the
    workers (``pool``, or started here for ``cfg.backends``), then ``body``."""
    store = RunStore(cfg.out)
    with dir_lock(store.root):  # one writer per directory (re-entrant: a campaign or cmd_fuzz may hold it)
        doc = run_config(cfg, header)
        check_resume(store, doc)
        store.prepare()
        store.write_config(doc)
        stats = FuzzStats()
        t0 = time.perf_counter()
        if pool is None:
            with start_pool(cfg, store.logs) as own:
                body(own, store, stats)
        else:
            pool.set_timeout(cfg.timeout)
            body(pool, store, stats)
        stats.seconds = time.perf_counter() - t0
    return stats


class FuzzLoop:
    """One fuzz run's loop over any level (:class:`audee.levels.base.Level`): the level's
    runner on the run's workers, its cases made when asked for and resumed by case id, one
    case in flight (:func:`_run_pipelined`), a row per case and a case file per failing
    one, then one repro script per unique bug.  ``fuzz``, ``fuzz_apis`` and ``fuzz_ops`` are
    this loop over the network, API and op levels."""

    def __init__(self, level: Level, cfg: FuzzConfig, pool: Pool, store: RunStore, stats: FuzzStats,
                 progress: Callable[[int], Any] | None = None):
        self.level, self.cfg, self.pool, self.store, self.stats, self.progress = level, cfg, pool, store, stats, progress
        self.runner: Runner = level.runner(pool, cfg)

    def stage(self, targets: list[str], context: dict[str, Any] | None = None) -> None:
        """Every case of ``targets`` (seeds, APIs, ops) not yet in the results table."""
        done = self.store.done_ids()
        ids = [(t, i) for t in targets for i in self.level.indices(self.cfg)]
        todo = [(t, i) for t, i in ids if self.level.case_id(t, i) not in done]
        self.stats.skipped = len(ids) - len(todo)
        log.info("%s stage: %d test cases to run, %d already in %s", self.level.label, len(todo),
                 self.stats.skipped, self.store.results_path)
        self.level.drive(self, self.runner, todo, dict(context or {}))

    def pipelined(self, cases: Iterable[tuple[Any, dict[str, Any]]]) -> None:
        _run_pipelined(self.runner, cases, self.cfg, self.store, self.stats, self.progress)

    def record(self, result: Result, extra: dict[str, Any]) -> None:
        _record(result, self.pool, extra, self.cfg, self.store, self.stats, self.progress)

    def save_failure(self, result: Result, extra: dict[str, Any]) -> str:
        return _save_failure(result, self.pool, self.cfg, self.store, self.stats, extra)

    def repros(self) -> None:
        """One standalone script per unique bug, workers still up."""
        write_bug_repros(self.store, self.pool, list(self.store.rows()))


def fuzz(seed: Seed, inputs: dict[str, np.ndarray], cfg: FuzzConfig,
         progress: Callable[[int], Any] | None = None, plan: SearchPlan | None = None,
         pool: Pool | None = None) -> FuzzStats:
    """Network-level stage over ``cfg.variants`` variants, then (with a plan) the search
    stage on the first ``plan.on_consistent`` failure-free targets.  ``pool`` (workers for
    exactly ``cfg.backends``) lets a campaign keep its workers across runs."""
    level = run_level("network", cfg.phase)
    level.check(cfg)
    log.info("fuzz %s on %s: %d variants, rng %d, batch %d -> %s%s", seed.name,
             ", ".join(r.label for r in cfg.backends), cfg.variants, cfg.rng, cfg.batch, cfg.out,
             f"; then {', '.join(plan.searches)} search at {plan.config.level} level" if plan else "")
    header = {"seed": seed.name, "search": plan.to_json() if plan else None,
              "inputs": weights_key({k: [v] for k, v in inputs.items()})}  # the inputs' content: a rerun's are the same
    stats = _run(cfg, header, pool,
                 lambda p, store, st: _stages(level, seed, inputs, cfg, p, store, st, progress, plan))
    log.info("fuzz %s done in %.1f s: %d test cases run, %d resumed, %d failing, %d search runs", seed.name,
             stats.seconds, stats.run, stats.skipped, stats.failing_cases, len(stats.searches))
    return stats


def fuzz_apis(apis: list[str], cfg: FuzzConfig, progress: Callable[[int], Any] | None = None,
              pool: Pool | None = None) -> FuzzStats:
    """API-level fuzzing: ``cfg.variants`` cases per API of ``apis`` (configured names,
    :mod:`audee.mutation.apilevel`), ids ``api-<API>-v<i>``; resumable like :func:`fuzz`."""
    return fuzz_level("api", apis, cfg, progress, pool)


def fuzz_ops(ops: list[str], cfg: FuzzConfig, progress: Callable[[int], Any] | None = None,
             pool: Pool | None = None) -> FuzzStats:
    """Op-level fuzzing: ``cfg.variants`` calls of each ``keras.ops`` function of
    ``ops`` (configured names, :mod:`audee.mutation.oplevel`), ids ``op-<op>-v<i>``, on the
    Keras backends of ``cfg.backends``; resumable like :func:`fuzz`."""
    return fuzz_level("op", ops, cfg, progress, pool)


def fuzz_level(name: str, targets: list[str], cfg: FuzzConfig, progress: Callable[[int], Any] | None = None,
               pool: Pool | None = None) -> FuzzStats:
    """Any level's stage over ``targets`` by the level's name (:mod:`audee.levels`):
    ``cfg.variants`` cases per target, resumable like :func:`fuzz`; a level the registry
    adds is run here without an entry point of its own."""
    level = run_level(name, cfg.phase)
    level.check(cfg)  # a judgement the level cannot make: one line naming the flag
    log.info("fuzz %d %s targets on %s: %d cases each, rng %d -> %s", len(targets), level.label,
             ", ".join(r.label for r in cfg.backends), cfg.variants, cfg.rng, cfg.out)
    stats = _run(cfg, targets_header(name, targets), pool,
                 lambda p, store, st: _level_stage(level, targets, cfg, p, store, st, progress))
    log.info("fuzz of %d %s targets done in %.1f s: %d test cases run, %d resumed, %d failing", len(targets),
             level.label, stats.seconds, stats.run, stats.skipped, stats.failing_cases)
    return stats


def _level_stage(level: Level, targets: list[str], cfg: FuzzConfig, pool: Pool, store: RunStore,
                 stats: FuzzStats, progress: Callable[[int], Any] | None) -> None:
    """A run of one stage over ``targets`` (APIs or ops), then its repro scripts."""
    loop = FuzzLoop(level, cfg, pool, store, stats, progress)
    loop.stage(list(targets))
    loop.repros()


def _stages(level: Level, seed: Seed, inputs: dict[str, np.ndarray], cfg: FuzzConfig, pool: Pool,
            store: RunStore, stats: FuzzStats, progress: Callable[[int], Any] | None,
            plan: SearchPlan | None) -> None:
    loop = FuzzLoop(level, cfg, pool, store, stats, progress)
    ex = loop.runner
    loop.stage([seed.name], {"seed": seed, "inputs": inputs})
    if plan is not None:
        run_searches = level.searcher()  # the training phase's GA: the gradient-distance fitness
        targets = _search_targets(level, seed, cfg, store, plan.on_consistent)
        for t in targets:
            view = TestCase(t.id, t.spec, t.weights, {})
            ex.complete_weights(view, t.meta["weight_seed"])
            t.weights = view.weights
        stats.searches = run_searches(
            ex, targets, inputs, plan, store,
            lambda result, extra: loop.save_failure(result, {"seed": seed.name, "rng": cfg.rng,
                                                             **result.case.meta, **extra}),
            progress)
    loop.repros()


def _variant_ids(level: Level, seed: Seed, cfg: FuzzConfig) -> list[str]:
    return [level.case_id(seed.name, i) for i in level.indices(cfg)]


_unbuildable = unbuildable  # the redraw test, where the levels' generators find it (audee.levels.base)


def _run_pipelined(ex: Runner, cases: Iterable[tuple[TestCase, dict[str, Any]]], cfg: FuzzConfig,
                   store: RunStore, stats: FuzzStats, progress: Callable[[int], Any] | None) -> None:
    """Run ``cases`` (each with its row's provenance) one step apart: case k+1 is made
    (mutation, its builds queued behind case k in each worker) while case k computes, and
    case k is judged and written while case k+1 computes, so neither the workers nor the
    parent wait for each other.  Rows are written in order; a case in flight
    when the run stops has no row and runs again on resume.  A row's ``seconds`` is the
    wall time the case added to the run (from the verdict before it)."""
    waiting: tuple[Submitted, dict[str, Any]] | None = None
    last_verdict: float | None = None

    def judge(sub: Submitted) -> Result:
        # the wall time this case added to the run: from the verdict before it (its own
        # submission for the first), so a run's rows add up to its wall time
        nonlocal last_verdict
        result = ex.finish(sub)
        now = time.perf_counter()
        result.seconds = now - (sub.started if last_verdict is None else max(last_verdict, sub.started))
        last_verdict = now
        return result

    for case, extra in cases:
        submitted = ex.submit(case)
        if waiting is not None:
            _record(judge(waiting[0]), ex.pool, waiting[1], cfg, store, stats, progress)
        waiting = (submitted, extra)
    if waiting is not None:
        _record(judge(waiting[0]), ex.pool, waiting[1], cfg, store, stats, progress)


def _record(result: Result, pool: Pool, extra: dict[str, Any], cfg: FuzzConfig, store: RunStore,
            stats: FuzzStats, progress: Callable[[int], Any] | None) -> None:
    """A judged case's row, and its case file when it fails."""
    if result.verdict.failed:
        _save_failure(result, pool, cfg, store, stats, extra)
    else:
        _append_row(result, store, stats, extra)
    if progress is not None:
        progress(1)


def _append_row(result: Result, store: RunStore, stats: FuzzStats, extra: dict[str, Any],
                case_file: str | None = None) -> None:
    """The case's row; ``extra``: its provenance, the mutation records as dicts (the row
    keeps each as ``layer.param=value``; a search's settings stay in its own row)."""
    extra = _with_result(result, extra)
    muts = [f"{m['layer']}.{m['param']}={m['new']!r}" for m in extra.get("mutations", [])]
    row = result_row(result, {k: v for k, v in extra.items() if k not in ("search",)} | {"mutations": muts}
                     | ({"case_file": case_file} if case_file else {}), meta={**result.case.meta, **extra})
    store.append(row)
    stats.add(result)
    log.debug("case %s: %s", result.case.id, _describe_verdict(result))


def _describe_verdict(result: Result) -> str:
    findings = result.verdict.findings
    if not findings:
        return "pass"
    return "; ".join(f"{f.kind} [{', '.join(f.backends)}]" for f in findings)


def _with_result(result: Result, extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` with what the run learnt of the case that its provenance must carry (rows,
    case files and signatures keep it): a training step's record (audee.engine.train.TrainResult:
    its setup, layers called inactive, backends skipped, losses); an op case's ``undefined``
    (audee.oracle.ops: an integer division by zero makes its failures undefined); the backends
    a converter's remembered refusal left out of the case, and the refusals it taught the run
    (audee.engine.refusals: ``skipped``, ``refused``)."""
    if getattr(result, "train", None):
        extra = {**extra, "phase": "train", "train": result.train}
    for name in ("skipped", "refused"):
        if getattr(result, name, None):
            extra = {**extra, name: dict(getattr(result, name))}
    if getattr(result, "undefined", None):
        extra = {**extra, "undefined": list(result.undefined)}
    return extra


def _save_failure(result: Result, pool: Pool, cfg: FuzzConfig, store: RunStore, stats: FuzzStats,
                  extra: dict[str, Any]) -> str:
    extra = _with_result(result, extra)
    case_file = store.save_case(result.case.id, case_record(result, pool, extra, **judging(cfg)))
    _append_row(result, store, stats, extra, case_file)
    return result.case.id


def _search_targets(level: Level, seed: Seed, cfg: FuzzConfig, store: RunStore, k: int) -> list[Any]:
    """The seed when no variants were asked for; else the first K variants that passed."""
    from audee.search.runner import Target

    if cfg.variants == 0:
        return [Target(f"{seed.name}-seed", seed.spec, dict(seed.weights or {}),
                       {"seed": seed.name, "variant": -1, "weight_seed": seed.weight_seed})]
    ids = set(_variant_ids(level, seed, cfg))
    passed = sorted((r for r in store.rows() if r.status == "pass" and r.variant is not None and r.variant >= 0
                     and r.id in ids), key=lambda r: r.variant)
    return [Target(r.id, store.load_variant(r.id), dict(seed.weights or {}),
                   {"seed": seed.name, "variant": r.variant, "weight_seed": r.weight_seed})
            for r in passed[:k]]


def summarize(out: Path, known: list[Any] | None = None) -> dict[str, Any]:
    """Counts over the whole results table of a run directory (all sessions, resumed too),
    and first the unique bugs (by signature, :mod:`audee.triage.signature`), each new or with
    the status of the triaged entry it matches (``known``: the triaged bugs,
    :mod:`audee.triage.known`; default the shipped list)."""
    from audee.triage.known import load_known_issues, unique_bugs
    from audee.triage.rootcause import class_counts, root_causes

    store = RunStore(out)
    rows = list(store.rows())
    bugs = unique_bugs([store.placed(r) for r in rows], load_known_issues() if known is None else known)
    roots = root_causes(bugs)
    classes = class_counts(roots)
    by_kind: dict[str, int] = {}
    pairs: dict[str, int] = {}
    for r in rows:
        for k in r.kinds:
            by_kind[k] = by_kind.get(k, 0) + 1
        for p in r.inconsistent_pairs:
            pairs[p] = pairs.get(p, 0) + 1
    hard_how: dict[str, int] = {}
    skipped: dict[str, int] = {}  # runs the refusal memo left out, per backend (audee.engine.refusals)
    for r in rows:
        for b, s in r.backends.items():
            if s != "ok" and not s.startswith("error:"):
                hard_how[f"{b} {s}"] = hard_how.get(f"{b} {s}", 0) + 1
        for b in r.skipped:
            skipped[b] = skipped.get(b, 0) + 1
    return {
        "bugs": [b.to_json() for b in bugs],
        "unique_bugs": len(bugs),
        "root_causes": len(roots),
        # a maintainer's count (audee.triage.rootcause): new bugs are root causes of class bug no triaged
        # entry matches (the others of class bug: classes["bug"] by status)
        "new_bugs": classes["bug"]["new"],
        "classes": classes,
        "roots": [g.to_json() for g in roots],
        "test_cases": len(rows),
        "failing": sum(r.status == "fail" for r in rows),
        "hard_crash": by_kind.get(Kind.HARD_CRASH, 0),
        "hard_crash_detail": hard_how,
        "divergent_acceptance": by_kind.get(Kind.DIVERGENT_ACCEPTANCE, 0),
        "consistent_rejection": by_kind.get(Kind.CONSISTENT_REJECTION, 0),
        "nan": by_kind.get(Kind.NAN, 0),
        "nan_strong": sum(r.nan_strong for r in rows),
        "nan_propagated": by_kind.get(Kind.NAN_PROPAGATED, 0),
        "deviation": by_kind.get(Kind.DEVIATION, 0),
        "equivalence": by_kind.get(Kind.EQUIVALENCE, 0),
        "precision": by_kind.get(Kind.PRECISION, 0),
        "inconsistency": by_kind.get(Kind.INCONSISTENCY, 0),
        "inconsistency_by_pair": pairs,
        "skipped_runs": dict(sorted(skipped.items())),
        "mean_seconds_per_case": round(float(np.mean([r.seconds for r in rows])), 4) if rows else 0.0,
        "phases": phase_summary(r.phases for r in rows),  # per backend: mean seconds per case of each phase
        **_level_summaries(rows),
    }


def _level_summaries(rows: list[ResultRow]) -> dict[str, Any]:
    """What each level whose cases the rows hold adds to the summary (``by_api``)."""
    out: dict[str, Any] = {}
    for name in LEVELS:
        if any(source_name({"seed": r.seed}) == name for r in rows):
            out.update(level_named(name).summary(rows))
    return out
