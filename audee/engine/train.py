"""The training phase's executor: one test case trained one step (or ``steps``) on every
backend that trains, judged by the training-phase oracles, a deviation pinned on a layer.

:class:`TrainExecutor` has the interface of :class:`audee.engine.execute.Executor` that the fuzz
loop uses (``build``, ``shapes``, ``complete_weights``, ``submit``, ``finish``, ``run``,
``pool``), so ``audee fuzz --phase train`` runs seeds, variants and API-level cases through
the same pipeline, rows and case files.  Per case:

1. the spec as the training phase runs it (:func:`audee.train.setup.train_spec`: layers
   random in training called in inference mode, the reason recorded) and its setup (loss,
   optimizer, targets' seed: drawn from the case's own stream, or the case file's);
2. one ``train`` request per backend that trains, all at once (converters answer that
   they do not; they are left out of the case, ``train.skipped`` says why);
3. the oracles (:func:`audee.oracle.train.train_findings`);
4. for a ``train_deviation``: the step again on the pair with every layer's training-mode
   output, then, on at most :data:`OWN_LAYER_CHECKS` layers, the layer alone fed backend
   ``a``'s input to it and trained one step with the probe loss on both backends (its
   output, its weights' and its input's gradients compared), and its conditioning (the
   same with the input moved by rounding noise); a layer out of tolerance alone and
   well-conditioned is blamed (``own_layers``).  The layers checked: where the forward
   pass deviates, those out of tolerance there (first, then by their jump, as the forward
   oracle does); where only gradients deviate, the layer nearest the loss whose gradient
   deviates and the weightless layers after it (a wrong backward pass corrupts its own
   gradient and every gradient before it, none after).  The loss alone (an Identity fed
   backend ``a``'s output, trained with the case's loss and targets) is checked when the
   loss deviates on an output that does not, or every layer's gradient does with none
   blamed.  Nothing blamed and everything judged: ``train_deviation_accumulated``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from audee.backends.pool import Pool, WorkerFailure, _as_failure
from audee.levels.base import Runner
from audee.cases.case import Finding, Kind, Outcome, TestCase, Verdict
from audee.engine.execute import BuildCache, PhaseTally, Result, complete_weights, first_shapes
from audee.oracle.compute_dtype import layer_compute_dtype
from audee.oracle.attribution import Alone, attribute
from audee.oracle.nan import condition_pattern
from audee.oracle.deviation import (DTYPE_ROUNDING, FULL, Tolerances, as_tolerances, jump_order, layer_scores,
                                    pair_compute, perturbed, rounding_for)
from audee.records.findings import OwnScore
from audee.settings import TIE_MARGIN
from audee.cases.spec import ModelSpec, layer_feed, one_layer_model, weights_key
from audee.oracle.regression import regression_findings
from audee.oracle.train import _blamed_layer, clipped_loss, mark_train_odd, pair_scores, train_findings
from audee.train.setup import TrainOutcome, TrainSetup, TrainSpec, draw_setup, train_spec
from audee.cases.weights import Shapes
from audee.core.floats import holds_nonfinite

log = logging.getLogger(__name__)

OWN_LAYER_CHECKS = 6   # layers judged alone per deviating pair (as the forward pass's diagnosis)
LOSS_CHECK = "@loss"   # the loss judged alone, in ``own`` and ``own_layers``


@dataclass
class TrainResult(Result):
    """A judged training-phase case: :class:`audee.engine.execute.Result` (``outcomes`` as the
    crash oracle reads them) plus each backend's training outcome and ``train``, the
    case's record (setup, layers called inactive, unjudged ones, backends skipped, losses)."""

    train: dict[str, Any] = field(default_factory=dict)
    trained: dict[str, TrainOutcome] = field(default_factory=dict)


@dataclass
class TrainSubmitted:
    case: TestCase
    spec: TrainSpec
    setup: TrainSetup
    outcomes: dict[str, TrainOutcome]
    tickets: dict[str, int]
    phases: PhaseTally
    started: float


