"""The training-phase oracles: what a training step's outcomes on several backends mean.

Each backend that trains returns the first step's model output (training mode), the loss
of every step, the first step's gradient of every trainable weight (and of the float
inputs, asked for), and the weights after the first step (:class:`TrainOutcome`).  Three
oracles judge them, each reusing the inference phase's rule where one exists:

* **crashes** (:func:`audee.oracle.crash.crash_findings`, unchanged): a backend that fails
  where others train is a ``divergent_acceptance`` (or a ``hard_crash``) whose failure
  phase says where: ``train`` (the forward pass in training mode, the loss), ``gradient``
  (differentiation), ``update`` (the optimizer step); all failing alike is a
  ``consistent_rejection``.  Backends that do not train (converters) are no outcome here.
* **train_nan**: the quantities holding NaN/Inf (:meth:`TrainOutcome.nonfinite`) differ
  between backends; the same ones everywhere (a loss that overflows for every framework)
  are no finding.
* **train_deviation**: a pair's values out of tolerance, judged by the deviation oracle's
  one rule (:func:`audee.oracle.deviation.compare`: ``|a - b| > atol + rtol * s``,
  tolerances per dtype, ``s`` the largest |value| of the row): the model output row by
  row, the losses step by step, and each weight's gradient and updated value as one row
  (so ``s`` is the largest |gradient| of that weight).  Only values finite on both sides
  are judged (non-finite ones are the NaN oracle's).

The per-layer judgement (which layer's gradient deviates on its own input) is the
executor's (:mod:`audee.engine.train`), as for the forward pass.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable, Mapping

import numpy as np

from audee.cases.case import Finding, Kind, Outcome
from audee.cases.kinds import CRASHES
from audee.oracle.crash import crash_findings
from audee.oracle.deviation import FULL, Tolerances, as_tolerances, compare, pair_compute
from audee.oracle.odd import acceptance_groups, minority, odd_of_pairs
from audee.records.findings import ToleranceDetail, TrainDeviationDetail, TrainNanDetail
from audee.train.setup import TrainOutcome, TrainSetup, quantity_layer, reference_update
from audee.core.floats import holds_nonfinite

#: what a training step computes, in order; a pair's finding names the first out of tolerance
#: (``weights``: the ones the optimizer does not move, the moving statistics; the update of
#: the trained ones is judged per backend, quantity ``update``)
QUANTITIES = ("output", "loss", "gradient", "weights")
MAX_LISTED = 32
#: ``keras.config.epsilon()``: Keras' cross-entropies on probabilities clip them to [EPSILON, 1 - EPSILON]
EPSILON = 1e-7
PROBABILITY_LOSSES = ("categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy")


def clipped_loss(outcomes: Iterable[TrainOutcome], setup: TrainSetup | None) -> str | None:
    """Why the loss, and the gradients that follow from it, are not compared across
    backends on this step (None: they are).  A cross-entropy on probabilities (``from_logits`` False)
    is not one rule where a probability is in Keras' clip region: Keras on TensorFlow
    computes the loss from the logits it attached to a softmax or sigmoid output
    (``_keras_logits``, exact: -log p however small p is, and its gradient ``p - y``),
    PyTorch and JAX from the probabilities clipped to [1e-7, 1 - 1e-7] (the loss stops at
    -log 1e-7, the clipped entries pass no gradient).  Both are Keras' intended code
    (keras/src/backend/*/nn.py); outside the clip region they agree within rounding, so
    the region is left out, never the loss: a cross-entropy that takes the wrong logits
    (findings row 22) still shows on every unsaturated case."""
    if setup is None or setup.from_logits or setup.loss not in PROBABILITY_LOSSES:
        return None
    for o in outcomes:
        if not o.ok or o.output is None:
            continue
        p = np.asarray(o.output).astype(np.float64)
        p = p[np.isfinite(p)]
        if p.size and (p.min() < EPSILON or p.max() > 1.0 - EPSILON):
            return (f"{setup.loss} on probabilities in Keras' clip region (a value beyond [{EPSILON:g}, "
                    f"1 - {EPSILON:g}] on {o.backend}): TensorFlow computes it from the attached logits, PyTorch "
                    "and JAX from the clipped probabilities; the loss and gradients are not compared across backends")
    return None


def as_outcomes(outcomes: Iterable[TrainOutcome]) -> list[Outcome]:
    """The training outcomes as the crash oracle and the odd-backend rule read them."""
    return [Outcome(o.backend, failure=o.failure, precision=o.precision) for o in outcomes if o.unsupported is None]


def _row(a: Any) -> np.ndarray:
    """A weight's gradient or value as one row (its scale: its own largest |value|)."""
    a = np.asarray(a)
    return a.reshape(1, -1) if a.size else a.reshape(1, 0)


def _compare_rows(a: Any, b: Any, tol: Tolerances, compute: str) -> dict[str, Any] | None:
    if a is None or b is None:
        return None
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return {"score": float("inf"), "max_abs": float("inf"), "max_rel": float("inf"), "dtype": None,
                "tolerance": None, "shape": [list(a.shape), list(b.shape)]}
    return compare(_row(a), _row(b), tol, compute=compute)


def weight_scores(ga: Mapping[str, list], gb: Mapping[str, list], tol: Tolerances,
                  compute: str = FULL) -> dict[str, dict[str, Any]]:
    """Per layer both sides have: the worst :func:`compare` result over its weights (each
    weight one row), with ``weight``: the index of the worst one."""
    out: dict[str, dict[str, Any]] = {}
    for layer in ga:
        if layer not in gb:
            continue
        worst = None
        for k, (a, b) in enumerate(zip(ga[layer], gb[layer])):
            got = _compare_rows(a, b, tol, compute)
            if got is not None and (worst is None or got["score"] > worst["score"]):
                worst = {**got, "weight": k}
        if worst is not None:
            out[layer] = worst
    return out


def pair_scores(a: TrainOutcome, b: TrainOutcome, tol: Tolerances | Mapping | None = None,
                loss: bool = True) -> dict[str, Any]:
    """Every comparison of a pair's training step: ``output`` (rows of the batch), ``loss``
    (one row per step), ``gradient`` and ``weights`` (per layer, :func:`weight_scores`),
    ``input_gradient`` (per model input, as one row each).  ``loss`` False (the step's
    loss is not one rule, :func:`clipped_loss`): the output and the moving statistics
    only."""
    tol = as_tolerances(tol)
    compute = pair_compute(a.precision, b.precision)
    if a.output is not None and b.output is not None:  # the step computed in its output's precision
        tol = tol.at_most(tol.dtype_of(np.asarray(a.output), np.asarray(b.output)))
    out: dict[str, Any] = {"output": None, "loss": None}
    if a.output is not None and b.output is not None and np.shape(a.output) == np.shape(b.output) \
            and np.ndim(a.output) > 0:
        out["output"] = compare(np.asarray(a.output), np.asarray(b.output), tol, compute=compute)
    out["weights"] = weight_scores(_untrained(a), _untrained(b), tol, compute)
    if not loss:
        return {**out, "gradient": {}, "input_gradient": {}}
    if a.losses is not None and b.losses is not None and np.size(a.losses) == np.size(b.losses):
        la = np.asarray(a.losses, dtype=np.float32).reshape(-1, 1)
        lb = np.asarray(b.losses, dtype=np.float32).reshape(-1, 1)
        out["loss"] = compare(la, lb, tol, compute=compute)
    out["gradient"] = weight_scores(a.grads, b.grads, tol, compute)
    out["input_gradient"] = {k: got for k in a.input_grads if k in b.input_grads
                             for got in [_compare_rows(a.input_grads[k], b.input_grads[k], tol, compute)]
                             if got is not None}
    return out


def _untrained(o: TrainOutcome) -> dict[str, list]:
    """The weights the optimizer does not move (moving statistics, updated by the forward
    pass in training mode), None in the slots of trained ones."""
    return {layer: [w if (o.grads.get(layer) is None or k >= len(o.grads[layer]) or o.grads[layer][k] is None)
                    else None for k, w in enumerate(ws)] for layer, ws in o.weights.items()}


def update_scores(o: TrainOutcome, initial: Mapping[str, list], setup: TrainSetup,
                  tol: Tolerances | Mapping | None = None) -> dict[str, dict[str, Any]]:
    """Per layer: how far the backend's trained weights after the first step are from its
    optimizer's step on its own first gradient (:func:`audee.train.setup.reference_update`),
    the worst weight's :func:`compare` result, in the weight's dtype."""
    tol = as_tolerances(tol)
    out: dict[str, dict[str, Any]] = {}
    for layer, grads in o.grads.items():
        if layer not in initial or layer not in o.weights:
            continue
        worst = None
        for k, g in enumerate(grads):
            if g is None or k >= len(o.weights[layer]) or k >= len(initial[layer]):
                continue
            got = np.asarray(o.weights[layer][k])
            want = reference_update(setup, initial[layer][k], g, got.dtype if got.dtype.kind == "f" else np.float32)
            if not (np.isfinite(want.astype(np.float64)).all() and np.isfinite(got.astype(np.float64)).all()):
                continue  # non-finite values: the NaN oracle's
            res = update_score(initial[layer][k], got, want, tol, o.precision)
            if res is not None and (worst is None or res["score"] > worst["score"]):
                worst = {**res, "weight": k}
        if worst is not None:
            out[layer] = worst
    return out


def update_score(w0: Any, got: Any, want: Any, tol: Tolerances, compute: str = FULL) -> dict[str, Any] | None:
    """A weight's update judged against its reference, one row: ``|got - want| / (atol +
    rtol * u + r)`` with ``u`` the largest |reference update| (``want - w0``: the update's
    own scale, not the weight's, which would hide any update smaller than ``rtol`` of the
    weight) and ``r`` four ulps of the weight's dtype at its largest |value| (storing
    ``w - update`` rounds there: an update below that cannot be told apart)."""
    got, want, w0 = (np.asarray(x) for x in (got, want, w0))
    if got.shape != want.shape or got.shape != w0.shape or not got.size:
        return None
    dt, t = as_tolerances(tol).for_arrays(got, got, compute)
    g64, r64, w64 = (x.astype(np.float64).ravel() for x in (got, want, w0))
    try:
        ulp = float(np.finfo(got.dtype).eps)
    except ValueError:  # bfloat16 and other numpy-foreign floats: as float32
        ulp = float(np.finfo(np.float32).eps) if got.dtype.name != "bfloat16" else 2.0 ** -7
    u = float(np.abs(r64 - w64).max())
    r = 4.0 * ulp * float(np.abs(w64).max())
    diff = np.abs(g64 - r64)
    err = diff / (t.atol + t.rtol * u + r)
    return {"score": float(err.max()), "max_abs": float(diff.max()), "max_rel": float(diff.max() / u) if u else 0.0,
            "dtype": dt, "tolerance": {"rtol": float(t.rtol), "atol": float(t.atol)}}


def update_findings(outcomes: list[TrainOutcome], initial: Mapping[str, list], setup: TrainSetup,
                    order: list[str], tol: Tolerances | Mapping | None = None) -> list[Finding]:
    """One ``train_deviation`` (quantity ``update``) per backend whose optimizer step is out
    of tolerance of the Keras update rule applied to its own gradient; ``odd`` is that
    backend when the others' steps are right."""
    ok = [o for o in outcomes if o.ok]
    scores = {o.backend: update_scores(o, initial, setup, tol) for o in ok}
    bad = {b: {layer: v for layer, v in s.items() if v["score"] > 1.0} for b, s in scores.items()}
    bad = {b: v for b, v in bad.items() if v}
    out = []
    for b, layers in bad.items():
        layer = min(layers, key=lambda n: order.index(n) if n in order else len(order))
        head = max(layers.values(), key=lambda v: v["score"])
        d = TrainDeviationDetail(
            quantity="update", score=float(head["score"]), max_abs=head.get("max_abs"), max_rel=head.get("max_rel"),
            dtype=head.get("dtype"), tolerance=ToleranceDetail(**head["tolerance"]) if head.get("tolerance") else None,
            scores={"update": float(head["score"])}, weights={n: float(v["score"]) for n, v in layers.items()},
            first_layer=layer, own_layers=[], own={}, layer=layer, setup=setup.to_json())
        if len(ok) == 1:
            d.odd, d.odd_rule = [b], "the update rule itself is the reference"
        else:
            odd, rule = minority({o.backend: o.backend in bad for o in ok})
            d.odd, d.odd_rule = list(odd), rule
        out.append(Finding(Kind.TRAIN_DEVIATION, [b], d))
    return out


def _worst(scores: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return max(scores.values(), key=lambda s: s["score"], default=None)


def deviation_finding(a: TrainOutcome, b: TrainOutcome, order: list[str], tol: Tolerances | Mapping | None = None,
                      setup: Mapping[str, Any] | None = None, scores: dict[str, Any] | None = None) -> Finding | None:
    """The pair's ``train_deviation`` finding, or None when everything is within tolerance
    (``scores``: the pair's :func:`pair_scores`, when already computed)."""
    s = pair_scores(a, b, tol) if scores is None else scores
    heads = {"output": s["output"], "loss": s["loss"], "gradient": _worst({**s["gradient"], **{
        "@" + k: v for k, v in s["input_gradient"].items()}}), "weights": _worst(s["weights"])}
    scores = {q: float(h["score"]) for q, h in heads.items() if h is not None}
    if not scores or max(scores.values()) <= 1.0:
        return None
    quantity = next(q for q in QUANTITIES if scores.get(q, 0.0) > 1.0)
    head = heads[quantity]
    out_of = {layer: float(v["score"]) for layer, v in s["gradient"].items() if v["score"] > 1.0}
    gradient_layers = sorted(out_of, key=lambda n: order.index(n) if n in order else -1)
    d = TrainDeviationDetail(
        pair=f"{a.backend}|{b.backend}", quantity=quantity, score=max(scores.values()),
        max_abs=head.get("max_abs"), max_rel=head.get("max_rel"),
        step=(s["loss"]["rows"][0] if quantity == "loss" and s["loss"]["rows"] else None),
        dtype=head.get("dtype"), tolerance=ToleranceDetail(**head["tolerance"]) if head.get("tolerance") else None,
        scores={q: v for q, v in scores.items()},
        losses={o.backend: [float(v) for v in np.asarray(o.losses).ravel()] for o in (a, b) if o.losses is not None},
        gradients=out_of,
        input_gradients={k: float(v["score"]) for k, v in s["input_gradient"].items() if v["score"] > 1.0},
        weights={layer: float(v["score"]) for layer, v in s["weights"].items() if v["score"] > 1.0},
        # the gradient is computed backward: the layer nearest the loss out of tolerance comes first
        first_layer=gradient_layers[-1] if gradient_layers and quantity in ("gradient", "weights") else None,
        own_layers=[], own={}, setup=dict(setup or {}))
    return Finding(Kind.TRAIN_DEVIATION, [a.backend, b.backend], d)


def nan_finding(outcomes: list[TrainOutcome], order: list[str], inputs: Mapping[str, np.ndarray] | None = None,
                setup: Mapping[str, Any] | None = None) -> Finding | None:
    """One ``train_nan`` finding when the backends' non-finite quantities differ."""
    ok = [o for o in outcomes if o.ok]
    if len(ok) < 2:
        return None
    lists = _judged_nonfinite(ok)
    if len({tuple(v) for v in lists.values()}) <= 1:
        return None  # alike everywhere (nothing, or the same overflow on every framework)
    every = [set(v) for v in lists.values()]
    differ = sorted(set.union(*every) - set.intersection(*every), key=_quantity_order(order))
    bad = [b for b, v in lists.items() if v]
    finite = [b for b, v in lists.items() if not v]
    d = TrainNanDetail(
        nonfinite={b: v[:MAX_LISTED] for b, v in lists.items() if v}, first={b: v[0] for b, v in lists.items() if v},
        differ=differ[:MAX_LISTED], finite_backends=finite, strong=bool(finite),
        input_nonfinite=any(holds_nonfinite(v) for v in (inputs or {}).values()),
        layer=_blamed_layer(differ, order),
        losses={o.backend: [float(v) for v in np.asarray(o.losses).ravel()] for o in ok if o.losses is not None},
        setup=dict(setup or {}))
    return Finding(Kind.TRAIN_NAN, sorted(bad) if len(bad) < len(ok) else [o.backend for o in ok], d)


def _nonfinite(o: TrainOutcome) -> list[str]:
    out = o.nonfinite()
    if o.output is not None:
        if holds_nonfinite(o.output):
            out.insert(0, "output")
    return out


def _judged_nonfinite(ok: list[TrainOutcome]) -> dict[str, list[str]]:
    """Each backend's non-finite quantities as the NaN oracle compares them: where the first
    step's loss is non-finite on every backend, its gradient is undefined everywhere (how a
    framework propagates NaN backwards, and what the next steps make of it, is not the
    question), so only the first forward pass is compared (``output``, ``loss@0``)."""
    lists = {o.backend: _nonfinite(o) for o in ok}
    if lists and all("loss@0" in v for v in lists.values()):
        lists = {b: [q for q in v if q in ("output", "loss@0")] for b, v in lists.items()}
    return lists


def _quantity_order(order: list[str]) -> Any:
    kinds = ["output", "loss", "grad", "input_grad", "weights"]

    def key(q: str) -> tuple:
        kind = q.split("@")[0].split(":")[0]
        layer = quantity_layer(q)
        return (kinds.index(kind) if kind in kinds else len(kinds),
                -(order.index(layer) if layer in order else -1), q)
    return key


def _blamed_layer(differ: list[str], order: list[str]) -> str | None:
    """The layer of the first differing gradient in backward order (the nearest the
    loss), else of the first differing weight; None for a loss or an output alone."""
    for prefix in ("grad:", "weights:"):
        layers = [quantity_layer(q) for q in differ if q.startswith(prefix)]
        layers = [n for n in layers if n in order]
        if layers:
            return max(layers, key=order.index)
    return None


def train_findings(outcomes: list[TrainOutcome], order: list[str], tol: Tolerances | Mapping | None = None,
                   inputs: Mapping[str, np.ndarray] | None = None, setup: TrainSetup | None = None,
                   judge_values: bool = True, initial: Mapping[str, list] | None = None,
                   ) -> tuple[list[Finding], dict[str, dict[str, float]]]:
    """The findings of one training step's outcomes, and per pair its scores (a results
    row's ``pairs``: the largest score of each quantity).  ``judge_values`` False: only the
    crash oracle (a spec whose layers are random in training: their values differ
    everywhere).  ``initial``: the weights the step started from (with ``setup``, each
    backend's update is judged against its own gradient).  Sets ``odd`` on every failure
    finding (:mod:`audee.oracle.odd`'s rules: crashes by acceptance, NaN by the backends'
    non-finite lists, deviations by pairs).  A step whose loss is not one rule
    (:func:`clipped_loss`) has its output, moving statistics and each backend's update
    of its own gradient judged, not the loss and gradients across backends."""
    judged = [o for o in outcomes if o.unsupported is None]
    loss = clipped_loss(judged, setup) is None
    findings = crash_findings(as_outcomes(judged))
    pairs: dict[str, dict[str, float]] = {}
    meta = setup.to_json() if setup is not None else {}
    if judge_values:
        nan = nan_finding(judged, order, inputs, meta)
        if nan is not None:
            findings.append(nan)
        ok = [o for o in judged if o.ok]
        for a, b in combinations(ok, 2):
            s = pair_scores(a, b, tol, loss)
            f = deviation_finding(a, b, order, tol, meta, s)
            pairs[f"{a.backend}|{b.backend}"] = {q: round(float(v["score"]), 6) for q, v in (
                ("output", s["output"]), ("loss", s["loss"]), ("gradient", _worst(s["gradient"])),
                ("weights", _worst(s["weights"]))) if v is not None}
            if f is not None:
                findings.append(f)
        if initial is not None and setup is not None:  # each backend's own gradient: still one rule
            findings += update_findings(judged, initial, setup, order, tol)
    mark_train_odd(judged, findings)
    return findings, pairs


def mark_train_odd(outcomes: list[TrainOutcome], findings: list[Finding]) -> None:
    """``odd``/``odd_rule`` on the training-phase findings (crash kinds keep the crash rule)."""
    ran = [o.backend for o in outcomes if o.ok]
    failing = {frozenset(f.detail.pair.split("|")) for f in findings
               if f.kind == Kind.TRAIN_DEVIATION and isinstance(f.detail.pair, str)}
    for f in findings:
        if not f.is_failure:
            continue
        if f.kind in CRASHES:
            odd, rule = minority(acceptance_groups(as_outcomes(outcomes)))
        elif f.kind == Kind.TRAIN_NAN:
            odd, rule = minority({b: tuple(v) for b, v in _judged_nonfinite([o for o in outcomes if o.ok]).items()})
        elif f.kind == Kind.TRAIN_DEVIATION and f.detail.pair is None:
            continue  # an update judged against its rule: update_findings set it
        elif f.kind == Kind.TRAIN_DEVIATION:
            odd, rule = odd_of_pairs(ran, failing)
        else:
            continue
        f.detail.odd, f.detail.odd_rule = list(odd), rule


__all__ = ["EPSILON", "QUANTITIES", "as_outcomes", "clipped_loss", "deviation_finding", "mark_train_odd", "nan_finding", "pair_scores",
           "train_findings", "weight_scores"]
