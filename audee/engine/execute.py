"""Run one test case on every backend and judge it with the oracles.

This is the loop body of every search: build (cached per spec in the workers, so a
spec already seen costs nothing), run the batch on all backends at once, apply the
crash, NaN, inconsistency and deviation oracles, and — only for failing cases — fetch
per-layer outputs for the diagnosis (for a deviation: the first layer out of tolerance,
and the layers that deviate on their own input, each run alone on both backends).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from audee.backends.info import program_of, reference_of
from audee.backends.pool import Pool, WorkerFailure
from audee.engine.flush_probe import flush_probe
from audee.engine.refusals import Refusal, RefusalMemo
from audee.equivalence.check import run_equivalence
from audee.equivalence.rules import rules_named
from audee.levels.base import Runner
from audee.cases.case import Finding, Kind, Outcome, TestCase, Verdict
from audee.oracle import crash_findings, inconsistency_findings, layer_distances, nan_findings
from audee.oracle.attribution import Alone, attribute, batch_of
from audee.oracle.declared import declared_findings
from audee.oracle.deviation import (DTYPE_ROUNDING, FULL, PROBE_SIGNS, Tolerances, as_tolerances, attributed,
                                    compare, deviation_findings, deviation_score, float64_floor, jump_order,
                                    layer_scores, pair_compute, perturbed, perturbed_weights, rounding_for)
from audee.oracle.compute_dtype import (FLOAT32, consumer_compute_dtypes, layer_compute_dtype, narrow_range,
                                        reduced_precision)
from audee.oracle.nan import (amplified_rounding, both_overflow_narrow, condition_pattern, contraction_overflow,
                              diagnose_patterns, diagnose_rows, float64_nan_within, has_nonfinite,
                              intermediate_overflow, narrow_overflow_scale, overflow_boundary, overflow_scale,
                              part_differs_there, rowwise_feed, same_difference, scaled_into_range,
                              settle_conditioning,
                              state_at_overflow_scale, without_nonfinite)
from audee.oracle.odd import mark_odd
from audee.oracle.pairs import judged_against, odd_by_witness
from audee.oracle.regression import regression_findings
from audee.oracle.slices import one_element_score
from audee.oracle.precision import float64_verdict
from audee.records.findings import OwnScore
from audee.records.reference import ReferenceRun
from audee.reference.run import Reference, candidates as reference_candidates, computed_in_float32
from audee.settings import TIE_MARGIN
from audee.apis.call_args import random_values
from audee.apis.keras_layers import is_recurrent, output_activation
from audee.cases.spec import (ModelSpec, Weights, activation_spec, layer_feed, linear_part, one_layer_model, one_layer_spec,
                              weights_key)
from audee.cases.weights import Shapes, adapt_weights
from audee.core.floats import is_float

log = logging.getLogger(__name__)

DIAGNOSE_INPUTS = 8  # inputs for which per-layer outputs are fetched on a failure
OWN_LAYER_CHECKS = 6  # layers judged on their own input (one-layer runs) per deviation finding


@dataclass
class Result:
    case: TestCase
    verdict: Verdict
    outcomes: dict[str, Outcome]
    pairs: dict[str, dict] = field(default_factory=dict)      # per backend pair: distance, flips, ties
    layer_distances: dict[str, dict[str, float]] = field(default_factory=dict)
    # from submission to verdict; in the fuzz loop, whose cases overlap, the wall time the
    # case added to the run (from the verdict before it: a run's rows add up to its wall time)
    seconds: float = 0.0
    # backend -> phase -> seconds its worker spent on this case (audee.backends.base.TIMED_PHASES):
    # the build of a spec is counted for the first case that runs it, diagnosis runs included
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    # the equivalence oracle (audee/equivalence): each applied rule's status (pass, fail, accumulated, harness)
    equivalence: dict[str, str] = field(default_factory=dict)
    # the float64 reference (audee/reference): every backend's error against it; None: not asked for
    reference: ReferenceRun | None = None
    # backends left out because they refused the case's API and dtype policy before (audee/engine/refusals.py):
    # backend -> {"reason", "cases": the cases that saw the refusal}; and this case's own refusals (backend -> reason)
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    # what was not compared, and why: a model random by design (a layer random in training
    # called with training=True, audee.apis.call_args.random_values) has its values left out
    undefined: list[str] = field(default_factory=list)


def first_shapes(built: dict[str, Any]) -> Shapes | None:
    """The weight shapes of the first backend whose build answered (None if every one failed)."""
    for got in built.values():
        if not isinstance(got, WorkerFailure):
            return {k: [(r, tuple(s)) for r, s in v] for k, v in got.items()}
    return None


def complete_weights(case: TestCase, shapes: Shapes | None, weight_seed: int) -> None:
    """Fill ``case``'s weights for layers it has none for (new or reshaped layers)."""
    if shapes is not None:
        case.weights = adapt_weights(case.weights, shapes, weight_seed)