class TrainExecutor(Runner):
    """Runs training-phase test cases on a :class:`Pool` (see the module docstring).

    ``losses``/``optimizers``: {name: weight} a case draws from; ``rng``: the run's seed
    (each case's setup comes from ``(rng, crc32(case id))``); ``learning_rate`` None: each
    optimizer's Keras default."""

    def __init__(self, pool: Pool, *, tie_margin: float = TIE_MARGIN, diagnose: bool = True,
                 tolerances: Tolerances | dict[str, Any] | None = None, losses: Mapping[str, float] | None = None,
                 optimizers: Mapping[str, float] | None = None, learning_rate: float | None = None, steps: int = 1,
                 rng: int = 0, **inference_only: Any):
        """``inference_only``: the inference executor's other options (the equivalence
        rules a run judges with), which the training phase has no use for."""
        from audee.train.setup import LOSSES, OPTIMIZERS

        self.pool = pool
        self.tie_margin = tie_margin
        self.tolerances = as_tolerances(tolerances)
        self.diagnose = diagnose
        self.losses = dict(losses or {n: 1.0 for n in LOSSES})
        self.optimizers = dict(optimizers or {n: 1.0 for n in OPTIMIZERS})
        self.learning_rate = learning_rate
        self.steps = steps
        self.rng = rng
        self._support: dict[str, str | None] | None = None
        self._builds = BuildCache()
        self._built, self._build_phases = self._builds.built, self._builds.phases
        self._tally: PhaseTally | None = None

    # ---- which backends train ------------------------------------------------------------------
    def support(self) -> dict[str, str | None]:
        """Each backend: None when it trains, else why not (asked once per worker)."""
        if self._support is None:
            self._support = self.pool.call_many(self.pool.labels, "training_support")
        return self._support

    @property
    def trainers(self) -> list[str]:
        return [label for label, why in self.support().items() if why is None]

    # ---- building ------------------------------------------------------------------------------
    def build(self, spec: ModelSpec) -> dict[str, Shapes | WorkerFailure]:
        """``spec`` as the training phase runs it (:func:`train_spec`) built on every
        backend that trains (no forward call compiled ahead: a training step compiles its own)."""
        spec = train_spec(spec).spec
        return self._builds.get(spec.key(), lambda: self.pool.build(spec, self.trainers, ahead=False))

    def shapes(self, spec: ModelSpec) -> Shapes | None:
        return first_shapes(self.build(spec))

    def complete_weights(self, case: TestCase, weight_seed: int) -> None:
        complete_weights(case, self.shapes(case.spec), weight_seed)

    # ---- running -------------------------------------------------------------------------------
    def setup_for(self, case: TestCase) -> TrainSetup:
        """The case's setup: the one its record holds (a case file re-run), else drawn."""
        recorded = (case.meta or {}).get("train")
        if isinstance(recorded, Mapping) and "loss" in recorded:
            return TrainSetup.from_json(recorded)
        spec = case.spec
        return draw_setup(case.id, self.rng, self.losses, self.optimizers, learning_rate=self.learning_rate,
                          steps=self.steps, from_logits=spec.output == spec.logits_layer)

    def run(self, case: TestCase) -> TrainResult:
        return self.finish(self.submit(case))

    def submit(self, case: TestCase) -> TrainSubmitted:
        t0 = time.perf_counter()
        ts = train_spec(case.spec)
        setup = self.setup_for(case)
        built = self.build(ts.spec)
        outcomes = {label: TrainOutcome(label, failure=got) for label, got in built.items()
                    if isinstance(got, WorkerFailure)}
        ready = [label for label, got in built.items() if not isinstance(got, WorkerFailure)]
        # the float inputs' gradients too: a weightless model's (or first layer's) backward pass is judged
        tickets = self._submit_train(ts.spec, case.weights, case.inputs, setup, ready, input_grads=True)
        return TrainSubmitted(case, ts, setup, outcomes, tickets, PhaseTally(self._build_phases.pop(ts.spec.key(), {})),
                              t0)

    def _submit_train(self, spec: ModelSpec, weights: Any, inputs: dict[str, np.ndarray], setup: TrainSetup,
                      labels: list[str], *, layers: bool = False, input_grads: bool = False) -> dict[str, int]:
        msg = {"op": "train", "spec": spec.to_json(), "key": spec.key(), "weights": weights,
               "weights_key": weights_key(weights), "inputs": inputs, "setup": setup.to_json(), "layers": layers,
               "input_grads": input_grads}
        out = {}
        for label in labels:
            worker = self.pool.workers[label]
            out[label] = worker.submit(msg, phase="train", resend=msg)
            worker._sent_specs.add(msg["key"])
        return out

    def _collect(self, tickets: dict[str, int], spec_key: str) -> dict[str, TrainOutcome]:
        modes = self.pool.precisions
        out = {}
        for label, t in tickets.items():
            got = _as_failure(self.pool.workers[label].result(t), "train")
            if isinstance(got, WorkerFailure):
                out[label] = TrainOutcome(label, failure=got, precision=modes.get(label, FULL))
                if got.hard:
                    self._built.pop(spec_key, None)  # the worker restarted: its models are gone
            elif "unsupported" in got:
                out[label] = TrainOutcome(label, unsupported=str(got["unsupported"]))
            else:
                if self._tally is not None:
                    self._tally.add(label, got.get("phases", {}))
                out[label] = TrainOutcome.from_reply(label, got, modes.get(label, FULL))
        return out

    def _train_on(self, spec: ModelSpec, weights: Any, inputs: dict[str, np.ndarray], setup: TrainSetup,
                  labels: list[str], **kwargs: Any) -> dict[str, TrainOutcome]:
        """A training step on ``labels`` at once, waited for (the diagnosis' runs)."""
        return self._collect(self._submit_train(spec, weights, inputs, setup, labels, **kwargs), spec.key())

    def finish(self, sub: TrainSubmitted) -> TrainResult:
        self._tally = sub.phases
        outcomes = dict(sub.outcomes)
        outcomes.update(self._collect(sub.tickets, sub.spec.spec.key()))
        for label, why in self.support().items():
            if why is not None:
                outcomes[label] = TrainOutcome(label, unsupported=why)
        return self.judge(sub.case, sub.spec, sub.setup, outcomes, sub.phases, sub.started)

    def judge(self, case: TestCase, ts: TrainSpec, setup: TrainSetup, outcomes: dict[str, TrainOutcome],
              phases: PhaseTally, started: float) -> TrainResult:
        self._tally = phases
        order = ts.spec.topological_order()
        ordered = [outcomes[label] for label in self.pool.labels if label in outcomes]
        findings, pairs = train_findings(ordered, order, self.tolerances, case.inputs, setup,
                                         judge_values=not ts.unjudged, initial=case.weights)
        if self.diagnose:
            for f in findings:
                if f.kind == Kind.TRAIN_DEVIATION and f.detail.pair is not None:
                    self._diagnose_deviation(case, ts, setup, f, outcomes)
                elif f.kind == Kind.TRAIN_NAN:
                    self._diagnose_nan(case, ts, setup, f, outcomes)
            mark_train_odd(ordered, findings)  # after every change of kind
        findings = regression_findings(findings, self.pool.versions())  # one backend under two releases
        judged = {o.backend: Outcome(o.backend, failure=o.failure, output=o.output, run_s=o.run_s,
                                     precision=o.precision) for o in ordered if o.unsupported is None}
        record = {**setup.to_json(), **ts.to_json()}
        skipped = {o.backend: o.unsupported for o in ordered if o.unsupported is not None}
        if skipped:
            record["skipped"] = skipped
        clipped = clipped_loss(ordered, setup)
        if clipped:
            record["unjudged_loss"] = clipped
        losses = {o.backend: [float(v) for v in np.asarray(o.losses).ravel()] for o in ordered
                  if o.ok and o.losses is not None}
        if losses:
            record["losses"] = losses
        case.meta["train"] = setup.to_json()
        result = TrainResult(case, Verdict(findings), judged, pairs, train=record,
                             trained={o.backend: o for o in ordered})
        self._tally = None
        result.phases = phases.rounded()
        result.seconds = time.perf_counter() - started
        return result

    # ---- diagnosis -----------------------------------------------------------------------------
    def _diagnose_deviation(self, case: TestCase, ts: TrainSpec, setup: TrainSetup, f: Finding,
                            outcomes: dict[str, TrainOutcome]) -> None:
        a, b = f.backends
        d = f.detail
        spec = ts.spec
        order = spec.topological_order()
        once = TrainSetup(setup.loss, setup.optimizer, setup.learning_rate, 1, setup.target_seed, setup.from_logits)
        got = self._train_on(spec, case.weights, case.inputs, once, [a, b], layers=True)
        if not (got.get(a) is not None and got[a].ok and got.get(b) is not None and got[b].ok):
            return
        ra, rb = got[a], got[b]
        compute = pair_compute(ra.precision, rb.precision)
        forward = layer_scores(ra.layers, rb.layers, order, self.tolerances, compute)
        out = [n for n in order if n in forward and forward[n]["score"] > 1.0]
        d.forward_first_layer = out[0] if out else None
        first = pair_scores(ra, rb, self.tolerances)
        grads_out = [n for n in order if n in first["gradient"] and first["gradient"][n]["score"] > 1.0]
        checks: list[str] = []
        if out:
            checks = jump_order(forward, order, spec.predecessors)[:OWN_LAYER_CHECKS]
        elif grads_out:
            last = grads_out[-1]
            checks = [last] + _weightless_after(order, last, set(first["gradient"]))
        elif any(v["score"] > 1.0 for v in first["input_gradient"].values()):
            checks = _leading(order, set(first["gradient"]))   # only the inputs' gradients deviate
        if d.first_layer is None:
            d.first_layer = d.forward_first_layer or (grads_out[-1] if grads_out else None)
        att = attribute(checks, order, lambda name: self._own(case, spec, name, ra.layers, [a, b], once), own=d.own)
        d.own_layers.extend(att.blamed)
        if att.ill_conditioned:
            d.ill_conditioned = [*(d.ill_conditioned or []), *att.ill_conditioned]
        judged = att.judged
        first_loss = first["loss"]
        loss_moved = first_loss is not None and first_loss["score"] > 1.0 and not out
        every_grad = bool(grads_out) and not d.own_layers and len(grads_out) == len(first["gradient"])
        if loss_moved or every_grad:
            # the loss alone: blamed or not, never listed ill-conditioned (it is no layer of the model)
            loss = attribute([LOSS_CHECK], [LOSS_CHECK], lambda _: self._own_loss(case, spec, once, ra, [a, b]),
                             own=d.own)
            if loss.judged:
                d.loss_own = bool(loss.blamed)
                judged += 1
                checks.append(LOSS_CHECK)
        d.layer = (d.own_layers[0] if d.own_layers else None) or (spec.output if d.loss_own else None) \
            or d.first_layer or (max(d.weights, key=d.weights.get) if d.weights else None)
        # the losses of later steps alone: the first step agreed, its updates moved the weights apart by rounding
        later_steps_only = (d.quantity == "loss" and setup.steps > 1 and not out and not grads_out
                            and (first_loss is None or first_loss["score"] <= 1.0))
        if later_steps_only or (not d.own_layers and not d.loss_own and checks and judged == len(checks)):
            f.kind = Kind.TRAIN_DEVIATION_ACCUMULATED

    def _own(self, case: TestCase, spec: ModelSpec, layer: str, layers_a: dict[str, np.ndarray], pair: list[str],
             setup: TrainSetup) -> Alone | None:
        """``layer`` alone, fed backend ``a``'s training-mode input to it, trained one step
        with the probe loss on both backends: its deviation and how to tell its conditioning, or None."""
        fed = layer_feed(spec, layer, layers_a, case.inputs)
        model = one_layer_model(spec, case.weights, layer, fed) if fed is not None else None
        if model is None:
            return None
        spec1, weights = model
        return self._alone(spec1, weights, fed, setup.probe(), pair)

    def _own_loss(self, case: TestCase, spec: ModelSpec, setup: TrainSetup, ra: TrainOutcome,
                  pair: list[str]) -> Alone | None:
        """The loss with the model's output layer alone (a framework may compute a loss
        from the op that made its input: TensorFlow's cross-entropies read the logits a
        softmax or a sigmoid keeps), fed backend ``a``'s input to that layer and trained
        with the case's loss and targets on both backends: its loss, output and gradients."""
        name = spec.output
        fed = layer_feed(spec, name, ra.layers, case.inputs)
        model = one_layer_model(spec, case.weights, name, fed) if fed is not None else None
        if model is None:
            return None
        spec1, weights = model
        return self._alone(spec1, weights, fed, setup, pair, keys=("loss", "output", "gradient", "input_gradient"))

    def _alone(self, spec1: ModelSpec, weights: Any, fed: dict[str, np.ndarray], setup: TrainSetup,
               pair: list[str], keys: tuple[str, ...] = ("output", "gradient", "input_gradient")
               ) -> Alone | None:
        """The one-layer model trained on both backends of ``pair``: its score over ``keys``,
        and its conditioning (the step again with ``fed`` moved by rounding noise, the
        larger change of either backend), run only when the attribution asks for it."""
        a, b = pair
        got = self._train_on(spec1, weights, fed, setup, pair, input_grads=True)
        if not all(got.get(x) is not None and got[x].ok for x in pair):
            return None
        score = _score(pair_scores(got[a], got[b], self.tolerances), keys)
        if score is None:
            return None

        def self_score() -> float:
            compute = pair_compute(got[a].precision, got[b].precision)
            # rounding noise of the precision the layer computes in: a float16 layer fed float32
            # inputs would round a float32-sized nudge away and look perfectly conditioned
            outs = {x: got[x].output for x in pair if got[x].output is not None}
            size = max([rounding_for(compute, {**fed, **outs})]
                       + [DTYPE_ROUNDING.get(layer_compute_dtype(ls.params), 0.0) for ls in spec1.layers])
            moved = self._train_on(spec1, weights, perturbed(fed, size=size), setup, pair, input_grads=True)
            worst = 0.0
            for x in pair:
                if moved.get(x) is None or not moved[x].ok:
                    worst = float("inf")
                    continue
                s = _score(pair_scores(got[x], moved[x], self.tolerances), keys)
                worst = max(worst, s if s is not None else 0.0)
            return worst

        return Alone(OwnScore(score=score), self_score=self_score)

    def _diagnose_nan(self, case: TestCase, ts: TrainSpec, setup: TrainSetup, f: Finding,
                      outcomes: dict[str, TrainOutcome]) -> None:
        """Each backend's first non-finite layer in the training-mode forward pass; the
        first where they differ becomes the blamed layer.  Where the forward pass does not
        differ, the backward pass is walked (:meth:`_walk_backward`): the layer whose own
        backward pass makes the non-finite gradient is blamed, not the weighted layer
        before it whose weight gradient the NaN reaches first."""
        labels = [b for b, o in outcomes.items() if o.ok]
        once = TrainSetup(setup.loss, setup.optimizer, setup.learning_rate, 1, setup.target_seed, setup.from_logits)
        got = self._train_on(ts.spec, case.weights, case.inputs, once, labels, layers=True)
        order = ts.spec.topological_order()
        firsts = {}
        for label, o in got.items():
            if not o.ok:
                continue
            bad = [n for n in order if n in o.layers and holds_nonfinite(o.layers[n])]
            if bad:
                firsts[label] = bad[0]
        f.detail.forward_first_layer = firsts
        ran = [label for label, o in got.items() if o.ok]
        if firsts and (len(set(firsts.values())) > 1 or len(firsts) < len(ran)):
            f.detail.layer = min(firsts.values(), key=order.index)  # the forward pass differs: it comes first
            return
        if len(ran) >= 2:
            self._walk_backward(case, ts.spec, f, {label: got[label] for label in ran}, once)

    def _walk_backward(self, case: TestCase, spec: ModelSpec, f: Finding, got: dict[str, TrainOutcome],
                       setup: TrainSetup) -> None:
        """The backward pass of a ``train_nan`` walked from the loss: a wrong (or
        singular) backward pass makes its own input gradient non-finite, and with it every
        gradient before it, none after.  The candidates are the layer nearest the loss whose
        weight gradient differs and the weightless layers after it (up to the next layer with
        weights, whose gradient agrees); each is run alone on every backend, fed its
        training-mode input, with the probe loss (a fixed finite cotangent), and its
        gradients (input and weights) compared by non-finite pattern under the conditioning
        rule (:func:`audee.oracle.nan.condition_pattern`).  Of those blamed, the one nearest
        the loss is the layer (``backward_layer``); every judged layer's verdict goes
        into ``backward``."""
        d = f.detail
        order = spec.topological_order()
        start = _blamed_layer(d.differ, order)
        weighted = {n for o in got.values() for n, ws in o.grads.items() if any(w is not None for w in ws)}
        if start is not None:
            checks = [start] + _weightless_after(order, start, weighted)
        elif any(q.startswith("input_grad:") for q in d.differ):
            checks = _leading(order, weighted)   # only the inputs' gradients differ: the layers before any weight
        else:
            return
        # fed from a backend finite everywhere when there is one (its forward pass is the clean one)
        feeder = next((b for b in d.finite_backends if b in got), next(iter(got)))
        labels = list(got)
        att = attribute(checks, order, lambda name: self._backward_alone(case, spec, name, got[feeder].layers,
                                                                         labels, setup))
        d.backward = {name: ("blamed" if name in att.blamed else att.reasons.get(name, "")) for name in att.own}
        if att.blamed:
            d.backward_layer = att.blamed[-1]   # the nearest the loss: the first the backward pass meets
            d.layer = d.backward_layer

    def _backward_alone(self, case: TestCase, spec: ModelSpec, layer: str, layers: dict[str, np.ndarray],
                        labels: list[str], setup: TrainSetup) -> Alone | None:
        """``layer`` alone on every backend with the probe loss: whether its gradients'
        non-finite pattern differs between a backend with a non-finite one and one without,
        and stands the conditioning rule (None: it cannot be judged alone, or is fed non-finite
        values: the forward pass's question)."""
        fed = layer_feed(spec, layer, layers, case.inputs)
        if fed is None or any(holds_nonfinite(v) for v in fed.values()):
            return None
        model = one_layer_model(spec, case.weights, layer, fed)
        if model is None:
            return None
        spec1, weights = model
        probe = setup.probe()
        got = self._train_on(spec1, weights, fed, probe, labels, input_grads=True)
        vectors = {b: _grad_vector(o) for b, o in got.items() if o.ok}
        vectors = {b: v for b, v in vectors.items() if v is not None}
        bad = [b for b, v in vectors.items() if not np.isfinite(v).all()]
        good = [b for b, v in vectors.items() if np.isfinite(v).all()]
        if not bad or not good or vectors[bad[0]].shape != vectors[good[0]].shape:
            return Alone(pattern=lambda: "accumulated")  # alike alone: no difference of its own
        pair = [bad[0], good[0]]

        def pattern() -> str | None:
            dtype = layer_compute_dtype(spec.layer(layer).params)   # judged in the layer's compute dtype
            compute = pair_compute(got[pair[0]].precision, got[pair[1]].precision)
            size = max(rounding_for(compute, fed), DTYPE_ROUNDING.get(dtype, 0.0))
            moved = self._train_on(spec1, weights, perturbed(fed, size=size), probe, pair, input_grads=True)
            again = {b: _grad_vector(o) for b, o in moved.items() if o.ok}
            return condition_pattern(fed, {b: vectors[b] for b in pair},
                                     {b: v for b, v in again.items() if v is not None and v.shape == vectors[b].shape},
                                     dtype)

        return Alone(pattern=pattern)


def _weightless_after(order: list[str], start: str, weighted: set[str]) -> list[str]:
    """The layers after ``start`` up to the next one with weights (whose gradient agrees: a
    wrong backward pass corrupts its own gradient and every gradient before it, none after),
    at most :data:`OWN_LAYER_CHECKS` - 1."""
    out: list[str] = []
    for name in order[order.index(start) + 1:]:
        if len(out) >= OWN_LAYER_CHECKS - 1 or name in weighted:
            break
        out.append(name)
    return out


def _leading(order: list[str], weighted: set[str]) -> list[str]:
    """The first layers up to and including the first with weights: where an input gradient
    that differs alone (every weight's gradient agreeing) can come from, at most
    :data:`OWN_LAYER_CHECKS`."""
    out: list[str] = []
    for name in order[:OWN_LAYER_CHECKS]:
        out.append(name)
        if name in weighted:
            break
    return out


def _grad_vector(o: TrainOutcome) -> np.ndarray | None:
    """A training step's input gradients and weight gradients as one float32 vector (the
    same order on every backend), or None when it has none."""
    parts = [np.asarray(o.input_grads[k]).astype(np.float32).ravel() for k in sorted(o.input_grads)]
    for layer in sorted(o.grads):
        parts += [np.asarray(g).astype(np.float32).ravel() for g in o.grads[layer] if g is not None]
    return np.concatenate(parts) if parts else None


def _score(scores: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    """The largest score among ``keys`` of a :func:`pair_scores` result (None: nothing compared)."""
    found = []
    for k in keys:
        v = scores.get(k)
        if v is None:
            continue
        if "score" in v:
            found.append(float(v["score"]))
        else:
            found += [float(x["score"]) for x in v.values()]
    return max(found) if found else None


__all__ = ["LOSS_CHECK", "OWN_LAYER_CHECKS", "TrainExecutor", "TrainResult", "TrainSubmitted"]