class BuildCache:
    """Each spec's build replies (weight shapes, or the failure) per backend, for the last
    ``size`` specs, so a spec already built costs no second build round trip; a spec whose
    build killed a worker is built again (the restarted worker has nothing).  ``phases``
    holds the build's worker timings until the case that runs it takes them."""

    def __init__(self, size: int = 64):
        self.size = size
        self.built: dict[str, dict[str, Any]] = {}
        self.phases: dict[str, dict[str, dict[str, float]]] = {}  # spec key -> not yet charged to a case

    def get(self, key: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The replies for ``key``, asking ``build`` (label -> reply or WorkerFailure) when needed."""
        if key not in self.built or any(isinstance(v, WorkerFailure) and v.hard for v in self.built[key].values()):
            replies = build()
            self.built[key] = {label: (r["shapes"] if isinstance(r, dict) else r) for label, r in replies.items()}
            self.phases[key] = {label: r.get("phases", {}) for label, r in replies.items() if isinstance(r, dict)}
            if len(self.built) > self.size:
                self.phases.pop(next(iter(self.built)), None)
                self.built.pop(next(iter(self.built)))
        return self.built[key]

    def add(self, key: str, replies: dict[str, Any]) -> dict[str, Any]:
        """``key``'s replies with those of more backends (built later than the rest)."""
        mine = self.built.setdefault(key, {})
        mine.update({label: (r["shapes"] if isinstance(r, dict) else r) for label, r in replies.items()})
        timed = self.phases.setdefault(key, {})
        timed.update({label: r.get("phases", {}) for label, r in replies.items() if isinstance(r, dict)})
        return mine


class Executor(Runner):
    """Runs test cases on a :class:`Pool`; remembers each spec's weight shapes so a spec
    already built costs one round trip per backend, not two."""

    def __init__(self, pool: Pool, *, tie_margin: float = TIE_MARGIN, diagnose: bool = True,
                 tolerances: Tolerances | dict[str, Any] | None = None, equivalence: Iterable[str] = (),
                 reference: Reference | None = None, refusals: RefusalMemo | None = None):
        """``tolerances``: the deviation oracle's, per dtype (a :class:`Tolerances`, or the
        ``{dtype: {"rtol", "atol"}}`` form settings and case files hold; default: the defaults).
        ``equivalence``: the equivalence rules whose rewrites run beside every case
        (:data:`audee.settings.EQUIVALENCE_RULES`; none by default).  ``reference``: the
        float64 reference each case runs beside (:mod:`audee.reference`; none by default).
        ``refusals``: the run's memo of converters' explicit refusals (API-level cases,
        :mod:`audee.engine.refusals`; none: every case is built on every backend)."""
        self.pool = pool
        self.refusals = refusals
        self.reference = reference
        self.equivalence = rules_named(tuple(equivalence))
        self.tie_margin = tie_margin
        self.tolerances = as_tolerances(tolerances)
        self.diagnose = diagnose
        self._builds = BuildCache()
        self._built, self._build_phases = self._builds.built, self._builds.phases
        self._tally: PhaseTally | None = None  # the case being run

    # ---- building ------------------------------------------------------------------------------
    def build(self, spec: ModelSpec) -> dict[str, Shapes | WorkerFailure]:
        """Each backend's build reply for ``spec`` (cached per spec); the backends the refusal
        memo leaves out of a case being made are neither asked nor answered (:meth:`skips`)."""
        return self._build(spec, self.skips(spec))

    def _build(self, spec: ModelSpec, skip: dict[str, Refusal]) -> dict[str, Shapes | WorkerFailure]:
        """``spec``'s build replies on every backend but ``skip``'s, whatever the cache holds
        (a spec cached before the memo learnt holds more, one cached while it skipped holds less)."""
        key, wanted = spec.key(), [label for label in self.pool.labels if label not in skip]
        got = self._builds.get(key, lambda: self.pool.build(spec, wanted))
        missing = [label for label in wanted if label not in got]
        if missing:
            got = self._builds.add(key, self.pool.build(spec, missing))
        return {label: got[label] for label in wanted}

    def skips(self, spec: ModelSpec) -> dict[str, Refusal]:
        """The backends the next case, of ``spec``, leaves out: each refused its API and dtype
        policy in earlier cases of the run (:class:`RefusalMemo`).  Asked while a case is made
        and submitted, never while one is judged (its equivalent models and diagnosis run on
        the backends that ran it)."""
        if self.refusals is None or self._tally is not None:
            return {}
        return self.refusals.skips(spec, self.pool.labels)

    def shapes(self, spec: ModelSpec) -> Shapes | None:
        """Weight shapes from the first backend that builds ``spec`` (None if none does)."""
        return first_shapes(self.build(spec))

    # ---- running -------------------------------------------------------------------------------
    def complete_weights(self, case: TestCase, weight_seed: int) -> None:
        """Fill weights for layers the case has none for (new or reshaped layers)."""
        complete_weights(case, self.shapes(case.spec), weight_seed)

    def run(self, case: TestCase) -> Result:
        return self.finish(self.submit(case))

    def submit(self, case: TestCase) -> "Submitted":
        """Start ``case`` on every backend that builds it, without waiting for the runs:
        the caller may prepare the next case (mutation, its builds) and judge the one
        before (:meth:`finish`) while the workers compute."""
        t0 = time.perf_counter()
        skip = self.skips(case.spec)
        built = self._build(case.spec, skip)
        modes = self.pool.precisions
        outcomes = {label: Outcome(label, failure=got, precision=modes.get(label, FULL))
                    for label, got in built.items() if isinstance(got, WorkerFailure)}
        ready = [label for label, got in built.items() if not isinstance(got, WorkerFailure)]
        tickets = self.pool.submit_run(case.spec, case.weights, weights_key(case.weights), case.inputs,
                                       labels=ready) if ready else {}
        return Submitted(case, outcomes, tickets, PhaseTally(self._build_phases.pop(case.spec.key(), {})), t0,
                         skipped={label: r.to_json() for label, r in skip.items()},
                         ordinal=self.refusals.submitted() if self.refusals is not None else 0)

    def finish(self, sub: "Submitted") -> Result:
        """The runs of a submitted case, judged by the oracles (and diagnosed when it fails);
        the refusal memo learns from them."""
        case, outcomes, phases = sub.case, dict(sub.outcomes), sub.phases
        modes = self.pool.precisions
        for label, got in self.pool.collect_run(sub.tickets).items():
            if isinstance(got, WorkerFailure):
                outcomes[label] = Outcome(label, failure=got, facts=dict(got.facts), precision=modes.get(label, FULL))
                if got.hard:
                    self._built.pop(case.spec.key(), None)  # the worker restarted: cache gone
            else:
                phases.add(label, got.get("phases", {}))
                outcomes[label] = Outcome(label, logits=got["logits"], output=got["output"],
                                          nonfinite=got["nonfinite"], run_s=got["run_s"], facts=got.get("facts") or {},
                                          declared=got.get("declared"), precision=modes.get(label, FULL))
        result = self.judge(case, outcomes, phases, sub.started)
        result.skipped = dict(sub.skipped)
        if self.refusals is not None:
            result.refused = self.refusals.learn(sub.ordinal, case, result.verdict, result.outcomes)
        return result

    def judge(self, case: TestCase, outcomes: dict[str, Outcome], phases: "PhaseTally", started: float, *,
              diagnose: bool | None = None) -> Result:
        """``outcomes`` of ``case`` judged by the oracles, and diagnosed when it fails
        (``diagnose``: the executor's setting unless given): outcomes it did not run itself
        too, a packed case's (:mod:`audee.engine.packed`).  ``phases`` takes the diagnosis runs'
        timings; ``seconds`` counts from ``started``."""
        diagnose = self.diagnose if diagnose is None else diagnose
        self._tally = phases
        ordered = [outcomes[label] for label in self.pool.labels if label in outcomes]
        # a model random by design is judged on what each backend accepts and declares only
        random = random_values(case.spec.layers)
        values = ordered if random is None else []
        nans = nan_findings(values, case.inputs, consumer_compute_dtypes(case.spec))
        findings: list[Finding] = crash_findings(ordered) + nans
        incons, pairs = inconsistency_findings(values, self.tie_margin, self.tolerances)
        findings += incons
        # label flips stay `inconsistency`; a pair beyond tolerance also gets a `deviation`
        devs = deviation_findings(values, self.tolerances)
        findings += devs
        findings += declared_findings(ordered, case.spec.topological_order())
        result = Result(case, Verdict(findings), {o.backend: o for o in ordered}, pairs,
                        undefined=[] if random is None else [f"values: {random}"])
        if diagnose and incons:
            self._diagnose(result, incons)
        if diagnose and devs:
            self._diagnose_deviation(result, devs)
            flush_probe(self._pool_run, self.tolerances, case, result.outcomes, devs)
            fold_reduced_precision_flips(result.verdict)
        if diagnose:
            self._diagnose_nan(result, [f for f in nans if f.detail.patterns])
        if self.reference is not None and any(o.ok for o in values):  # against float64
            result.reference, precise = self.reference.judge(self, case, result.outcomes, result.verdict.findings,
                                                             diagnose=diagnose)
            result.verdict.findings.extend(precise)
        # each rule's equivalent model on every backend that ran the case; a random model's by acceptance only
        rules = self.equivalence if random is None else [r for r in self.equivalence or [] if r.acceptance_only]
        if rules:
            eq, result.equivalence = run_equivalence(self, case, result.outcomes, rules, diagnose=diagnose)
            result.verdict.findings.extend(eq)
        # after every change of kind; the float64 reference, where one judges, before the majority
        mark_odd(ordered, result.verdict.findings, float64_verdict(result.reference))
        # one backend under two releases: its pair's differences, after the majority read them
        result.verdict.findings[:] = regression_findings(result.verdict.findings, self.pool.versions())
        self._tally = None
        result.phases = phases.rounded()
        result.seconds = time.perf_counter() - started
        return result

    def pool_run(self, spec: ModelSpec, weights: Any, wkey: str, inputs: dict[str, np.ndarray],
                 **kwargs: Any) -> dict[str, Any]:
        """A diagnosis run on the pool (``pool.run``'s arguments), timed into the case being judged."""
        return self._pool_run(spec, weights, wkey, inputs, **kwargs)

    def add_phases(self, replies: dict[str, Any]) -> None:
        """Workers' phase timings of ``replies`` added to the case being judged."""
        if self._tally is not None:
            for label, reply in replies.items():
                if isinstance(reply, dict):
                    self._tally.add(label, reply.get("phases", {}))

    def _pool_run(self, spec: ModelSpec, weights: Any, wkey: str, inputs: dict[str, np.ndarray],
                  **kwargs: Any) -> dict[str, Any]:
        """``pool.run``, its workers' phase timings added to the case being run."""
        got = self.pool.run(spec, weights, wkey, inputs, **kwargs)
        if self._tally is not None:
            for label, reply in got.items():
                if isinstance(reply, dict):
                    self._tally.add(label, reply.get("phases", {}))
        return got

    def _diagnose(self, result: Result, incons: list[Finding]) -> None:
        """Per-layer distances (Definition 4) for the pairs that flipped labels, on a few
        of the flipped inputs: the data localization starts from."""
        case = result.case
        rows = sorted({i for f in incons for i in (f.detail.inputs or [])[:DIAGNOSE_INPUTS]})[:DIAGNOSE_INPUTS]
        sub = {k: v[rows] for k, v in case.inputs.items()}
        labels = sorted({b for f in incons for b in f.backends})
        got = self._pool_run(case.spec, case.weights, weights_key(case.weights), sub, labels=labels, layers=True)
        for f in incons:
            a, b = f.backends
            ra, rb = got.get(a), got.get(b)
            if isinstance(ra, dict) and isinstance(rb, dict):
                d = layer_distances(ra["layers"], rb["layers"])
                result.layer_distances[f.detail.pair] = d
                f.detail.layer_distances = d

    def _diagnose_deviation(self, result: Result, devs: list[Finding]) -> None:
        """For each deviating pair, on a few of its worst rows: the first layer out of
        tolerance along the whole model (``first_layer``), then the layers out of tolerance
        that raise the score most over their inputs' (the first one and at most
        :data:`OWN_LAYER_CHECKS` in all) judged on their own input: the layer alone, fed
        backend ``a``'s outputs of its predecessors, on both backends (``own``).  A layer
        out of tolerance alone is blamed (``own_layers``) when it is also well-conditioned
        there (:func:`audee.oracle.attribution.attribute`; else ``ill_conditioned``).  When
        every judged layer is cleared, the finding becomes ``deviation_accumulated``:
        rounding amplified along the model, no evidence against a backend."""
        case = result.case
        rows = sorted({i for f in devs for i in (f.detail.rows or [])[:DIAGNOSE_INPUTS // 2]})[:2 * DIAGNOSE_INPUTS]
        if not rows:
            return
        sub = {k: v[batch_of(rows, case.inputs)] for k, v in case.inputs.items()}
        labels = sorted({b for f in devs for b in f.backends})
        got = self._pool_run(case.spec, case.weights, weights_key(case.weights), sub, labels=labels, layers=True)
        order = case.spec.topological_order()
        alone: dict[tuple[str, str], dict] = {}  # (layer, feeding backend) -> replies of every backend involved
        scored: dict[tuple[str, str, str], dict | None] = {}  # (layer, a, b) -> :meth:`_float64_scores`
        wide_runs: dict[tuple[str, str, tuple[str, ...]], dict[str, np.ndarray]] = {}  # (layer, a, labels) -> run
        independent = [x for x in self._wide_labels(result) if reference_of(x) is None]

        def float64_scores(name: str, a: str, b: str, layers_a: dict[str, np.ndarray]) -> dict | None:
            """:meth:`_float64_scores` of ``name`` alone for the pair, computed once: recomputed in
            float64 by the pair itself where the layer computes in a reduced-precision dtype, by
            the independent frameworks where it computes in float32 (TensorFlow refuses some
            float64 kernels its float32 graph runs through oneDNN; torch's float64 convolution
            takes its own kernel; a conversion's float64 graph is another program); where the pair
            gives none (TensorFlow refusing a float64 channels_first depthwise convolution, JAX
            without 64-bit floats), by the independent frameworks: any float64 result is exact at
            a reduced dtype's tolerance (rng 3033's bfloat16 DepthwiseConv2D, TensorFlow and torch
            wrong alike, JAX on float64, judged on the torch-JAX pair only)."""
            if (name, a, b) not in scored:
                tries = [(a, b), tuple(independent)] if _reduced(case.spec, name) else [tuple(independent)]
                wide: dict[str, np.ndarray] = {}
                fed = layer_feed(case.spec, name, layers_a, sub)
                for labels in tries:
                    if (name, a, labels) not in wide_runs:
                        wide_runs[(name, a, labels)] = self._run_wide(case, name, fed, list(labels)) if fed else {}
                    wide = wide_runs[(name, a, labels)]
                    if wide:
                        break
                scored[(name, a, b)] = self._float64_scores(alone.get((name, a)) or {}, a, b, wide)
            return scored[(name, a, b)]

        def conditioning(name: str, a: str, b: str, ra: dict, replies: dict, compute: str, own: float) -> float:
            """The layer's self score: the input probe's, and the rounding its float64 result
            shows on the better side (:func:`audee.oracle.deviation.float64_floor`), asked of a
            float32 layer only where the probe alone would blame it."""
            moved = self._self_score(case, name, ra["layers"], sub, [a, b], replies, compute)
            if not _reduced(case.spec, name) and not attributed(own, moved):
                return moved
            return max(moved, float64_floor(float64_scores(name, a, b, ra["layers"])))

        for f in devs:
            a, b = f.backends
            ra, rb = got.get(a), got.get(b)
            if not (isinstance(ra, dict) and isinstance(rb, dict)):
                continue
            compute = pair_compute(result.outcomes[a].precision, result.outcomes[b].precision)
            scores = layer_scores(ra["layers"], rb["layers"], order, self.tolerances, compute)
            out = [name for name in order if name in scores and scores[name]["score"] > 1.0]
            d = f.detail
            d.first_layer = out[0] if out else None
            checks = jump_order(scores, order, case.spec.predecessors)[:OWN_LAYER_CHECKS]

            def run_alone(name: str, a: str = a, b: str = b, ra: dict = ra, compute: str = compute) -> Alone | None:
                """``name`` alone fed backend ``a``'s input to it, on both backends of the pair."""
                if (name, a) not in alone:
                    alone[(name, a)] = self._run_alone(case, name, ra["layers"], sub, labels)
                replies = alone[(name, a)]
                if not (isinstance(replies.get(a), dict) and isinstance(replies.get(b), dict)):
                    for x in (a, b):  # a layer the whole model ran that fails alone: say so, it is not judged
                        if isinstance(replies.get(x), WorkerFailure):
                            log.warning("%s: layer %s alone failed on %s (%s); not judged alone", case.id, name, x,
                                        str(replies[x].message).splitlines()[0][:200] if replies[x].message else "?")
                    return None
                own = compare(replies[a]["logits"], replies[b]["logits"], self.tolerances, compute=compute)
                if own is None:
                    return None
                return Alone(OwnScore(score=own["score"], max_abs=own["max_abs"], max_rel=own["max_rel"]),
                             self_score=lambda: conditioning(name, a, b, ra, replies, compute, float(own["score"])))

            att = attribute(checks, order, run_alone, own=d.own)
            d.own_layers.extend(att.blamed)
            if att.blamed:
                scores = float64_scores(att.blamed[0], a, b, ra["layers"])
                if scores is not None and not _reduced(case.spec, att.blamed[0]):
                    scores = _outside(scores, a, b)
                d.float64_within = None if scores is None else \
                    {x: [t for t, score in sides.items() if score <= 1.0] for x, sides in scores.items()}
            if att.ill_conditioned:
                d.ill_conditioned = [*(d.ill_conditioned or []), *att.ill_conditioned]
            if att.accumulated:
                # nothing deviates on its own input: rounding amplified along the model
                f.kind = Kind.DEVIATION_ACCUMULATED

    def _float64_scores(self, replies: dict[str, Any], a: str, b: str,
                        wide: dict[str, np.ndarray]) -> dict[str, dict[str, float]] | None:
        """Each side's output of a layer alone (``replies``, fed ``a``'s input) against the
        layer recomputed in float64 (``wide``, :meth:`_run_wide`): side -> float64 result's
        backend -> the deviation score.  Two readings: the better side's score is the rounding
        the layer forces (:func:`audee.oracle.deviation.float64_floor`, part of the self
        score: a float32 ConvLSTM1D whose squareplus cancels, every backend 1 % off the exact
        result and two of them 3 % apart, the api-cpu campaign, rng 2943); a side within a
        float64 result while the other is within none computes the layer otherwise
        (``float64_within``: onnxruntime running a float16 node in float32 lands on the
        float64 result, tf2onnx's one_hot counting a negative id from the end does not, rng
        2877; JAX's float32 ConvLSTM3D on it where TensorFlow's and torch's oneDNN
        convolution, wrong alike, outvoted it, rng 2943).  None where nothing was recomputed."""
        if not wide or not all(isinstance(replies.get(x), dict) for x in (a, b)):
            return None
        scores: dict[str, dict[str, float]] = {}
        for x in (a, b):
            out = np.asarray(replies[x]["logits"])
            scores[x] = {t: float(got["score"]) for t, w in wide.items()
                         if (got := compare(out, np.asarray(w), self.tolerances)) is not None}
        return scores

    def _self_score(self, case: TestCase, layer: str, layers_a: dict[str, np.ndarray],
                    inputs: dict[str, np.ndarray], labels: list[str], replies: dict[str, Any],
                    compute: str = FULL) -> float:
        """How far ``layer`` alone moves on each backend of the pair when its input and its
        weights move by rounding noise of the pair's compute mode
        (:func:`audee.oracle.deviation.perturbed`, :func:`~audee.oracle.deviation.perturbed_weights`),
        the larger of the two: its conditioning (ill-conditioned on either backend is no
        evidence against one).  A layer computing in a reduced-precision dtype is moved each
        way (:data:`~audee.oracle.deviation.PROBE_SIGNS`): at its coarse step a value within
        rounding of a threshold is common.  A float32 layer is moved once: its thresholds are
        rarely that close, and each extra run is one more chance for a backend's own unstable
        kernel to look like the layer's conditioning (rng 2929's torch GroupNormalization,
        whose E[x^2]-E[x]^2 cancels, and rng 2930's TensorFlow Conv3D were cleared by a
        mirrored float32 probe)."""
        given = layer_feed(case.spec, layer, layers_a, inputs) or {}  # fed before: the layer ran alone on it
        size = rounding_for(compute, {**given, **_outputs(replies)})  # the dtype it computes in counts too
        signs = PROBE_SIGNS if _reduced(case.spec, layer) else PROBE_SIGNS[:1]
        worst = 0.0
        for sign in signs:
            moved = self._run_alone(case, layer, {}, perturbed(given, size=sign * size), labels, given=True,
                                    weights=perturbed_weights(case.weights, layer, size=sign * size))
            for label in labels:
                got = compare(replies[label]["logits"], moved[label]["logits"], self.tolerances, compute=compute) \
                    if isinstance(moved.get(label), dict) else None
                worst = max(worst, float(got["score"]) if got is not None else float("inf"))
        a, b = labels  # and what the probe cannot move: a normalization over one-element slices
        return max(worst, one_element_score(case.spec.layer(layer), given, case.weights.get(layer, []),
                                            replies[a]["logits"], replies[b]["logits"], self.tolerances, compute))

    def _run_alone(self, case: TestCase, layer: str, layers_a: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                   labels: list[str], given: bool = False, weights: Weights | None = None,
                   override: dict[str, Any] | None = None) -> dict[str, Any]:
        """``layer`` alone (its one-layer model, the case's weights for it, or ``weights``'s;
        ``override``: some of its parameters changed) on ``labels`` at once, fed one backend's
        outputs of its predecessors (model inputs as given); the replies per backend ({} if
        it cannot stand alone)."""
        layer_inputs = layer_feed(case.spec, layer, {} if given else layers_a, inputs)
        model = one_layer_model(case.spec, case.weights if weights is None else weights, layer, layer_inputs,
                                override=override) if layer_inputs is not None else None
        if model is None:
            return {}
        spec1, weights = model
        return self._pool_run(spec1, weights, weights_key(weights), dict(layer_inputs), labels=labels)

    def _diagnose_nan(self, result: Result, nans: list[Finding]) -> None:
        """Per-layer non-finite patterns on a few rows: each pair's first layer where they
        differ (audee.oracle.nan.diagnose_patterns), then the conditioning rule on that
        layer alone (:meth:`_condition_nan`).  Where the few rows lose a pair's difference
        (every layer of theirs agrees), the whole batch the case ran is diagnosed instead: a
        backend may compute a row otherwise in a smaller batch (TensorFlow's graph applies
        grappler's reordered gelu product, NaN where the others hold 0, to the 8 rows of an
        LSTM's case and not to 4 of them: the pair read as unstable and no backend was named
        odd, the api-cpu campaign, rng 2966), and a difference is unstable only where the
        inputs it was seen on do not show it again."""
        if not nans:
            return
        case = result.case
        labels = sorted({b for f in nans for k in f.detail.patterns for b in k.split("|")})
        batch = next((len(v) for v in case.inputs.values() if np.ndim(v)), 0)
        rows = diagnose_rows(list(result.outcomes.values()), case.inputs, DIAGNOSE_INPUTS)
        for rows in (rows, list(range(batch))):
            sub = {k: v[rows] for k, v in case.inputs.items()}
            got = self._layers_of(case, sub, labels)
            layers = {b: r["layers"] for b, r in got.items() if isinstance(r, dict)}
            failed = {b: r.message for b, r in got.items() if not isinstance(r, dict)}
            for f in nans:
                diagnose_patterns(f, layers, rows, failed)
            lost = any(p.first_layer_from == "output" for f in nans for p in f.detail.patterns.values())
            if not lost or len(rows) >= batch:
                break
        for f in nans:
            self._condition_nan(result, f, layers, sub)

    def _layers_of(self, case: TestCase, inputs: dict[str, np.ndarray], labels: list[str]) -> dict[str, Any]:
        """Per-layer outputs of ``case`` on ``inputs`` from each of ``labels``; a backend whose
        worker ended during the run (a signal, an exit: its memory watchdog) is asked once more,
        by a fresh worker.  A worker grown by what it ran before dies where a fresh one answers
        (JAX's worker past the memory cap in a ConvLSTM3D's diagnosis, which a fresh pool ran:
        the api-cpu campaign, rng 3027); a clean error or a timeout is not asked again."""
        wkey = weights_key(case.weights)
        got = self._pool_run(case.spec, case.weights, wkey, inputs, labels=labels, layers=True)
        died = [b for b, r in got.items() if isinstance(r, WorkerFailure) and r.kind in ("signal", "exit")]
        if died:
            log.warning("per-layer diagnosis: %s ended (%s); asking a fresh worker", ", ".join(died),
                        "; ".join(got[b].message for b in died))
            got.update(self._pool_run(case.spec, case.weights, wkey, inputs, labels=died, layers=True))
        return got

    def _condition_nan(self, result: Result, finding: Finding, layers: dict[str, dict[str, np.ndarray]],
                       inputs: dict[str, np.ndarray]) -> None:
        """Each pair's first differing layer alone, fed backend ``a``'s input to it, on both
        backends, plain and moved by rounding noise: whether the difference stands
        (:func:`audee.oracle.nan.condition_pattern`; ``own_layer`` when it does, ``cleared``
        with the reason when it does not), judged in the layer's compute dtype; a difference
        that stands, or one that an input at a narrow dtype's overflow scale would clear, is
        checked against the layer recomputed in float64 (:meth:`_wide_labels`;
        :func:`audee.oracle.nan.overflow_boundary`,
        :func:`audee.oracle.nan.unforced_narrow_overflow`; between independent frameworks
        both overflowing where it fits clears it, :func:`audee.oracle.nan.both_overflow_narrow`).
        Then :func:`settle_conditioning`."""
        case = result.case
        wide_runs: dict[tuple[str, str, bool], dict[str, np.ndarray]] = {}  # (layer, feeding backend, NaN/Inf in)

        def float64_of(name: str, a: str, fed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            """:meth:`_run_wide` of ``name`` on ``a``'s input to it (as given, or with its NaN/Inf
            set to 0), once for every pair that backend feeds."""
            key = (name, a, has_nonfinite(fed))
            if key not in wide_runs:
                wide_runs[key] = self._run_wide(case, name, fed, self._wide_labels(result))
            return wide_runs[key]

        differing = {frozenset(k.split("|")) for k in finding.detail.patterns}
        ran = [o.backend for o in result.outcomes.values() if o.ok]

        def as_independent(a: str, b: str) -> bool:
            """Whether the pair's overflow may be cleared as between independent frameworks: it
            is two of them, or a converted or compiled backend and its reference where the
            converted side agrees with a framework the reference differs from (the reference's own
            order of operations at overflow: :func:`audee.oracle.pairs.odd_by_witness`).  A
            converted program otherwise computes what it was given, NaN included."""
            return judged_against(a, b) is None or odd_by_witness((a, b), ran, differing, differing) is not None

        for key, p in finding.detail.patterns.items():
            a, b = key.split("|")
            if a not in layers or b not in layers:
                continue
            if p.first_layer_from == "output":  # every layer and the output agreed on the re-run rows
                p.cleared = "unstable"
                continue
            name = p.first_layer if p.first_layer_from == "layers" else None
            if name is None:
                continue
            fed = layer_feed(case.spec, name, layers[a], inputs)
            if fed is None:
                continue
            replies = self._run_alone(case, name, {}, fed, [a, b], given=True)
            if not all(isinstance(replies.get(x), dict) for x in (a, b)):
                continue
            alone = {x: replies[x]["logits"] for x in (a, b)}
            if has_nonfinite(fed):  # judged on finite values where no NaN/Inf of the input reaches
                fed, alone = self._out_of_reach(case, name, fed, alone)
            compute = pair_compute(result.outcomes[a].precision, result.outcomes[b].precision)
            dtype = layer_compute_dtype(case.spec.layer(name).params)
            size = max(rounding_for(compute, {**fed, **alone}), DTYPE_ROUNDING.get(dtype, 0.0))
            moved_replies = self._run_alone(case, name, {}, perturbed(fed, size=size), [a, b], given=True)
            moved = {x: r["logits"] for x, r in moved_replies.items() if isinstance(r, dict)}
            wide: dict[str, np.ndarray] | None = None
            if narrow_range(dtype) and not has_nonfinite(fed) and overflow_scale(fed, dtype):
                wide = float64_of(name, a, fed)  # forced by the math?
            reason = condition_pattern(fed, alone, moved, dtype, wide)
            if reason is None:
                p.own_layer = name
                if wide is None:
                    wide = {} if has_nonfinite(fed) else float64_of(name, a, fed)
                p.overflow_boundary = overflow_boundary(fed, alone, wide, dtype)
                p.overflow_evidence = "float64" if wide else "scale"
                if not p.overflow_boundary and self._amplified(case, name, fed, alone, compute):
                    p.own_layer, p.overflow_evidence, p.cleared = None, None, "amplified"
                elif not p.overflow_boundary and as_independent(a, b) \
                        and (both_overflow_narrow(fed, alone, wide, dtype)
                             or self._state_overflowed(result, name, fed, alone, dtype)
                             or self._contraction_overflowed(result, name, fed, alone, dtype)):
                    p.own_layer, p.overflow_evidence, p.cleared = None, "float64", "overflow"
                elif not p.overflow_boundary and self._intermediate_overflow(result, name, fed, alone, dtype, wide,
                                                                             compute):
                    p.own_layer, p.overflow_evidence, p.cleared = None, "scaled", "overflow"
                if p.cleared is None and not p.overflow_boundary:
                    if has_nonfinite(fed) and narrow_range(dtype):  # the elements no NaN/Inf of the input reaches
                        wide = float64_of(name, a, fed)
                    p.float64_within = float64_nan_within(alone, wide, dtype, 2 if has_nonfinite(fed) else 1)
            else:
                p.cleared = reason
        settle_conditioning(finding)

    def _out_of_reach(self, case: TestCase, layer: str, fed: dict[str, np.ndarray],
                      alone: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The layer's input and outputs to judge a pair's difference on: its input with the
        NaN/Inf set to 0 and the outputs on that, when the pair differs there exactly as it
        does on the input as given (:func:`audee.oracle.nan.same_difference`); else as given.
        One run, for a layer fed NaN/Inf."""
        cleaned = without_nonfinite(fed)
        replies = self._run_alone(case, layer, {}, cleaned, list(alone), given=True)
        got = _outputs(replies)
        return (cleaned, {x: got[x] for x in alone}) if same_difference(alone, got) else (fed, alone)

    def _state_overflowed(self, result: Result, layer: str, fed: dict[str, np.ndarray],
                          alone: dict[str, np.ndarray], dtype: str | None) -> bool:
        """A standing difference at a recurrent layer fed a finite input (or NaN/Inf only in rows
        where the pair does not differ: :func:`audee.oracle.nan.rowwise_feed`), whose state,
        recomputed in float64 step by step, was at overflow scale before each differing
        element (:func:`audee.oracle.nan.state_at_overflow_scale`).  One float64 run, only
        for a difference that stood every other rule, and only between independent
        frameworks: a converted program runs the steps its reference ran, so where its state
        overflows it must do what its reference does (a select tf2onnx lowered to arithmetic
        leaking 0 * Inf there is the converter's bug)."""
        ls = result.case.spec.layer(layer)
        if not is_recurrent(ls.api):
            return False
        if has_nonfinite(fed):  # the rows fed NaN/Inf, where the pair does not differ, zeroed: rows step alone
            fed = rowwise_feed(fed, alone)
            if fed is None:
                return False
        states = self._run_wide(result.case, layer, fed, self._wide_labels(result), {"return_sequences": True})
        return state_at_overflow_scale(alone, states, bool(ls.params.get("return_sequences")), dtype)

    def _contraction_overflowed(self, result: Result, layer: str, fed: dict[str, np.ndarray],
                                alone: dict[str, np.ndarray], dtype: str | None) -> bool:
        """A standing difference at a float16 layer fed a finite input at float16's overflow
        scale, where a contraction inside the layer's formula stores a value past float16's
        maximum in every row the pair differs in (:func:`audee.oracle.nan.contraction_overflow`):
        the peaks come from the backends that trace their program op by op
        (``Backend.contraction_peaks``: JAX, whether or not it ran the case: a float16 call
        it refuses is no reason its float64 formula cannot speak) on the layer's float64
        model.  One run and one trace each, only for a difference that stood every other
        rule, and only on such an input.  Only between
        independent frameworks: a converted program must overflow where its reference does."""
        if narrow_overflow_scale(fed, dtype) is None:
            return False
        model = _wide_model(result.case, layer, fed)
        labels = getattr(self.pool, "trace_labels", [])
        if model is None or not labels:
            return False
        spec1, wide_w, wide_in = model
        ran = self._pool_run(spec1, wide_w, weights_key(wide_w), wide_in, labels=labels)  # built there, weights in
        peaks = []
        for label in labels:
            if not isinstance(ran.get(label), dict):
                continue
            try:
                got = self.pool.call(label, "contraction_peaks", key=spec1.key(), inputs=wide_in)
            except Exception:  # noqa: BLE001 - a backend that cannot say gives no evidence
                continue
            if got is not None:
                peaks.append(np.asarray(got))
        return contraction_overflow(fed, alone, peaks, dtype)

    def _intermediate_overflow(self, result: Result, layer: str, fed: dict[str, np.ndarray],
                               alone: dict[str, np.ndarray], dtype: str | None,
                               wide: dict[str, np.ndarray] | None, compute: str) -> bool:
        """A standing difference at a float32 layer fed finite values at overflow scale (an
        Inf beside them stays as it is), where the layer scaled into range computes the same
        on both backends (:func:`audee.oracle.nan.intermediate_overflow`): the layer in
        float64 on the scaled input (and on the input as given, where no rule ran it yet),
        and in its own dtype on both backends.  A layer with a bias or an output activation
        is judged by its linear part (:func:`audee.cases.spec.linear_part`), which must
        differ wherever the layer does (:func:`audee.oracle.nan.part_differs_there`): a
        convolution's product of a value near float32's maximum overflowing beside an input
        -Inf, Inf + -Inf = NaN in one order of the sum and -Inf in a fused one, is that part's
        difference whatever hard_sigmoid makes of it.  Three runs (four more for the linear
        part), only for a difference that stood every other rule, and only on such an input."""
        if (dtype or FLOAT32) != FLOAT32 or not overflow_scale(fed, FLOAT32):
            return False
        scaled, k = scaled_into_range(fed)
        if k <= 0:
            return False
        case, labels = result.case, list(alone)[:2]
        part = linear_part(case.spec, case.weights, layer)
        override, weights = part if part is not None else ({}, case.weights)
        if part is not None:
            wide = None  # the whole layer's float64 result says nothing of its part
            full = _outputs(self._run_alone(case, layer, {}, fed, labels, given=True, weights=weights,
                                                override=override))
            if set(full) != set(labels) or not part_differs_there(alone, full):
                return False
        wide_labels = self._wide_labels(result)
        wide = wide or self._run_wide(case, layer, fed, wide_labels, override, weights)
        small = _outputs(self._run_alone(case, layer, {}, scaled, labels, given=True, weights=weights,
                                             override=override))
        if set(small) != set(labels):
            return False
        wide_scaled = self._run_wide(case, layer, scaled, wide_labels, override, weights)
        return intermediate_overflow(wide, wide_scaled, k, {x: small[x] for x in labels},
                                     lambda u, v: bool((deviation_score(u, v, self.tolerances, compute) <= 1.0).all()))

    def _amplified(self, case: TestCase, layer: str, fed: dict[str, np.ndarray], alone: dict[str, np.ndarray],
                   compute: str) -> bool:
        """A standing difference at a layer with an output activation, split in two
        (:func:`audee.oracle.nan.amplified_rounding`): the layer alone with ``activation:
        linear`` on both backends, then its ``Activation`` alone on each backend's result,
        on both backends.  Three runs, only for a difference that stood every other rule."""
        ls = case.spec.layer(layer)
        act = output_activation(ls.api, ls.params)
        if act is None:
            return False
        labels = list(alone)[:2]
        model = one_layer_model(case.spec, case.weights, layer, fed, override={"activation": "linear"})
        if model is None:
            return False
        replies = self._pool_run(model[0], model[1], weights_key(model[1]), dict(fed), labels=labels)
        pre = _outputs(replies)
        if set(pre) != set(labels):
            return False
        out: dict[tuple[str, str], np.ndarray] = {}
        for y in labels:
            spec1 = activation_spec(case.spec, layer, act, pre[y])
            got = self._pool_run(spec1, {}, weights_key({}), {spec1.inputs[0].name: pre[y]}, labels=labels)
            for x, r in got.items():
                if isinstance(r, dict) and r.get("logits") is not None:
                    out[(x, y)] = np.asarray(r["logits"])
        return amplified_rounding(alone, pre, out,
                                  lambda u, v: bool((deviation_score(u, v, self.tolerances, compute) <= 1.0).all()))


    def _wide_labels(self, result: Result) -> list[str]:
        """The backends asked for a layer's float64 result: every one that ran the case, and
        the float64 reference's workers when the run has one (``jax-x64`` computes JAX's)."""
        labels = [x for x, o in result.outcomes.items() if o.ok]
        if self.reference is not None:
            labels += [x for x in reference_candidates(self.pool.labels, self.reference.backend)
                       if x in self.pool.workers and x not in labels]
        return labels

    def _run_wide(self, case: TestCase, layer: str, fed: dict[str, np.ndarray],
                  labels: list[str], override: dict[str, Any] | None = None,
                  weights: Weights | None = None) -> dict[str, np.ndarray]:
        """``layer`` alone recomputed in float64 (its ``dtype`` policy, weights (the case's,
        or ``weights``'s) and float inputs widened; ``override``: other parameters changed
        too) on ``labels``: each
        backend's float64 output, the near-exact result the overflow rules read, with Keras'
        narrowing of float64 off (an ``exact`` spec).  Backends that cannot run it, or that
        did not compute it in float64 (JAX without x64, a wrapper's inner layer keeping its
        own policy: their output comes back float32), or that computed it in float32 all the
        same (:func:`audee.reference.run.computed_in_float32`: TensorFlow's bilinear resize),
        are left out."""
        model = _wide_model(case, layer, fed, override, weights)
        if model is None:  # no float64 evidence; the scale rule stands in
            return {}
        spec1, wide_w, wide_in = model
        replies = self._pool_run(spec1, wide_w, weights_key(wide_w), wide_in, labels=labels)
        got = {x: r["logits"] for x, r in replies.items()
               if isinstance(r, dict) and r.get("logits") is not None and np.asarray(r["logits"]).dtype == np.float64}
        narrow = computed_in_float32(self._pool_run, spec1, wide_w, wide_in, got)
        return {x: a for x, a in got.items() if x not in narrow}


def _wide_model(case: TestCase, layer: str, fed: dict[str, np.ndarray], override: dict[str, Any] | None = None,
                weights: Weights | None = None) -> tuple[ModelSpec, Weights, dict[str, np.ndarray]] | None:
    """``layer`` alone as :meth:`Executor._run_wide` recomputes it: its ``exact`` float64
    one-layer spec, weights and input (None when it cannot stand alone)."""
    wide_in = {r: (v.astype(np.float64) if is_float(v) else v) for r, v in fed.items()}
    try:
        spec1 = one_layer_spec(case.spec, layer, wide_in, override={**(override or {}), "dtype": "float64"})
    except Exception:  # noqa: BLE001 - a layer that cannot stand alone
        return None
    spec1.exact = True  # computed in float64 where Keras would narrow it (Backend.keeping_float64)
    own = case.weights if weights is None else weights
    wide_w = {layer: [w.astype(np.float64) if is_float(w) else w for w in own[layer]]} if layer in own else {}
    return spec1, wide_w, wide_in


def _outside(scores: dict[str, dict[str, float]], a: str, b: str) -> dict[str, dict[str, float]] | None:
    """A float32 pair's float64 scores against the results of programs outside it
    (:func:`audee.backends.info.program_of`): a side's own float64 run, its reference's or
    ``jax-x64``'s for JAX, shares a fault no dtype makes (torch's RMSNormalization over the
    wrong axis; Keras' bias layout guess in TensorFlow's graph, which onnxruntime runs), so
    only the others say which side is on the exact result (``float64_within``).  None where
    no other program recomputed it.  The float64 floor reads them all: a shared fault only
    lowers it."""
    inside = {program_of(a), program_of(b)}
    kept = {x: {t: v for t, v in sides.items() if program_of(t) not in inside} for x, sides in scores.items()}
    return kept if any(kept.values()) else None


@dataclass
class Submitted:
    """A test case sent to the workers (:meth:`Executor.submit`), not yet judged."""

    case: TestCase
    outcomes: dict[str, Outcome]   # the backends that could not build it
    tickets: dict[str, int]        # the others: their run's ticket
    phases: "PhaseTally"
    started: float
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)  # left out by the refusal memo
    ordinal: int = 0               # its place in the run's order (the refusal memo's)


def _reduced(spec: ModelSpec, layer: str) -> bool:
    """Whether ``layer`` of ``spec`` computes in a reduced-precision dtype (float16, bfloat16)."""
    return reduced_precision(layer_compute_dtype(spec.layer(layer).params))


def _outputs(replies: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each backend's one-layer output among ``replies``, of those that gave one."""
    return {label: r["logits"] for label, r in replies.items() if isinstance(r, dict) and r.get("logits") is not None}


class PhaseTally:
    """Seconds per backend and phase over the worker requests of one test case."""

    def __init__(self, start: dict[str, dict[str, float]] | None = None):
        self.seconds: dict[str, dict[str, float]] = {}
        for label, phases in (start or {}).items():
            self.add(label, phases)

    def add(self, label: str, phases: dict[str, float]) -> None:
        mine = self.seconds.setdefault(label, {})
        for phase, s in phases.items():
            mine[phase] = mine.get(phase, 0.0) + float(s)

    def rounded(self) -> dict[str, dict[str, float]]:
        return {label: {p: round(max(s, 0.0), 5) for p, s in phases.items()} for label, phases in self.seconds.items()}


def fold_reduced_precision_flips(verdict: Verdict) -> None:
    """In a pair judged in a reduced precision (a GPU backend in TF32 mode, float16 or
    bfloat16 outputs), label flips that come with a deviation the per-layer judgement put
    down to accumulated rounding (``deviation_accumulated``) are a symptom of that
    deviation, not an inconsistency: a TF32 MobileNet-V2 moves its logits by up to 27% of
    their scale with no layer out of tolerance on its own input, and flips a few
    near-tied labels on the way (docs/oracles.md).  The flips are kept in the accumulated
    finding's detail (``label_flips``, ``flip_inputs``).  Full float32 pairs keep the
    paper's Definition 2 unchanged."""
    accumulated = {f.detail.pair: f for f in verdict.findings
                   if f.kind == Kind.DEVIATION_ACCUMULATED and (f.detail.dtype or "float32") != "float32"}
    if not accumulated:
        return
    kept = []
    for f in verdict.findings:
        acc = accumulated.get(f.detail.pair) if f.kind == Kind.INCONSISTENCY else None
        if acc is None:
            kept.append(f)
            continue
        acc.detail.label_flips = int(f.detail.flips)
        acc.detail.flip_inputs = list(f.detail.inputs or [])
    verdict.findings[:] = kept


def seed_batch(inputs: dict[str, np.ndarray], index: int, size: int) -> tuple[dict[str, np.ndarray], list[int]]:
    """A deterministic window of ``size`` seed inputs for test case ``index``; successive
    cases rotate through the seed set so every input gets used.  ``inputs`` must hold rows
    (:func:`audee.mutation.seeds.with_inputs` gives every seed some): an empty set is a caller's bug."""
    if not inputs or not all(np.shape(v)[:1] and np.shape(v)[0] for v in inputs.values()):
        raise ValueError("seed_batch: no seed inputs (resolve them with audee.mutation.seeds.with_inputs)")
    n = int(next(iter(inputs.values())).shape[0])
    size = min(size, n)
    start = (index * size) % n
    rows = [(start + k) % n for k in range(size)]
    return {k: v[rows] for k, v in inputs.items()}, rows


__all__ = ["Executor", "Result", "seed_batch", "Kind"]
